"""Print the validation curves of the three hours (curves.md) from the kept metrics files."""

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
RUNS = {
    "4096 (the preset)": HERE.parent / "native-bf16-zen4-2026-11-26" / "hour" / "metrics.jsonl",
    "2048": HERE / "b2048" / "metrics.jsonl",
    "1024": HERE / "b1024" / "metrics.jsonl",
}


def print_curves(runs: dict[str, Path]) -> dict[str, list[dict]]:
    """Print the table of validations at 10, 20, ... 60 minutes; return each run's validations."""
    valid = {}
    for name, path in runs.items():
        with path.open() as f:
            valid[name] = [json.loads(line) for line in f if '"valid"' in line]
    print("| minutes | " + " | ".join(f"{k}: epoch, loss, BLEU" for k in runs) + " |")
    print("|---:|" + "---|" * len(runs))
    for minutes in (10, 20, 30, 40, 50, 60):
        cells = []
        for name in runs:
            rows = [r for r in valid[name] if r["wall_seconds"] <= minutes * 60]
            # a run stopped early shows "-" after its end, not its last validation again
            ended = valid[name][-1]["wall_seconds"] < (minutes - 10) * 60
            r = rows[-1] if rows and not ended else None
            cells.append(
                f"{r['epoch']:.0f} at {r['wall_seconds'] / 60:.1f} min, {r['loss']:.3f}, {r['bleu']:.2f}"
                if r
                else "-"
            )
        print(f"| {minutes} | " + " | ".join(cells) + " |")
    return valid


def print_table(runs: dict[str, Path]) -> None:
    """Print the curves at 10, 20, ... 60 minutes, then each hour's best validation loss."""
    valid = print_curves(runs)
    print()
    print("| hour | best valid loss (bits), epoch |")
    print("|---|---|")
    for name, rows in valid.items():
        best = min(rows, key=lambda r: r["loss"])
        print(f"| {name} | {best['loss']:.3f}, {best['epoch']:.0f} |")


def main() -> None:
    print_curves({f"max_tokens {k}": path for k, path in RUNS.items()})


if __name__ == "__main__":
    main()
