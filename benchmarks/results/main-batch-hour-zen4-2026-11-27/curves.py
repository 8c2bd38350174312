"""Print the validation curves of this folder's hours beside the earlier ones (curves.md), from the
kept metrics files: ``python curves.py`` (any working directory)."""

import importlib.util
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent
# The table itself is the 2026-11-26 folder's (one home), loaded by its path: both scripts are curves.py.
_SPEC = importlib.util.spec_from_file_location(
    "curves_2026_11_26", RESULTS / "main-batch-hour-zen4-2026-11-26" / "probe" / "curves.py"
)
_CURVES = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_CURVES)

RUNS = {
    "4096, seed 1 (the preset)": RESULTS / "native-bf16-zen4-2026-11-26" / "hour" / "metrics.jsonl",
    "1024, seed 1": RESULTS / "main-batch-hour-zen4-2026-11-26" / "b1024" / "metrics.jsonl",
    "1024, seed 2": HERE / "b1024-seed2" / "metrics.jsonl",
    "1024, post-norm": HERE / "b1024-postnorm" / "metrics.jsonl",
}


if __name__ == "__main__":
    _CURVES.print_table(RUNS)
