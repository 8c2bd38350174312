"""SubwordModel: fixed special ids, exact round-trip on real text, serialisation, errors."""

from __future__ import annotations

import io
import pickle
from pathlib import Path

import pytest
import sentencepiece as spm

from csan.data import SubwordModel
from csan.errors import CsanError


def test_special_ids_are_fixed(small_spm: SubwordModel) -> None:
    assert (small_spm.pad_id, small_spm.unk_id, small_spm.bos_id, small_spm.eos_id) == (0, 1, 2, 3)
    pieces = [small_spm.id_to_piece(i) for i in range(4)]
    assert pieces == ["<pad>", "<unk>", "<s>", "</s>"]
    assert len(small_spm) == 1000


def test_encode_has_no_specials(small_spm: SubwordModel, real_lines: dict[str, list[str]]) -> None:
    for ids in small_spm.encode(real_lines["valid.de"][:200]):
        assert ids and all(4 <= i < len(small_spm) for i in ids), ids


@pytest.mark.parametrize("name", ["valid.en", "valid.de", "test2016.en", "test2016.de"])
def test_round_trip_on_unseen_real_lines(
    small_spm: SubwordModel, real_lines: dict[str, list[str]], name: str
) -> None:
    lines = real_lines[name]
    decoded = small_spm.decode(small_spm.encode(lines))
    bad = [(i + 1, a, b) for i, (a, b) in enumerate(zip(lines, decoded)) if a != b]
    assert not bad, f"{name}: {len(bad)} lines do not round-trip, first: {bad[0]}"


def test_round_trip_of_the_quirky_train_lines(
    small_spm: SubwordModel, real_lines: dict[str, list[str]], multi30k_dir: Path
) -> None:
    raw = (multi30k_dir / "train.de").read_text(encoding="utf-8").split("\n")
    quirky = [
        i for i, line in enumerate(raw) if "\u00a0" in line or "\t" in line or line[-1:] == " "
    ]
    assert len(quirky) >= 40, "train.de has U+00A0, TAB and trailing-space lines"
    lines = [real_lines["train.de"][i] for i in quirky]
    assert small_spm.decode(small_spm.encode(lines)) == lines


def test_foreign_special_ids_are_rejected() -> None:
    writer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(["a dog", "ein Hund"] * 5),
        model_writer=writer,
        vocab_size=20,
        hard_vocab_limit=False,
        minloglevel=2,
    )
    with pytest.raises(CsanError, match=r"special ids pad/unk/bos/eos = \(-1, 0, 1, 2\)"):
        SubwordModel.from_bytes(writer.getvalue())


def test_unseen_characters_round_trip_via_bytes(small_spm: SubwordModel) -> None:
    text = "Ωμέγα — 東京 ½ ﬁ 😀 Grüße"
    ids = small_spm.encode([text])[0]
    assert small_spm.unk_id not in ids
    assert small_spm.decode([ids]) == [text], "no NFKC: '½' and 'ﬁ' are kept"


def test_decode_skips_pad_bos_eos(small_spm: SubwordModel) -> None:
    ids = small_spm.encode(["Ein Hund läuft ."])[0]
    noisy = [small_spm.bos_id, *ids, small_spm.eos_id, small_spm.pad_id, small_spm.pad_id]
    assert small_spm.decode([noisy, []]) == ["Ein Hund läuft .", ""]


def test_decode_rejects_ids_outside_vocab(small_spm: SubwordModel) -> None:
    with pytest.raises(ValueError, match="id 1000 outside"):
        small_spm.decode([[5, 1000]])


def test_encode_rejects_a_bare_string(small_spm: SubwordModel) -> None:
    with pytest.raises(TypeError, match="list of strings"):
        small_spm.encode("Ein Hund")  # type: ignore[arg-type]


def test_pieces_spell_the_text(small_spm: SubwordModel) -> None:
    pieces = small_spm.pieces("Zwei Männer spielen Fußball .")
    assert "".join(pieces).replace("▁", " ").strip() == "Zwei Männer spielen Fußball ."


def test_bytes_file_and_pickle_round_trip(small_spm: SubwordModel, tmp_path: Path) -> None:
    text = ["Ein Mann mit einem orangefarbenen Hut ."]
    path = tmp_path / "sub" / "spm.model"
    small_spm.save(path)
    assert [p.name for p in path.parent.iterdir()] == ["spm.model"], "no temp file left"
    for copy in (
        SubwordModel.from_bytes(small_spm.to_bytes()),
        SubwordModel.from_file(path),
        pickle.loads(pickle.dumps(small_spm)),
    ):
        assert copy.encode(text) == small_spm.encode(text)
        assert copy.sha256 == small_spm.sha256


def test_training_is_deterministic(real_lines: dict[str, list[str]]) -> None:
    texts = real_lines["valid.en"] + real_lines["valid.de"]
    a = SubwordModel.train(texts, vocab_size=600)
    b = SubwordModel.train(texts, vocab_size=600)
    assert a.to_bytes() == b.to_bytes()


def test_vocab_too_large_names_the_numbers() -> None:
    texts = ["ein Hund", "zwei Hunde", "a dog", "two dogs"] * 5
    with pytest.raises(CsanError) as info:
        SubwordModel.train(texts, vocab_size=5000)
    message = str(info.value)
    assert "vocab_size=5000 is too large" in message and "at most" in message
    limit = int(message.split("at most ")[1].split()[0])
    assert len(SubwordModel.train(texts, vocab_size=limit)) == limit, "the limit given works"


def test_vocab_too_small_names_the_numbers() -> None:
    with pytest.raises(CsanError, match=r"vocab_size=100 is too small.*at least \d+"):
        SubwordModel.train(["ein Hund", "a dog"], vocab_size=100)


def test_no_training_text() -> None:
    with pytest.raises(CsanError, match="no non-empty training sentences"):
        SubwordModel.train(["", ""], vocab_size=300)


def test_bad_model_files(tmp_path: Path) -> None:
    with pytest.raises(CsanError, match="no such file"):
        SubwordModel.from_file(tmp_path / "missing.model")
    junk = tmp_path / "junk.model"
    junk.write_bytes(b"this is not a model")
    with pytest.raises(CsanError, match=f"{junk}: not a SentencePiece model"):
        SubwordModel.from_file(junk)
