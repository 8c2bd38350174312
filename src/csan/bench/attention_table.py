"""The attention benchmark's rows as text: one line per row, and the markdown table with the ratios
to the reference backend."""

from __future__ import annotations

from typing import Any

__all__ = ["REFERENCE", "format_row", "markdown_table"]

REFERENCE = "sdpa"  # the backend every ratio divides by


def format_row(row: dict[str, Any]) -> str:
    """One benchmark row as a line of text: its times (and memory), or its status when not ``ok``.

    Example:
        >>> row = {"case": "csan2d", "batch": 8, "time": 64, "head_window": 3, "backend": "sdpa",
        ...        "status": "ok", "forward_ms": 1.5, "train_ms": 4.0}
        >>> format_row(row)
        'csan2d   b=8   T=64     N=3 sdpa     fwd      1.50 ms  fwd+bwd      4.00 ms'
        >>> format_row({**row, "backend": "dense", "status": "oom"})
        'csan2d   b=8   T=64     N=3 dense    oom'
    """
    head = f"{row['case']:8} b={row['batch']:<3} T={row['time']:<6} N={row['head_window']} {row['backend']:8}"
    if row["status"] != "ok":
        return f"{head} {row['status']}"
    text = f"{head} fwd {row['forward_ms']:9.2f} ms  fwd+bwd {row['train_ms']:9.2f} ms"
    if "peak_mib" in row:
        text += f"  peak {row['peak_mib']:8.1f} MiB  workspace {row['workspace_mib']:8.1f} MiB"
    return text


def _ratio(num: float | None, den: float | None) -> str:
    return f"{num / den:.1f}x" if num and den else "-"


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """A markdown table of ``rows`` with the sdpa/backend ratios of time and workspace.

    Example:
        >>> sdpa = {"case": "csan2d", "batch": 8, "time": 64, "head_window": 3, "backend": "sdpa",
        ...         "status": "ok", "forward_ms": 1.5, "train_ms": 4.0, "workspace_mib": 8.0}
        >>> dense = {**sdpa, "backend": "dense", "train_ms": 2.0, "workspace_mib": 2.0}
        >>> markdown_table([sdpa, dense]).splitlines()[-1]  # dense: 2x faster, 4x less workspace
        '| csan2d | 8 x 64 | 3 | dense | 1.50 | 2.00 | - | 2.0 | 2.0x | 4.0x |'
    """
    reference = {
        (r["case"], r["batch"], r["time"], r["head_window"]): r
        for r in rows
        if r["backend"] == REFERENCE and r["status"] == "ok"
    }
    lines = [
        "| case | batch x time | N | backend | forward ms | fwd+bwd ms | peak MiB | workspace MiB "
        f"| {REFERENCE}/this fwd+bwd | {REFERENCE}/this workspace |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        cells = [r["case"], f"{r['batch']} x {r['time']}", str(r["head_window"]), r["backend"]]
        if r["status"] != "ok":
            lines.append("| " + " | ".join([*cells, r["status"], "", "", "", "", ""]) + " |")
            continue
        d = reference.get((r["case"], r["batch"], r["time"], r["head_window"]), {})
        cells += [
            f"{r['forward_ms']:.2f}",
            f"{r['train_ms']:.2f}",
            f"{r['peak_mib']:.1f}" if "peak_mib" in r else "-",
            f"{r['workspace_mib']:.1f}" if "workspace_mib" in r else "-",
            _ratio(d.get("train_ms"), r["train_ms"]),
            _ratio(d.get("workspace_mib"), r.get("workspace_mib")),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
