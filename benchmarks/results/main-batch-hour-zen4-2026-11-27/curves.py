"""Print the validation curves of this folder's hours beside the earlier ones (curves.md), from the
kept metrics files: ``python curves.py`` (any working directory)."""

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent
RUNS = {
    "4096, seed 1 (the preset)": RESULTS / "native-bf16-zen4-2026-11-26" / "hour" / "metrics.jsonl",
    "1024, seed 1": RESULTS / "main-batch-hour-zen4-2026-11-26" / "b1024" / "metrics.jsonl",
    "1024, seed 2": HERE / "b1024-seed2" / "metrics.jsonl",
    "1024, post-norm": HERE / "b1024-postnorm" / "metrics.jsonl",
}


def main() -> None:
    valid = {}
    for name, path in RUNS.items():
        with path.open() as f:
            valid[name] = [json.loads(line) for line in f if '"valid"' in line]
    print("| minutes | " + " | ".join(f"{k}: epoch, loss, BLEU" for k in RUNS) + " |")
    print("|---:|" + "---|" * len(RUNS))
    for minutes in (10, 20, 30, 40, 50, 60):
        cells = []
        for name in RUNS:
            rows = [r for r in valid[name] if r["wall_seconds"] <= minutes * 60]
            r = rows[-1] if rows else None
            cells.append(
                f"{r['epoch']:.0f} at {r['wall_seconds'] / 60:.1f} min, {r['loss']:.3f}, {r['bleu']:.2f}"
                if r
                else "-"
            )
        print(f"| {minutes} | " + " | ".join(cells) + " |")
    print()
    print("| hour | best valid loss (bits), epoch |")
    print("|---|---|")
    for name in RUNS:
        best = min(valid[name], key=lambda r: r["loss"])
        print(f"| {name} | {best['loss']:.3f}, {best['epoch']:.0f} |")


if __name__ == "__main__":
    main()
