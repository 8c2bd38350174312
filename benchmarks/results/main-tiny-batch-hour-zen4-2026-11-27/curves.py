"""Print the validation curves of this folder's Transformer-Tiny hours beside the main job's at 1,024
tokens (curves.md), from the kept metrics files: ``python curves.py`` (any working directory)."""

import runpy
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent
# The table is the 2026-11-26 folder's (one home), run from its path: both scripts are curves.py.
TABLE = RESULTS / "main-batch-hour-zen4-2026-11-26" / "probe" / "curves.py"

RUNS = {
    "d256, 1024, seed 1": RESULTS / "main-batch-hour-zen4-2026-11-26" / "b1024" / "metrics.jsonl",
    "tiny, 1024, lr 0.005 (stopped)": HERE / "tiny-b1024-lr5e-3-stopped" / "metrics.jsonl",
    "tiny, 1024, lr 0.0025": HERE / "tiny-b1024" / "metrics.jsonl",
    "tiny, 1024, lr 0.0025, cooldown 0.4": HERE / "tiny-b1024-cooldown0.4" / "metrics.jsonl",
}

if __name__ == "__main__":
    runpy.run_path(str(TABLE))["print_table"](RUNS)
