"""``python -m csan`` (also what ``torchrun -m csan`` runs)."""

import sys

from csan.cli import main

sys.exit(main())
