"""Text in and out, by one set of rules for every file csan reads or writes, and for stdin/stdout.

Reading (:func:`read_text_lines`): UTF-8; a byte-order mark at the start is dropped; only ``\\n``
ends a line (a ``\\r`` before it is dropped), so U+2028, U+0085 or a form feed inside a sentence
stay inside it and the line numbers agree with ``wc -l``; a newline at the end of the input makes
no extra line. Refused with a :class:`~csan.errors.CsanError` naming the file (``<stdin>``), the
line and the value: a NUL byte (binary content, or UTF-16), invalid UTF-8 (with the byte offset),
a line longer than ``max_chars`` characters, a missing file or a folder.

One normaliser (:func:`normalize`) for every line csan reads as a sentence: training text, test
references, translation input, and the model's own output.

Writing (:func:`write_text_lines`): one line per item, ``\\n`` after each; stdout for ``None`` or
``"-"``, else the file is replaced atomically (a failure leaves the old file).

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "hyp.de"
    >>> write_text_lines(path, ["ein Haus", "zwei"])
    >>> read_text_lines(path)
    ['ein Haus', 'zwei']
"""

from __future__ import annotations

import os
import select
import stat
import sys
import unicodedata
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from csan.errors import CsanError

__all__ = [
    "MAX_LINE_CHARS",
    "STDIO",
    "atomic_write_text",
    "check_output_file",
    "decode_lines",
    "iter_line_chunks",
    "normalize",
    "on_terminal",
    "output_target",
    "read_text_lines",
    "write_text_lines",
]

MAX_LINE_CHARS = 100_000
"""Default limit on the length of one line, in characters."""

STDIO = ("-", None)
"""What names stdin (reading) or stdout (writing)."""

_BOM = b"\xef\xbb\xbf"


def normalize(line: str) -> str:
    """A sentence as csan reads it: control characters (Unicode category Cc) dropped, every run of
    Unicode whitespace one plain space, the ends stripped.

    Whitespace is what :meth:`str.isspace` calls whitespace (TAB, ``\\r``, the no-break space
    U+00A0, U+2000-U+200A, U+3000, the line and paragraph separators, ...); nothing else changes
    (no case folding, no Unicode normalisation form), so BLEU sees the original text.

    Example:
        >>> normalize("  Ein\\u00a0Hund\\tläuft\\x07 .  ")
        'Ein Hund läuft .'
    """
    words = (
        "".join(ch for ch in word if unicodedata.category(ch) != "Cc") for word in line.split()
    )
    return " ".join(word for word in words if word)


def decode_lines(data: bytes, name: str, *, max_chars: int = MAX_LINE_CHARS) -> list[str]:
    """The lines of ``data`` (the bytes of the input ``name``), by the module's rules.

    Example:
        >>> decode_lines("\\ufeffeins\\r\\nzwei\\u2028drei\\n\\nvier".encode(), "hyp.txt")
        ['eins', 'zwei\\u2028drei', '', 'vier']
        >>> decode_lines(b"ok\\nab\\xffcd\\n", "bad.txt")  # doctest: +IGNORE_EXCEPTION_DETAIL
        Traceback (most recent call last):
        csan.errors.CsanError: bad.txt:2: invalid UTF-8 at byte offset 5 (byte 0xff): invalid start byte
    """
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()  # the newline that ends the last line
    out, offset = [], 0
    for line_no, raw in enumerate(lines, start=1):
        out.append(_decode_one(raw, name, line_no, offset, max_chars))
        offset += len(raw) + 1
    return out


def read_text_lines(
    path: str | os.PathLike[str] | None, *, max_chars: int = MAX_LINE_CHARS
) -> list[str]:
    """The lines of a UTF-8 text file, or of stdin when ``path`` is ``None`` or ``"-"``.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     _ = (Path(tmp) / "src.txt").write_bytes("Ein Hund.\\r\\nZwei Katzen.\\n".encode())
        ...     read_text_lines(Path(tmp) / "src.txt")
        ['Ein Hund.', 'Zwei Katzen.']
        >>> read_text_lines("no-such-file.txt")
        Traceback (most recent call last):
        ...
        csan.errors.CsanError: no-such-file.txt: no such file
    """
    if path in STDIO:
        return decode_lines(sys.stdin.buffer.read(), "<stdin>", max_chars=max_chars)
    path = Path(path)
    name = os.fspath(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CsanError(f"{name}: no such file") from None
    except IsADirectoryError:
        raise CsanError(f"{name}: is a directory, expected a text file") from None
    except OSError as err:
        raise CsanError(f"{name}: cannot read: {err.strerror or err}") from None
    return decode_lines(data, name, max_chars=max_chars)


def on_terminal(stream: Any) -> bool:
    """Whether ``stream`` is an interactive terminal (False for files, pipes, closed streams, None).

    Progress bars go to a terminal only; a log file or a pipe gets plain lines.

    Example:
        >>> import io
        >>> on_terminal(io.StringIO()), on_terminal(None)
        (False, False)
    """
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


def output_target(path: str | os.PathLike[str]) -> Path:
    """Where writing ``path`` lands: a symlink's target (written through, never replaced).

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     target, link = Path(tmp) / "target.txt", Path(tmp) / "link.txt"
        ...     link.symlink_to(target)
        ...     output_target(link) == target.resolve(), output_target(target) == target
        (True, True)
    """
    path = Path(path)
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def check_output_file(path: str | os.PathLike[str] | None) -> None:
    """Fail before any work when an output file cannot be written (a folder, a missing parent).

    Example:
        >>> check_output_file("/")  # doctest: +IGNORE_EXCEPTION_DETAIL
        Traceback (most recent call last):
        csan.errors.CsanError: /: is a directory, expected an output file
    """
    if path in STDIO:
        return
    target = output_target(path)
    if target.is_dir():
        raise CsanError(f"{path}: is a directory, expected an output file")
    if not target.parent.is_dir():
        raise CsanError(f"{path}: no such folder {target.parent}")


def _decode_one(raw: bytes, name: str, line_no: int, offset: int, max_chars: int) -> str:
    """One line of a stream (its bytes start at byte ``offset`` of the input), by the rules above."""
    if line_no == 1 and raw.startswith(_BOM):
        raw, offset = raw[len(_BOM) :], offset + len(_BOM)
    nul = raw.find(b"\x00")
    if nul >= 0:
        raise CsanError(
            f"{name}:{line_no}: NUL byte at byte offset {offset + nul}: binary content "
            "(or UTF-16), expected UTF-8 text"
        )
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        at = offset + err.start
        raise CsanError(
            f"{name}:{line_no}: invalid UTF-8 at byte offset {at} "
            f"(byte 0x{raw[err.start]:02x}): {err.reason}"
        ) from None
    if len(line) > max_chars:
        raise CsanError(
            f"{name}:{line_no}: line of {len(line)} characters, longer than the limit of "
            f"{max_chars}; is this a text file with one sentence per line?"
        )
    return line.removesuffix("\r")


def iter_line_chunks(
    path: str | os.PathLike[str] | None,
    *,
    max_lines: int = 64,
    max_chars: int = MAX_LINE_CHARS,
) -> Iterator[list[str]]:
    """The lines of a file, or of stdin for ``None`` / ``"-"``, in chunks as they arrive.

    Each chunk holds the lines that were there to read, at least one and at most ``max_lines``:
    a line typed at a terminal comes back alone at once, a piped file in chunks of ``max_lines``,
    so that translation can answer as the input comes, in bounded memory. Same rules as
    :func:`read_text_lines`; an error names the line and the byte offset.

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "in.en"
        >>> _ = path.write_bytes(b"\\xef\\xbb\\xbfone\\r\\ntwo\\nthree")
        >>> [line for chunk in iter_line_chunks(path, max_lines=2) for line in chunk]
        ['one', 'two', 'three']
    """
    if path in STDIO:
        try:
            name, fd, close = "<stdin>", sys.stdin.fileno(), False
        except (AttributeError, OSError, ValueError):  # replaced by an in-memory stream
            yield from _stream_chunks(sys.stdin.buffer, "<stdin>", max_lines, max_chars)
            return
    else:
        name = os.fspath(path)
        try:
            fd, close = os.open(path, os.O_RDONLY), True
        except FileNotFoundError:
            raise CsanError(f"{name}: no such file") from None
        except OSError as err:
            raise CsanError(f"{name}: cannot read: {err.strerror or err}") from None
    try:
        yield from _chunks(fd, name, max_lines, max_chars)
    except IsADirectoryError:
        raise CsanError(f"{name}: is a directory, expected a text file") from None
    finally:
        if close:
            os.close(fd)


def _stream_chunks(stream: Any, name: str, max_lines: int, max_chars: int) -> Iterator[list[str]]:
    """Chunks of ``max_lines`` lines of a binary stream without a file descriptor."""
    offset = 0
    chunk: list[str] = []
    for line_no, raw in enumerate(iter(stream.readline, b""), start=1):
        piece = raw.removesuffix(b"\n")
        chunk.append(_decode_one(piece, name, line_no, offset, max_chars))
        offset += len(raw)
        if len(chunk) == max_lines:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _chunks(fd: int, name: str, max_lines: int, max_chars: int) -> Iterator[list[str]]:
    buf, eof, line_no, offset = b"", False, 0, 0

    def read() -> None:
        nonlocal buf, eof
        data = os.read(fd, 1 << 16)
        if data:
            buf += data
        else:
            eof = True

    def ready() -> bool:  # more input there without waiting (a regular file always is)
        try:
            return bool(select.select([fd], [], [], 0)[0])
        except (OSError, ValueError):
            return True

    while True:
        while b"\n" not in buf and not eof:  # wait for one whole line
            read()
        while not eof and buf.count(b"\n") < max_lines and ready():  # and what else is there
            read()
        raw = buf.split(b"\n")
        buf = raw.pop()  # the unfinished last line
        if eof and buf:
            raw.append(buf)
            buf = b""
        for start in range(0, len(raw), max_lines):
            chunk = []
            for piece in raw[start : start + max_lines]:
                line_no += 1
                chunk.append(_decode_one(piece, name, line_no, offset, max_chars))
                offset += len(piece) + 1
            yield chunk
        if eof and not buf:
            return


def write_text_lines(path: str | os.PathLike[str] | None, lines: Iterable[str]) -> None:
    """Write ``lines`` (a ``\\n`` after each) to stdout for ``None`` / ``"-"``, else to ``path``.

    A regular file is replaced atomically (a failure leaves the old one) and keeps its permissions;
    a symlink is written through to its target; a FIFO, a character device or a socket is written
    to as a stream, never replaced by a regular file.

    Example:
        >>> write_text_lines("-", ["Ein Hund.", "Zwei Katzen."])  # "-": stdout
        Ein Hund.
        Zwei Katzen.
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     write_text_lines(Path(tmp) / "out.txt", ["Ein Hund.", "Zwei Katzen."])
        ...     (Path(tmp) / "out.txt").read_text(encoding="utf-8")
        'Ein Hund.\\nZwei Katzen.\\n'
    """
    text = "".join(line + "\n" for line in lines)
    if path in STDIO:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    target = output_target(path)
    try:
        st = target.stat()
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise CsanError(f"{path}: cannot write ({e.strerror or e})") from None
    try:
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise CsanError(f"{path}: is a directory, expected an output file")
        if st is not None and not stat.S_ISREG(st.st_mode):  # a FIFO, a device: a stream
            with open(target, "w", encoding="utf-8") as f:
                f.write(text)
            return
        mode = stat.S_IMODE(st.st_mode) if st is not None else None
        atomic_write_text(target, text, mode=mode)  # all or nothing: a failure leaves the old file
    except OSError as e:
        raise CsanError(f"{path}: cannot write ({e.strerror or e})") from None


def atomic_write_text(path: Path, text: str, *, mode: int | None = None) -> None:
    """Write ``text`` to ``path`` through a temporary file and ``os.replace``.

    Readers see the old file or the new one, never a part; a failed write leaves the old file.

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "LAST"
        >>> atomic_write_text(path, "step_00000010\\n")
        >>> path.read_text()
        'step_00000010\\n'
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)  # the file it replaces keeps its permissions
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a failed write leaves the old file, and nothing else
        raise
