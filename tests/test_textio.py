"""csan.textio: one set of rules for every text file and for stdin/stdout."""

from __future__ import annotations

import io
import sys

import pytest

from csan.errors import CsanError
from csan.textio import read_text_lines, write_text_lines


def test_lines_end_at_newline_only(tmp_path):
    path = tmp_path / "hyp.txt"
    path.write_bytes("\ufeffeins\r\nzwei\u2028drei\n\nvier".encode())
    assert read_text_lines(path) == ["eins", "zwei\u2028drei", "", "vier"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"ok\nab\xffcd\n", r"bad\.txt:2: invalid UTF-8 at byte offset 5 \(byte 0xff\)"),
        ("a dog\n".encode("utf-16"), r"bad\.txt:1: NUL byte at byte offset 3: binary content"),
        (
            b"a\n" + b"x" * 11 + b"\n",
            r"bad\.txt:2: line of 11 characters, longer than the limit of 10",
        ),
    ],
)
def test_bad_content_names_file_line_and_value(tmp_path, data, message):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(data)
    with pytest.raises(CsanError, match=message):
        read_text_lines(bad, max_chars=10)


def test_missing_file_and_folder_are_named(tmp_path):
    with pytest.raises(CsanError, match=r"missing\.txt: no such file"):
        read_text_lines(tmp_path / "missing.txt")
    with pytest.raises(CsanError, match="is a directory, expected a text file"):
        read_text_lines(tmp_path)


@pytest.mark.parametrize("name", [None, "-"])
def test_stdin_follows_the_same_rules(monkeypatch, name):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"\xef\xbb\xbfa\r\nb\x00\n")))
    with pytest.raises(CsanError, match="<stdin>:2: NUL byte"):
        read_text_lines(name)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"\xef\xbb\xbfa\r\nb\n")))
    assert read_text_lines(name) == ["a", "b"]


def test_written_lines_read_back(tmp_path, capsys):
    path = tmp_path / "out.de"
    write_text_lines(path, ["eins", "", "zwei\u2028drei"])
    assert read_text_lines(path) == ["eins", "", "zwei\u2028drei"]
    write_text_lines("-", ["a", "b"])
    assert capsys.readouterr().out == "a\nb\n"
