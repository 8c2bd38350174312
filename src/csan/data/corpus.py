"""Reading raw parallel text: one sentence per line, UTF-8, the two sides aligned line by line.

Every line is cleaned by :func:`csan.textio.normalize` (control characters dropped, Unicode
whitespace -> one plain space, stripped), so the
text the model sees and the BLEU references are the same strings. Bad files raise
:class:`~csan.errors.CsanError` with a one-line message naming the file, the line and the value.

Lines are separated by ``\\n`` only (a ``\\r`` before it is whitespace and disappears); other Unicode
line separators (U+2028, U+0085, form feed, ...) inside a line are whitespace, not line breaks, so the
line numbers agree with ``wc -l`` and with the other side of the corpus.
"""

from __future__ import annotations

import os
from pathlib import Path

from csan.errors import CsanError
from csan.textio import MAX_LINE_CHARS, normalize, read_text_lines

__all__ = ["MAX_LINE_CHARS", "normalize", "read_lines", "read_parallel"]


def _display(path: Path) -> str:
    return os.fspath(path)


def read_lines(path: str | os.PathLike[str], *, max_chars: int = MAX_LINE_CHARS) -> list[str]:
    """Read a UTF-8 text file, one sentence per line, each line cleaned by :func:`normalize`.

    The file is read by :func:`csan.textio.read_text_lines` (the rules every csan input follows);
    empty lines are kept (as ``""``) so that two sides stay aligned.

    Raises:
        CsanError: the file is missing, a directory, empty, not valid UTF-8 (message gives the line
            and the byte offset in the file), holds a NUL byte (binary or UTF-16 content), or has a
            line longer than ``max_chars`` characters.

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "train.de"
        >>> _ = p.write_text("Ein  Hund .\\nZwei\\u00a0Katzen\\n", encoding="utf-8")
        >>> read_lines(p)
        ['Ein Hund .', 'Zwei Katzen']
    """
    lines = read_text_lines(path, max_chars=max_chars)
    if not lines:
        raise CsanError(f"{_display(Path(path))}: empty file, expected one sentence per line")
    return [normalize(line) for line in lines]


def read_parallel(
    src_path: str | os.PathLike[str],
    tgt_path: str | os.PathLike[str],
    *,
    max_chars: int = MAX_LINE_CHARS,
) -> list[tuple[str, str]]:
    """Read two aligned files into (source, target) pairs of normalised lines.

    Pairs where one side (or both) is empty after normalisation are kept, so that pair ``i`` is
    line ``i + 1`` of both files; the trainer filters them out of training data.

    Raises:
        CsanError: as :func:`read_lines`, or the files have different numbers of lines (the message
            names both files and both counts).

    Example:
        >>> import tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (d / "valid.en").write_text("A dog .\\n\\n", encoding="utf-8")
        >>> _ = (d / "valid.de").write_text("Ein Hund .\\nLeer\\n", encoding="utf-8")
        >>> read_parallel(d / "valid.en", d / "valid.de")
        [('A dog .', 'Ein Hund .'), ('', 'Leer')]
    """
    src = read_lines(src_path, max_chars=max_chars)
    tgt = read_lines(tgt_path, max_chars=max_chars)
    if len(src) != len(tgt):
        raise CsanError(
            f"{_display(Path(src_path))} has {len(src)} lines but {_display(Path(tgt_path))} has "
            f"{len(tgt)}; the two sides of a parallel corpus must be aligned line by line"
        )
    return list(zip(src, tgt))
