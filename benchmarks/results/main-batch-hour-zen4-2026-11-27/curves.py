"""Print the validation curves of this folder's hours beside the earlier ones (curves.md), from the
kept metrics files: ``python curves.py`` (any working directory)."""

import runpy
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent
# The table is the 2026-11-26 folder's (one home), run from its path: both scripts are curves.py.
TABLE = RESULTS / "main-batch-hour-zen4-2026-11-26" / "probe" / "curves.py"

RUNS = {
    "4096, seed 1 (the preset)": RESULTS / "native-bf16-zen4-2026-11-26" / "hour" / "metrics.jsonl",
    "1024, seed 1": RESULTS / "main-batch-hour-zen4-2026-11-26" / "b1024" / "metrics.jsonl",
    "1024, seed 2": HERE / "b1024-seed2" / "metrics.jsonl",
    "1024, post-norm": HERE / "b1024-postnorm" / "metrics.jsonl",
}


if __name__ == "__main__":
    runpy.run_path(str(TABLE))["print_table"](RUNS)
