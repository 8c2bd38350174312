"""How a kept result says it was made: the command it records, kept when the folder is copied.

A table written again from a copied folder (``--report-only``) keeps the command recorded with it when
the new command differs only in ``--out``, so the copy gives the same files byte for byte.

Example:
    >>> recorded_command("csan stn --preset mnist --out runs/stn", "csan stn --preset mnist --out kept")
    'csan stn --preset mnist --out runs/stn'
"""

from __future__ import annotations

import shlex

__all__ = ["recorded_command"]


def recorded_command(previous: str | None, command: str | None) -> str | None:
    """``previous`` when it and ``command`` differ only in ``--out`` (a copied folder), else ``command``.

    Example:
        >>> old = "csan compare --variants vanilla --seeds 1 --config tiny --out runs/t"
        >>> recorded_command(old, "csan compare --variants vanilla --seeds 1 --config tiny --out kept/t")
        'csan compare --variants vanilla --seeds 1 --config tiny --out runs/t'
        >>> recorded_command(old, "csan compare --variants vanilla --seeds 1,2 --config tiny --out runs/t")
        'csan compare --variants vanilla --seeds 1,2 --config tiny --out runs/t'
    """
    if previous and command and _without_out(previous) == _without_out(command):
        return previous
    return command


def _without_out(command: str) -> list[str]:
    parts = shlex.split(command)
    if "--out" in parts:
        i = parts.index("--out")
        del parts[i : i + 2]
    return parts
