"""Reading corpora: normalisation, error messages, the real Multi30k files, a property test."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from csan.data import normalize, read_lines, read_parallel
from csan.errors import CsanError


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Ein\u00a0Hund", "Ein Hund"),
        ("Ein\tHund", "Ein Hund"),
        ("Ein Hund .  ", "Ein Hund ."),
        ("  zwei   Hunde\r", "zwei Hunde"),
        ("a\u2009b\u3000c\u2028d", "a b c d"),
        ("", ""),
        (" \t\u00a0 ", ""),
        ("Grüße, «Straße»!", "Grüße, «Straße»!"),
        ("Ein\x07 Hund\x1b[1m .\x7f", "Ein Hund[1m ."),  # control characters dropped
    ],
)
def test_normalize(raw: str, expected: str) -> None:
    assert normalize(raw) == expected


def test_read_lines_normalises_and_keeps_empty_lines(tmp_path: Path) -> None:
    p = tmp_path / "x.de"
    p.write_bytes("Ein\u00a0Hund  \r\n\n\tZwei Katzen".encode())
    assert read_lines(p) == ["Ein Hund", "", "Zwei Katzen"]


def test_trailing_newline_is_not_an_extra_line(tmp_path: Path) -> None:
    p = tmp_path / "x.en"
    p.write_text("a\nb\n", encoding="utf-8")
    assert read_lines(p) == ["a", "b"]
    p.write_text("a\nb\n\n", encoding="utf-8")
    assert read_lines(p) == ["a", "b", ""], "a blank last line is a real (empty) line"


def test_utf8_bom_is_dropped(tmp_path: Path) -> None:
    p = tmp_path / "bom.en"
    p.write_bytes(b"\xef\xbb\xbfa dog\n")
    assert read_lines(p) == ["a dog"]


def test_unicode_line_separators_do_not_split_lines(tmp_path: Path) -> None:
    p = tmp_path / "sep.en"
    p.write_text("a\u2028b\x0cc\x85d\n", encoding="utf-8")
    assert read_lines(p) == ["a b c d"], "only \\n separates lines, so counts match wc -l"


def _error(path: Path, **kwargs: int) -> str:
    with pytest.raises(CsanError) as info:
        read_lines(path, **kwargs)
    message = str(info.value)
    assert "\n" not in message, f"messages are one line: {message!r}"
    assert str(path) in message, f"message must name the file: {message!r}"
    return message


def test_missing_file(tmp_path: Path) -> None:
    assert _error(tmp_path / "nope.de").endswith("no such file")


def test_directory(tmp_path: Path) -> None:
    assert "directory" in _error(tmp_path)


def test_empty_file(tmp_path: Path) -> None:
    p = tmp_path / "empty.en"
    p.write_bytes(b"")
    assert "empty" in _error(p)


def test_invalid_utf8_names_line_and_offset(tmp_path: Path) -> None:
    p = tmp_path / "bad.de"
    p.write_bytes(b"gut\nauch gut\nschlecht \xff hier\n")
    message = _error(p)
    offset = len(b"gut\nauch gut\nschlecht ")
    assert f"{p}:3:" in message
    assert f"byte offset {offset}" in message and "0xff" in message


def test_latin1_file_is_reported(tmp_path: Path) -> None:
    p = tmp_path / "latin1.de"
    p.write_bytes("Grüße\n".encode("latin-1"))
    assert f"{p}:1: invalid UTF-8" in _error(p)


def test_nul_byte_names_line(tmp_path: Path) -> None:
    p = tmp_path / "bin.en"
    p.write_bytes(b"one\ntwo\nth\x00ree\n")
    message = _error(p)
    assert f"{p}:3:" in message and "NUL" in message


def test_utf16_is_reported_as_binary(tmp_path: Path) -> None:
    p = tmp_path / "utf16.en"
    p.write_text("a dog\n", encoding="utf-16")
    assert "NUL" in _error(p)


def test_line_too_long_names_line_and_length(tmp_path: Path) -> None:
    p = tmp_path / "long.en"
    p.write_text("short\n" + "x" * 51 + "\n", encoding="utf-8")
    message = _error(p, max_chars=50)
    assert f"{p}:2:" in message and "51" in message and "50" in message
    assert read_lines(p, max_chars=51)[1] == "x" * 51


def test_mismatched_line_counts_name_both_files(tmp_path: Path) -> None:
    src, tgt = tmp_path / "train.de", tmp_path / "train.en"
    src.write_text("a\nb\nc\n", encoding="utf-8")
    tgt.write_text("a\nb\n", encoding="utf-8")
    with pytest.raises(CsanError) as info:
        read_parallel(src, tgt)
    message = str(info.value)
    assert str(src) in message and str(tgt) in message
    assert "3 lines" in message and "has 2" in message


def test_read_parallel_keeps_empty_pairs(tmp_path: Path) -> None:
    src, tgt = tmp_path / "v.de", tmp_path / "v.en"
    src.write_text("ein Hund\n \nzwei\n", encoding="utf-8")
    tgt.write_text("a dog\nsomething\n\u00a0\n", encoding="utf-8")
    assert read_parallel(src, tgt) == [("ein Hund", "a dog"), ("", "something"), ("zwei", "")]


def test_real_multi30k_counts_and_quirks(multi30k_dir: Path) -> None:
    counts = {"train": 29000, "valid": 1014, "test2016": 1000}
    for split, n in counts.items():
        pairs = read_parallel(multi30k_dir / f"{split}.en", multi30k_dir / f"{split}.de")
        assert len(pairs) == n, f"{split}: {len(pairs)} pairs, expected {n}"
        for i, (en, de) in enumerate(pairs):
            assert en == normalize(en) and de == normalize(de), f"{split} line {i + 1}"
    raw = (multi30k_dir / "train.de").read_text(encoding="utf-8")
    assert "\u00a0" in raw and "\t" in raw, "the quirks the reader must handle are there"


# ------------------------------------------------------------------- property: write, read back
_line = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"), max_size=40)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=st.lists(_line, max_size=8), trailing_newline=st.booleans())
@example(lines=["\ufeffa\u00a0b", ""], trailing_newline=False)
@example(lines=["", "x\x00"], trailing_newline=True)
def test_read_back_equals_normalized(
    tmp_path: Path, lines: list[str], trailing_newline: bool
) -> None:
    p = tmp_path / "prop.txt"
    content = "\n".join(lines) + ("\n" if trailing_newline and lines else "")
    p.write_bytes(content.encode("utf-8"))
    try:
        got = read_lines(p)
    except CsanError as err:
        assert content == "" or "\x00" in content, f"unexpected error: {err}"
        return
    assert "\x00" not in content and content != ""
    # Without a final newline, a last empty line is indistinguishable from a trailing newline.
    expected_lines = lines[:-1] if not trailing_newline and lines[-1] == "" else list(lines)
    expected_lines[0] = expected_lines[0].removeprefix("\ufeff")  # a leading BOM is dropped
    assert got == [normalize(line) for line in expected_lines]
