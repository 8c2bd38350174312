"""Subword segmentation: a joint SentencePiece model over both languages, with fixed special ids.

Ids 0-3 are always ``<pad>``, ``<unk>``, ``<s>`` (BOS), ``</s>`` (EOS). Models are trained with the
``identity`` normalisation rule (no NFKC) and byte fallback, so for any text already cleaned by
:func:`csan.data.corpus.normalize`, ``decode(encode(text)) == text``: hypotheses are compared with
the untouched references and BLEU stays honest. (One exception: the character U+2581 ``▁``, which
SentencePiece uses as its space marker, decodes to a space.)
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import sentencepiece as spm

from csan.errors import CsanError

__all__ = ["BOS_ID", "EOS_ID", "PAD_ID", "UNK_ID", "SubwordModel"]

PAD_ID = 0
UNK_ID = 1
BOS_ID = 2
EOS_ID = 3

_TOO_HIGH = re.compile(r"Vocabulary size too high \((\d+)\)\. Please set it to a value <= (\d+)")
_TOO_LOW = re.compile(r"Vocabulary size is smaller than required_chars\. (\d+) vs (\d+)")


class SubwordModel:
    """A trained SentencePiece model with ids pad=0, unk=1, bos=2, eos=3.

    Build one with :meth:`train`, :meth:`from_file` or :meth:`from_bytes`.

    Example:
        >>> lines = ["Ein Hund läuft .", "A dog runs .", "Zwei Hunde laufen ."] * 20
        >>> sp = SubwordModel.train(lines, vocab_size=300)
        >>> sp.decode(sp.encode(["Ein Hund läuft ."]))
        ['Ein Hund läuft .']
        >>> (sp.pad_id, sp.unk_id, sp.bos_id, sp.eos_id, len(sp))
        (0, 1, 2, 3, 300)
    """

    pad_id = PAD_ID
    unk_id = UNK_ID
    bos_id = BOS_ID
    eos_id = EOS_ID

    def __init__(self, model_proto: bytes, *, origin: str = "<bytes>") -> None:
        """Load a serialized model; prefer :meth:`from_bytes` / :meth:`from_file`."""
        self._proto = bytes(model_proto)
        self._sp = spm.SentencePieceProcessor()
        try:
            self._sp.LoadFromSerializedProto(self._proto)
        except (RuntimeError, OSError) as err:
            raise CsanError(f"{origin}: not a SentencePiece model: {err}") from None
        got = (self._sp.pad_id(), self._sp.unk_id(), self._sp.bos_id(), self._sp.eos_id())
        if got != (PAD_ID, UNK_ID, BOS_ID, EOS_ID):
            raise CsanError(
                f"{origin}: SentencePiece model has special ids pad/unk/bos/eos = {got}, "
                f"expected {(PAD_ID, UNK_ID, BOS_ID, EOS_ID)}; train it with SubwordModel.train"
            )
        self._specials = frozenset({PAD_ID, BOS_ID, EOS_ID})

    # ----------------------------------------------------------------------------- building
    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        *,
        vocab_size: int,
        model_type: str = "bpe",
        character_coverage: float = 1.0,
        byte_fallback: bool = True,
        max_sentences: int = 2_000_000,
        seed: int = 0,
        num_threads: int = 1,
    ) -> SubwordModel:
        """Learn a model from sentences held in memory (nothing is written to disk).

        Args:
            texts: sentences, already normalised; empty ones are skipped. Pass both languages
                for a joint model.
            vocab_size: the exact vocabulary size, special and byte pieces included.
            model_type: ``"bpe"`` or ``"unigram"``.
            character_coverage: share of characters covered by the vocabulary (1.0: all).
            byte_fallback: spell unknown characters as UTF-8 byte pieces (256 of the vocabulary)
                instead of ``<unk>``, so that any text round-trips.
            max_sentences: at most this many sentences (sampled with ``seed``) are used.
            seed: seed of SentencePiece's sampling.
            num_threads: training threads.

        Raises:
            CsanError: no sentences; ``vocab_size`` too large or too small for the data (the
                message gives both numbers); an unknown ``model_type``.

        Example:
            >>> SubwordModel.train(["a b c"] * 10, vocab_size=5000, byte_fallback=False)
            Traceback (most recent call last):
            ...
            csan.errors.CsanError: vocab_size=5000 is too large for this training text: ...
        """
        if model_type not in ("bpe", "unigram"):
            raise CsanError(f"model_type={model_type!r}: expected 'bpe' or 'unigram'")
        sentences = [t for t in texts if t]
        if not sentences:
            raise CsanError("cannot train a subword model: no non-empty training sentences")
        writer = io.BytesIO()
        spm.set_random_generator_seed(seed)
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(sentences),
                model_writer=writer,
                vocab_size=vocab_size,
                model_type=model_type,
                character_coverage=character_coverage,
                byte_fallback=byte_fallback,
                normalization_rule_name="identity",
                pad_id=PAD_ID,
                unk_id=UNK_ID,
                bos_id=BOS_ID,
                eos_id=EOS_ID,
                input_sentence_size=max_sentences,
                shuffle_input_sentence=True,
                max_sentence_length=1 << 16,
                num_threads=num_threads,
                minloglevel=2,
            )
        except RuntimeError as err:
            raise CsanError(_explain_training_error(str(err), vocab_size, len(sentences))) from None
        return cls(writer.getvalue(), origin="<trained>")

    @classmethod
    def from_bytes(cls, data: bytes) -> SubwordModel:
        """Load a model from the bytes of :meth:`to_bytes` (e.g. stored in a checkpoint).

        Example:
            >>> sp = SubwordModel.train(["ein hund", "a dog"] * 10, vocab_size=270)
            >>> SubwordModel.from_bytes(sp.to_bytes()).encode(["a dog"]) == sp.encode(["a dog"])
            True
        """
        return cls(data)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> SubwordModel:
        """Load a ``.model`` file written by :meth:`save` (or by SentencePiece with the same ids).

        Example:
            >>> SubwordModel.from_file("/no/such.model")
            Traceback (most recent call last):
            ...
            csan.errors.CsanError: /no/such.model: no such file
        """
        try:
            data = Path(path).read_bytes()
        except FileNotFoundError:
            raise CsanError(f"{os.fspath(path)}: no such file") from None
        except OSError as err:
            raise CsanError(f"{os.fspath(path)}: cannot read: {err.strerror or err}") from None
        return cls(data, origin=os.fspath(path))

    def to_bytes(self) -> bytes:
        """The serialized model (a SentencePiece ``ModelProto``)."""
        return self._proto

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the model to ``path`` atomically (temporary file, then rename).

        Example:
            >>> import tempfile, pathlib
            >>> sp = SubwordModel.train(["ein hund", "a dog"] * 10, vocab_size=270)
            >>> p = pathlib.Path(tempfile.mkdtemp()) / "spm.model"
            >>> sp.save(p); len(SubwordModel.from_file(p))
            270
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(self._proto)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    @property
    def sha256(self) -> str:
        """Hex sha256 of :meth:`to_bytes`; identifies the model in cache keys."""
        return hashlib.sha256(self._proto).hexdigest()

    # ----------------------------------------------------------------------------- using
    def __len__(self) -> int:
        """The vocabulary size (ids are ``0 .. len - 1``)."""
        return self._sp.get_piece_size()

    def __repr__(self) -> str:
        return f"SubwordModel(vocab_size={len(self)}, sha256={self.sha256[:12]})"

    def __getstate__(self) -> dict[str, bytes]:
        return {"proto": self._proto}

    def __setstate__(self, state: dict[str, bytes]) -> None:
        self.__init__(state["proto"])  # type: ignore[misc]

    def encode(self, texts: Sequence[str], *, num_threads: int = 1) -> list[list[int]]:
        """Ids of each text, without BOS or EOS.

        Example:
            >>> sp = SubwordModel.train(["ein hund", "a dog"] * 10, vocab_size=270)
            >>> [len(ids) > 0 for ids in sp.encode(["ein hund", "a dog"])]
            [True, True]
        """
        if isinstance(texts, str):
            raise TypeError("encode takes a list of strings, got one str; wrap it in a list")
        return self._sp.encode(list(texts), out_type=int, num_threads=num_threads)

    def sample(self, texts: Sequence[str], *, alpha: float, seed: int) -> list[list[int]]:
        """Ids of each text cut by a sampled segmentation, without BOS or EOS: for a BPE model,
        BPE-dropout (Provilkov et al., 2020), each merge skipped with probability ``alpha``; for a
        unigram model, a segmentation sampled from the lattice with smoothing ``alpha`` (Kudo, 2018).

        The same ``(texts, alpha, seed)`` give the same ids (SentencePiece's generator is seeded
        and runs on one thread); every segmentation decodes back to its text.

        Example:
            >>> sp = SubwordModel.train(["ein hund läuft", "a dog runs"] * 10, vocab_size=280)
            >>> a = sp.sample(["ein hund läuft"] * 20, alpha=0.5, seed=7)
            >>> a == sp.sample(["ein hund läuft"] * 20, alpha=0.5, seed=7), set(sp.decode(a))
            (True, {'ein hund läuft'})
            >>> max(map(len, a)) > len(sp.encode(["ein hund läuft"])[0])  # some merges dropped
            True
        """
        if isinstance(texts, str):
            raise TypeError("sample takes a list of strings, got one str; wrap it in a list")
        if not 0 <= alpha < 1:
            raise ValueError(f"alpha must be in [0, 1), got {alpha}")
        spm.set_random_generator_seed(seed % 2**32)
        return self._sp.encode(
            list(texts),
            out_type=int,
            enable_sampling=alpha > 0,
            alpha=alpha,
            nbest_size=-1,
            num_threads=1,
        )

    def decode(self, ids: Iterable[Iterable[int]], *, num_threads: int = 1) -> list[str]:
        """Detokenized text of each id sequence; pad, BOS and EOS ids are skipped wherever they are.

        Ids may be Python ints or anything ``int()`` accepts (numpy or 0-d torch values); trim a
        hypothesis at its first EOS before decoding if tokens may follow it.

        Example:
            >>> sp = SubwordModel.train(["ein hund", "a dog"] * 10, vocab_size=270)
            >>> ids = sp.encode(["a dog"])[0]
            >>> sp.decode([[sp.bos_id, *ids, sp.eos_id, sp.pad_id]])
            ['a dog']
        """
        size = len(self)
        clean: list[list[int]] = []
        for seq in ids:
            row = [int(i) for i in seq]
            bad = [i for i in row if not 0 <= i < size]
            if bad:
                raise ValueError(f"decode: id {bad[0]} outside the vocabulary [0, {size})")
            clean.append([i for i in row if i not in self._specials])
        return self._sp.decode(clean, num_threads=num_threads)

    def pieces(self, text: str) -> list[str]:
        """The subword pieces of one text (``▁`` marks a preceding space).

        Example:
            >>> sp = SubwordModel.train(["ein hund", "a dog"] * 10, vocab_size=270)
            >>> "".join(sp.pieces("a dog")).replace("▁", " ").strip()
            'a dog'
        """
        return self._sp.encode(text, out_type=str)

    def id_to_piece(self, token_id: int) -> str:
        """The piece string of one id (``<pad>``, ``<unk>``, ``<s>``, ``</s>`` for 0-3)."""
        return self._sp.id_to_piece(int(token_id))


def _explain_training_error(message: str, vocab_size: int, n_sentences: int) -> str:
    if m := _TOO_HIGH.search(message):
        return (
            f"vocab_size={vocab_size} is too large for this training text: {n_sentences} "
            f"sentences allow at most {m.group(2)} pieces; lower vocab_size"
        )
    if m := _TOO_LOW.search(message):
        return (
            f"vocab_size={vocab_size} is too small: the training text needs at least "
            f"{m.group(2)} pieces (characters, special and byte pieces); raise vocab_size"
        )
    return f"SentencePiece training failed (vocab_size={vocab_size}): {message}"
