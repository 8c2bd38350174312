"""Reading raw parallel text: one sentence per line, UTF-8, the two sides aligned line by line.

Every line is cleaned by :func:`normalize` (Unicode whitespace -> one plain space, stripped), so the
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

__all__ = ["MAX_LINE_CHARS", "normalize", "read_lines", "read_parallel"]

MAX_LINE_CHARS = 100_000
"""Default limit on the length of one line, in characters (before normalisation)."""

_BOM = b"\xef\xbb\xbf"


def normalize(line: str) -> str:
    """Turn every run of Unicode whitespace into one plain space and strip both ends.

    Whitespace is what :meth:`str.isspace` calls whitespace: the no-break space U+00A0, TAB,
    ``\\r``, the Unicode spaces U+2000-U+200A, U+3000 and the line/paragraph separators. Nothing
    else changes (no case folding, no Unicode normalisation form), so BLEU sees the original text.

    Example:
        >>> normalize("  Ein\\u00a0Hund\\tläuft .  ")
        'Ein Hund läuft .'
    """
    return " ".join(line.split())


def _display(path: Path) -> str:
    return os.fspath(path)


def read_lines(path: str | os.PathLike[str], *, max_chars: int = MAX_LINE_CHARS) -> list[str]:
    """Read a UTF-8 text file, one sentence per line, each line cleaned by :func:`normalize`.

    A newline at the end of the file does not make an extra line; a UTF-8 byte-order mark at the
    start is dropped. Empty lines are kept (as ``""``) so that two sides stay aligned.

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
    path = Path(path)
    name = _display(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CsanError(f"{name}: no such file") from None
    except IsADirectoryError:
        raise CsanError(f"{name}: is a directory, expected a text file") from None
    except OSError as err:
        raise CsanError(f"{name}: cannot read: {err.strerror or err}") from None
    if not data:
        raise CsanError(f"{name}: empty file, expected one sentence per line")
    skip = len(_BOM) if data.startswith(_BOM) else 0
    nul = data.find(b"\x00", skip)
    if nul >= 0:
        line_no = data.count(b"\n", 0, nul) + 1
        raise CsanError(
            f"{name}:{line_no}: NUL byte at byte offset {nul}: binary content "
            "(or UTF-16), expected UTF-8 text"
        )
    try:
        text = data[skip:].decode("utf-8")
    except UnicodeDecodeError as err:
        offset = skip + err.start
        line_no = data.count(b"\n", 0, offset) + 1
        raise CsanError(
            f"{name}:{line_no}: invalid UTF-8 at byte offset {offset} "
            f"(byte 0x{data[offset]:02x}): {err.reason}"
        ) from None
    raw = text.split("\n")
    if raw[-1] == "":
        raw.pop()  # the newline that ends the last line
    for line_no, line in enumerate(raw, start=1):
        if len(line) > max_chars:
            raise CsanError(
                f"{name}:{line_no}: line of {len(line)} characters, longer than the limit of "
                f"{max_chars}; is this a text file with one sentence per line?"
            )
    return [normalize(line) for line in raw]


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
