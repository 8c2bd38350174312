"""The ``csan`` command line: train, translate, evaluate, info, average, bench, and the experiments
(compare, ablate, analyze, plot, stn).

User mistakes (a bad file, an unknown option) print one line ``csan: error: ...`` and exit with
status 2; no traceback. ``csan train`` stopped by SIGINT or SIGTERM saves a checkpoint and exits with
128 + the signal's number (130, 143); the same command resumes it.

The parser is in :mod:`csan.cli.parser`, what each command does in :mod:`csan.cli.commands`.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence

from csan.cli.parser import build_parser
from csan.errors import CsanError

__all__ = ["build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``csan`` and ``python -m csan``; returns the exit status.

    Example:
        >>> import contextlib, io
        >>> with contextlib.redirect_stdout(io.StringIO()) as out:
        ...     status = main(["attention"])
        >>> status, out.getvalue().splitlines()[-1], "csan2d" in out.getvalue()
        (0, 'cross-attention: conv_qkv, vanilla', True)
        >>> main(["info", "--config", "no-such-preset"])  # "csan: error: ..." goes to stderr
        2
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("csan").setLevel(logging.DEBUG if args.verbose else logging.INFO)
    try:
        return int(args.func(args) or 0)
    except CsanError as e:
        print(f"csan: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("csan: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
