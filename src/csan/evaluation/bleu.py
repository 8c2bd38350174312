"""Corpus BLEU and chrF with sacreBLEU (detokenized text, case-sensitive, 13a), with their signatures."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from sacrebleu.metrics import BLEU, CHRF

from csan.errors import CsanError

__all__ = ["Scores", "check_parallel", "read_text", "score"]


@dataclass
class Scores:
    """Corpus scores of one system.

    Fields:
        bleu: sacreBLEU corpus BLEU (0-100).
        chrf: chrF2 (0-100).
        signature: BLEU signature, e.g. ``nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0``.
        chrf_signature: chrF signature.
        bleu_details: sacreBLEU's BLEU line (precisions, brevity penalty, lengths).
        n_sentences: number of segments scored.
    """

    bleu: float
    chrf: float
    signature: str
    chrf_signature: str
    bleu_details: str
    n_sentences: int

    def to_dict(self) -> dict[str, float | str | int]:
        """Plain dict (JSON-ready).

        Example:
            >>> sorted(score(["a b c d"], ["a b c d"]).to_dict())[:3]
            ['bleu', 'bleu_details', 'chrf']
        """
        return asdict(self)


def check_parallel(hyps: Sequence[str], refs: Sequence[str]) -> None:
    """Raise :class:`CsanError` unless there are as many hypotheses as references (and at least one).

    Example:
        >>> check_parallel(["a"], ["a", "b"])
        Traceback (most recent call last):
        ...
        csan.errors.CsanError: 1 hypotheses but 2 references: they must be parallel
    """
    if len(hyps) != len(refs):
        raise CsanError(f"{len(hyps)} hypotheses but {len(refs)} references: they must be parallel")
    if not hyps:
        raise CsanError("no sentences to score")


def score(hyps: Sequence[str], refs: Sequence[str]) -> Scores:
    """Corpus BLEU (sacreBLEU defaults: 13a, case-sensitive, exp smoothing) and chrF of ``hyps`` vs ``refs``.

    Example:
        >>> s = score(["the cat sat on the mat"], ["the cat sat on the mat"])
        >>> round(s.bleu, 6), s.n_sentences, s.signature.startswith("nrefs:1|case:mixed|eff:no|tok:13a")
        (100.0, 1, True)
    """
    check_parallel(hyps, refs)
    hyps, refs = list(hyps), [list(refs)]
    bleu, chrf = BLEU(), CHRF()
    bleu_score = bleu.corpus_score(hyps, refs)
    chrf_score = chrf.corpus_score(hyps, refs)
    return Scores(
        bleu=float(bleu_score.score),
        chrf=float(chrf_score.score),
        signature=str(bleu.get_signature()),
        chrf_signature=str(chrf.get_signature()),
        bleu_details=str(bleu_score),
        n_sentences=len(hyps),
    )


def read_text(path: str | Path) -> list[str]:
    """Read a UTF-8 text file as lines (no newline characters); a missing or undecodable file is a CsanError.

    Only ``\\n`` (and a ``\\r`` before it) ends a line, so Unicode line separators inside a sentence stay.

    Example:
        >>> import tempfile, os
        >>> with tempfile.NamedTemporaryFile("wb", suffix=".txt", delete=False) as f:
        ...     _ = f.write("ein Haus\\r\\nzwei\\n".encode())
        >>> read_text(f.name)
        ['ein Haus', 'zwei']
        >>> os.remove(f.name)
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CsanError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise CsanError(f"{path}: is a directory, expected a text file") from None
    except OSError as err:
        raise CsanError(f"{path}: cannot read ({err.strerror})") from None
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [_decode_line(raw, path, number) for number, raw in enumerate(lines, start=1)]


def _decode_line(raw: bytes, path: Path, number: int) -> str:
    """UTF-8 decode one line (BOM dropped on line 1, trailing CR dropped), naming file and line on failure."""
    if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        return raw.removesuffix(b"\r").decode("utf-8")
    except UnicodeDecodeError as err:
        raise CsanError(f"{path}:{number}: invalid UTF-8 (byte {err.start + 1})") from None
