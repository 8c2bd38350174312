"""The test translations kept with a compare table, and the references they are scored against.

``csan compare`` copies every finished run's test translations (``runs/<run>/<split>.hyp``, as the
trainer wrote them) into the table's folder as ``translations/<variant>-seed<N>.<split>.hyp.gz``
(gzip without a time stamp: the same text always gives the same bytes), and ``summary.json`` records
the reference file's name, its number of lines and its sha256. With ``results.csv`` (each run's record:
parameters, speed, BLEU, ...) that is all a table needs: ``csan compare ... --report-only`` on a folder
that holds only these files (no ``runs/``) writes the same ``table.md``, ``results.csv`` and
``summary.json``, and anyone can rescore or retest the translations with sacreBLEU.
"""

from __future__ import annotations

import gzip
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from csan.data.corpus import read_parallel
from csan.errors import CsanError
from csan.textio import decode_lines
from csan.training.data import corpus_files

__all__ = [
    "TRANSLATIONS",
    "References",
    "check_references",
    "keep_translation",
    "kept_path",
    "read_references",
    "read_split",
    "read_translations",
]

TRANSLATIONS = "translations"  # the sub-folder of a table's folder


def kept_path(out_dir: Path, run_dir: Path, hyp_file: Path) -> Path:
    """Where a run's translations are kept: ``translations/<run folder>.<split>.hyp.gz``.

    The run folder's name is ``<variant>-seed<N>`` (:func:`csan.experiments.grid.run_folder`).

    Example:
        >>> kept_path(Path("t"), Path("t/runs/csan2d-seed3"), Path("t/runs/csan2d-seed3/test2016.hyp"))
        PosixPath('t/translations/csan2d-seed3.test2016.hyp.gz')
    """
    return Path(out_dir) / TRANSLATIONS / f"{Path(run_dir).name}.{Path(hyp_file).name}.gz"


def keep_translation(out_dir: Path, run_dir: Path, hyp_file: Path) -> Path:
    """Copy ``hyp_file`` gzipped to :func:`kept_path`; a kept file with the same text is left as is.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     hyp = Path(tmp) / "runs" / "csan1d-seed2" / "test2016.hyp"
        ...     hyp.parent.mkdir(parents=True)
        ...     _ = hyp.write_text("Ein Hund.\\n", encoding="utf-8")
        ...     kept = keep_translation(tmp, hyp.parent, hyp)
        ...     kept.name, gzip.decompress(kept.read_bytes()) == hyp.read_bytes()
        ('csan1d-seed2.test2016.hyp.gz', True)
    """
    target = kept_path(out_dir, run_dir, hyp_file)
    data = Path(hyp_file).read_bytes()
    if target.is_file() and gzip.decompress(target.read_bytes()) == data:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
    os.replace(tmp, target)
    return target


def read_translations(path: str | os.PathLike[str]) -> list[str]:
    """The lines of a translation file, gzipped (``.gz``) or not, read as csan reads any text file.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> hyp = folder / "runs" / "vanilla-seed1" / "test2016.hyp"
        >>> hyp.parent.mkdir(parents=True)
        >>> _ = hyp.write_text("Ein Hund.\\nZwei Katzen.\\n", encoding="utf-8")
        >>> kept = keep_translation(folder, hyp.parent, hyp)
        >>> kept.relative_to(folder).as_posix(), read_translations(kept) == read_translations(hyp)
        ('translations/vanilla-seed1.test2016.hyp.gz', True)
    """
    path = Path(path)
    try:
        data = path.read_bytes()
        if path.suffix == ".gz":
            data = gzip.decompress(data)
    except FileNotFoundError:
        raise CsanError(f"{path}: no such file") from None
    except (OSError, EOFError) as err:
        raise CsanError(f"{path}: cannot read: {err}") from None
    return decode_lines(data, os.fspath(path))


@dataclass
class References:
    """The references of a table's test set: the file, its lines and the sha256 of its bytes.

    Example:
        >>> text = "Ein Hund.\\nZwei Katzen.\\n"
        >>> refs = References(Path("data/test2016.de"), text.splitlines(),
        ...                   hashlib.sha256(text.encode()).hexdigest())
        >>> refs.lines
        ['Ein Hund.', 'Zwei Katzen.']
        >>> refs.to_dict()  # doctest: +ELLIPSIS
        {'file': 'test2016.de', 'sentences': 2, 'sha256': '...'}
    """

    file: Path
    lines: list[str]
    sha256: str

    def to_dict(self) -> dict[str, Any]:
        """What ``summary.json`` records: the file's name (not its folder), lines and sha256."""
        return {"file": self.file.name, "sentences": len(self.lines), "sha256": self.sha256}


def read_split(cfg, split: str = "test") -> tuple[list[str], References]:
    """The source lines and the references of a split of ``cfg``: ``"test"``, its (first) test set,
    the one the trainer scores against; ``"valid"``, its validation split.

    Example:
        >>> import tempfile
        >>> from csan.config import Config, DataConfig
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     _ = (Path(tmp) / "t.en").write_text("A dog.\\nTwo cats.\\n", encoding="utf-8")
        ...     _ = (Path(tmp) / "t.de").write_text("Ein Hund.\\nZwei Katzen.\\n", encoding="utf-8")
        ...     t = f"{tmp}/t"  # every split from the files t.en and t.de
        ...     data = DataConfig(train_prefix=t, valid_prefix=t, test_prefix=t)
        ...     src, refs = read_split(Config(data=data))
        ...     src, refs.lines, refs.file.name
        (['A dog.', 'Two cats.'], ['Ein Hund.', 'Zwei Katzen.'], 't.de')
    """
    files = corpus_files(cfg.data, with_test=split == "test", download=False)
    if split == "valid":
        src, tgt = files["valid"]
    else:
        src, tgt = next(pair for name, pair in files.items() if name.startswith("test:"))
    pairs = read_parallel(src, tgt)
    refs = References(tgt, [t for _, t in pairs], hashlib.sha256(tgt.read_bytes()).hexdigest())
    return [s for s, _ in pairs], refs


def read_references(cfg) -> References:
    """The references of the (first) test set of ``cfg`` (the one the trainer scores against).

    Example:
        >>> import tempfile
        >>> from csan.config import Config, DataConfig
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     for lang, text in (("en", "A dog.\\n"), ("de", "Ein Hund.\\n")):
        ...         _ = (Path(tmp) / f"t.{lang}").write_text(text, encoding="utf-8")
        ...     t = f"{tmp}/t"
        ...     refs = read_references(Config(data=DataConfig(train_prefix=t, valid_prefix=t,
        ...                                                   test_prefix=t)))
        ...     refs.lines, refs.sha256 == hashlib.sha256(b"Ein Hund.\\n").hexdigest()
        (['Ein Hund.'], True)
    """
    return read_split(cfg, "test")[1]


def check_references(refs: References, recorded: dict[str, Any] | None) -> None:
    """Raise :class:`CsanError` unless ``refs`` are the references a table recorded (if it did).

    Example:
        >>> refs = References(Path("data/test2016.de"), ["Ein Hund."], "ab" * 32)
        >>> check_references(refs, refs.to_dict())
        >>> check_references(refs, {"file": "test2016.de", "sentences": 1, "sha256": "cd" * 32})
        Traceback (most recent call last):
        ...
        csan.errors.CsanError: data/test2016.de: sha256 abababababab..., but the table was scored against test2016.de with sha256 cdcdcdcdcdcd...: not the same references
    """
    if not recorded or recorded.get("sha256") in (None, refs.sha256):
        return
    raise CsanError(
        f"{refs.file}: sha256 {refs.sha256[:12]}..., but the table was scored against "
        f"{recorded.get('file')} with sha256 {str(recorded['sha256'])[:12]}...: not the same references"
    )
