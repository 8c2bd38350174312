"""Bad input: each case is one line ``csan: error: ...`` (status 2, no traceback) or is handled the
documented way, and nothing the user had is damaged: a run folder stays byte for byte the same after
a failing start, an existing ``--output`` file stays intact when translation fails.

Property tests: the corpus reader's is ``tests/data/test_corpus.py::test_read_back_equals_normalized``;
translation's are here (random Unicode lines in, as many lines out; empty in, empty out).
"""

from __future__ import annotations

import io
import json
import logging
import shutil
import sys
from pathlib import Path

import pytest
from cli_helpers import assert_one_line_error, run, snapshot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file, save_file

from csan import checkpoint as ckpt
from csan.data import SubwordModel, normalize
from csan.decoding import load_model
from csan.decoding.translate import translate_lines


def train_args(tiny_overrides: list[str], out: Path, *extra: str) -> list[str]:
    sets = [a for item in [*tiny_overrides, *extra] for a in ("--set", item)]
    return ["train", "--config", "tiny", *sets, "--out", str(out), "--no-progress"]


@pytest.fixture(scope="module")
def run_copy(tiny_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the shared tiny run folder that failing starts must leave untouched."""
    folder = tmp_path_factory.mktemp("bad-input") / "run"
    shutil.copytree(tiny_run, folder)
    return folder


# -- corpora --------------------------------------------------------------------------------------
GOOD = {"en": ["a dog runs .", "two cats sleep .", "a bird sings ."],
        "de": ["ein Hund rennt .", "zwei Katzen schlafen .", "ein Vogel singt ."]}  # fmt: skip

# what train.en holds (train.de too for the last case), and what the message must say
CORPUS_CASES = {
    "binary": (b"\x00\x01\x02\xff" * 64, ["train.en:1: NUL byte at byte offset 0", "binary"]),
    "latin-1": ("a dog\nStraße\n".encode("latin-1"), ["train.en:2: invalid UTF-8"]),
    "utf-16": ("a dog\n".encode("utf-16"), ["train.en:1:", "UTF-16"]),
    "huge line": (b"a " * 60_000 + b"\n", ["train.en:1: line of 120000 characters"]),
    "empty": (b"", ["train.en: empty file"]),
    "shorter": (b"a dog .\ntwo cats .\n", ["train.en has 2 lines", "train.de has 3"]),
    "blank lines only": (b"\n \n\t\n", ["train.en and", "train.de: "]),
}


def make_corpus(folder: Path, train_en: bytes, *, train_de: bytes | None = None) -> Path:
    folder.mkdir()
    for split in ("train", "valid", "test2016"):
        for lang, lines in GOOD.items():
            (folder / f"{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "train.en").write_bytes(train_en)
    if train_de is not None:
        (folder / "train.de").write_bytes(train_de)
    return folder


@pytest.mark.parametrize("case", list(CORPUS_CASES))
def test_bad_corpus_is_one_line_and_the_run_folder_is_untouched(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    run_copy: Path,
    tiny_overrides: list[str],
    case: str,
) -> None:
    data, needles = CORPUS_CASES[case]
    corpus = make_corpus(
        tmp_path / "corpus", data, train_de=data if case == "blank lines only" else None
    )
    before = snapshot(run_copy)
    for out in (run_copy, tmp_path / "new-run"):  # resuming a run, and starting one
        code, out_text, err = run(capsys, *train_args(tiny_overrides, out), "--data-dir", corpus)
        assert_one_line_error(code, err, str(corpus), *needles)
        assert out_text == ""
    assert snapshot(run_copy) == before
    assert not (tmp_path / "new-run").exists()


def test_every_pair_too_long_names_the_files_and_the_limit(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    tiny_overrides: list[str],
    multi30k_dir: Path,
) -> None:
    args = train_args(tiny_overrides, tmp_path / "run", "data.max_len=1")
    code, _, err = run(capsys, *args)
    assert_one_line_error(
        code, err, str(multi30k_dir / "train.en"), "data.max_len=1", "no pairs to batch"
    )
    assert not (tmp_path / "run").exists()


# -- configs --------------------------------------------------------------------------------------
CONFIG_CASES = {
    "unknown key": ("train:\n  lrr: 0.1\n", ["unknown config key 'train.lrr'", "train.lr?"]),
    "unknown section": ("trian:\n  lr: 0.1\n", ["unknown config key 'trian'"]),
    "wrong type": ("train:\n  max_steps: many\n", ["train.max_steps: expected int", "'many'"]),
    "list for a section": ("model: [1, 2]\n", ["model: expected a mapping"]),
    "not a mapping": ("- a\n- b\n", ["expected a mapping of sections"]),
    "not YAML": ("train: [\n", ["not valid YAML"]),
    "not UTF-8": (b"train:\n  lr: 0.1 \xff\n", ["not UTF-8 text"]),
}


@pytest.mark.parametrize("case", list(CONFIG_CASES))
def test_bad_config_file(capsys: pytest.CaptureFixture[str], tmp_path: Path, case: str) -> None:
    text, needles = CONFIG_CASES[case]
    path = tmp_path / "bad.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    code, _, err = run(capsys, "train", "--config", path, "--out", tmp_path / "run")
    assert_one_line_error(code, err, *needles)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("item", "needle"),
    [
        ("train.update_freq=0", "train.update_freq=0: must be at least 1"),
        ("train.log_every=0", "train.log_every=0: must be at least 1"),
        ("train.max_bad_steps=0", "train.max_bad_steps=0: must be at least 1"),
        ("train.max_steps=-5", "train.max_steps=-5: must be at least 1 (or null)"),
        ("train.max_minutes=-1", "train.max_minutes=-1.0: must be more than 0 (or null)"),
        ("data.train_subset=-3", "data.train_subset=-3: must be at least 1 (or null: all pairs)"),
        ("model.dropout=1.5", "model.dropout=1.5: must be in [0, 1)"),
        ("model.dropout=-0.1", "model.dropout=-0.1: must be in [0, 1)"),
        ("model.encoder_layers=0", "model.encoder_layers=0: must be at least 1"),
        (
            "model.attention_options.csan2d.window=5",
            "model.attention_options.csan2d: no layer uses",
        ),
        ("model.attention_options.csan1d.window=4", "model.attention_options.csan1d: no layer"),
        ("train.adam_betas=[1.5,0.9]", "train.adam_betas=[1.5, 0.9]: each must be in [0, 1)"),
        ("train.device=cuda:7", "train.device=cuda:7: no such device here"),
        ("data.tgt_lang=en", "a translation needs two languages"),
        ("train.max_tokens=0", "train.max_tokens=0: must be at least 1"),
        ("train.lr=-1", "train.lr=-1.0: must be a positive number"),
        ("train.lr=.nan", "train.lr=nan: must be a positive number"),
        ("train.max_tokens=lots", "train.max_tokens: expected int"),
    ],
)
def test_config_values_the_loop_cannot_use(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, item: str, needle: str
) -> None:
    code, _, err = run(
        capsys, "train", "--config", "tiny", "--set", item, "--set", f"data.data_dir={tmp_path}",
        "--out", tmp_path / "run",
    )  # fmt: skip
    assert_one_line_error(code, err, needle)
    assert not (tmp_path / "run").exists()


# -- damaged checkpoints to resume from -----------------------------------------------------------
def damage_trainer_json(folder: Path, how: str) -> None:
    path = folder / "trainer.json"
    if how == "not JSON":
        path.write_text("{broken", encoding="utf-8")
        return
    meta = json.loads(path.read_text(encoding="utf-8"))
    if how == "no optimizer":
        del meta["optimizer"]
    else:
        meta["step"] = "fifty"
    path.write_text(json.dumps(meta), encoding="utf-8")


def damage(folder: Path, how: str) -> None:
    if how in ("not JSON", "no optimizer", "step a string"):
        damage_trainer_json(folder, how)
    elif how == "trainer.safetensors truncated":
        data = (folder / "trainer.safetensors").read_bytes()
        (folder / "trainer.safetensors").write_bytes(data[: len(data) // 3])
    elif how == "trainer.safetensors missing":
        (folder / "trainer.safetensors").unlink()
    elif how == "optimizer of another shape":
        tensors = load_file(str(folder / "trainer.safetensors"))
        name = next(k for k in tensors if k.startswith("state.") and tensors[k].dim() == 2)
        tensors[name] = tensors[name][:, :3].contiguous()
        save_file(tensors, str(folder / "trainer.safetensors"))
    elif how == "spm.model missing":
        (folder / "spm.model").unlink()


DAMAGES = {
    "not JSON": ["trainer.json: corrupted"],
    "no optimizer": ["trainer.json: not a csan trainer state (no 'optimizer')"],
    "step a string": ["trainer.json: 'step' has a wrong type (str)"],
    "trainer.safetensors truncated": ["trainer.safetensors: cannot read trainer state"],
    "trainer.safetensors missing": ["trainer.safetensors: cannot read trainer state"],
    "optimizer of another shape": ["trainer.safetensors: the optimizer state does not fit"],
    "spm.model missing": ["spm.model: cannot read"],
}


@pytest.mark.parametrize("how", list(DAMAGES))
def test_damaged_checkpoint_is_named_and_left_alone(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    tiny_run: Path,
    tiny_overrides: list[str],
    how: str,
) -> None:
    run_dir = tmp_path / "run"
    last = ckpt.latest_checkpoint(tiny_run)
    assert last is not None
    shutil.copytree(last, run_dir / "checkpoints" / last.name)
    (run_dir / "checkpoints" / "LAST").write_text(last.name + "\n")
    damage(run_dir / "checkpoints" / last.name, how)
    before = snapshot(run_dir)
    code, _, err = run(capsys, *train_args(tiny_overrides, run_dir, "train.max_steps=60"))
    assert_one_line_error(code, err, str(run_dir / "checkpoints" / last.name), *DAMAGES[how])
    assert snapshot(run_dir) == before


def test_resuming_with_another_model_shape_is_refused(
    capsys: pytest.CaptureFixture[str], run_copy: Path, tiny_overrides: list[str]
) -> None:
    before = snapshot(run_copy)
    args = train_args(tiny_overrides, run_copy, "model.d_model=32", "train.max_steps=60")
    code, _, err = run(capsys, *args)
    assert_one_line_error(code, err, "trained with another setting", "model.d_model: 64 -> 32")
    assert snapshot(run_copy) == before


def test_a_second_trainer_on_a_folder_in_use_is_refused(
    capsys: pytest.CaptureFixture[str], run_copy: Path, tiny_overrides: list[str]
) -> None:
    from csan.training.safety import RunLock

    with RunLock(run_copy):  # as a running `csan train` holds it
        before = snapshot(run_copy)
        code, _, err = run(capsys, *train_args(tiny_overrides, run_copy, "train.max_steps=60"))
    assert_one_line_error(code, err, str(run_copy), "another `csan train`", "is using this run")
    assert snapshot(run_copy) == before


# -- translation input ----------------------------------------------------------------------------
def test_control_characters_empty_and_10000_token_lines(
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
    tiny_run: Path,
) -> None:
    lines = [
        "A dog runs .",
        "",
        "\x07\x1b[31mA cat\x01 sleeps\x7f .",  # bell, an ANSI colour, SOH, DEL: dropped
        " \t\u00a0\u3000 ",
        " ".join(["dog"] * 10_000),  # 10,000 tokens: cut to the model's 63 subwords, one warning
        "\x01\x02\x03",  # (a NUL byte is refused: binary content, as in every csan input)
        "\u202eA bird\u200b .",  # bidi override, zero-width space: kept, translated
    ]
    src = tmp_path / "in.en"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out.de"
    with caplog.at_level(logging.WARNING, logger="csan"):
        code, stdout, err = run(
            capsys, "translate", "--model", tiny_run, "--input", src, "--output", out, "--beam", 1
        )
    assert code == 0, err
    assert stdout == ""
    got = out.read_text(encoding="utf-8").split("\n")
    assert got[-1] == "" and len(got) - 1 == len(lines)
    assert [got[i] for i in (1, 3, 5)] == ["", "", ""]  # nothing to translate: empty line out
    assert "1 source line(s) longer than 63 subwords truncated (first: line 5" in caplog.text


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b"a dog\n\xff\xfe bad\n", "in.en:2: invalid UTF-8"),
        ("a dog\n".encode("utf-16"), "in.en:1: NUL byte"),
    ],
)
def test_failed_translation_leaves_the_output_file_intact(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, tiny_run: Path, data: bytes, needle: str
) -> None:
    src, out = tmp_path / "in.en", tmp_path / "out.de"
    src.write_bytes(data)
    out.write_text("precious\n", encoding="utf-8")
    code, _, err = run(capsys, "translate", "--model", tiny_run, "--input", src, "--output", out)
    assert_one_line_error(code, err, needle)
    assert out.read_text(encoding="utf-8") == "precious\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.en", "out.de"]


def test_output_that_cannot_be_written_fails_before_translating(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, tiny_run: Path
) -> None:
    src = tmp_path / "in.en"
    src.write_text("a dog\n", encoding="utf-8")
    for out, needle in ((tmp_path, "is a directory"), (tmp_path / "no" / "o.de", "no such folder")):
        code, _, err = run(
            capsys, "translate", "--model", tiny_run, "--input", src, "--output", out
        )
        assert_one_line_error(code, err, str(out), needle)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.en"]


# -- properties of translation with the real tiny model -------------------------------------------
@pytest.fixture(scope="module")
def tiny_model(tiny_run: Path):
    loaded = load_model(tiny_run)
    return loaded.model, SubwordModel.from_bytes(loaded.spm_bytes)


unicode_line = st.text(st.characters(blacklist_categories=("Cs",)), max_size=24)


@settings(max_examples=30, deadline=None)
@given(lines=st.lists(unicode_line, max_size=5))
def test_translate_any_unicode_keeps_one_line_per_line(tiny_model, lines: list[str]) -> None:
    model, spm = tiny_model
    got = translate_lines(model, spm, lines, beam=1, max_len_b=5)
    assert len(got) == len(lines)
    for line, out in zip(lines, got):
        assert "\n" not in out and "\r" not in out
        if normalize(line) == "":
            assert out == ""


no_newline_line = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\x00"),
    max_size=16,  # NUL: binary, refused
)


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=st.lists(no_newline_line, max_size=4))
def test_cli_stdin_any_unicode_gives_as_many_lines_out(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tiny_run: Path,
    lines: list[str],
) -> None:
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    code, out, err = run(capsys, "translate", "--model", tiny_run, "--beam", 1)
    assert code == 0, err
    assert out.count("\n") == len(lines)
    if not lines:
        assert out == ""


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"WORLD_SIZE": "2"}, "WORLD_SIZE=2 without RANK"),
        ({"WORLD_SIZE": "two"}, "WORLD_SIZE='two': expected a whole number"),
        ({"CSAN_CACHE": "FILE"}, "is a file, expected a folder for encoded corpora"),
    ],
)
def test_environment_mistakes_are_named_before_any_work(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    env: dict[str, str],
    needle: str,
) -> None:
    for key, value in env.items():
        if value == "FILE":
            value = str(tmp_path / "cache-file")
            Path(value).write_text("a file\n")
        monkeypatch.setenv(key, value)
    code, _, err = run(
        capsys, "train", "--config", "tiny", "--set", f"data.data_dir={tmp_path}",
        "--out", tmp_path / "run",
    )  # fmt: skip
    assert_one_line_error(code, err, needle)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("device", "needle"),
    [("cuda:7", "--device=cuda:7: no such device here"), ("gpu", "--device: unknown device 'gpu'")],
)
def test_bench_attention_names_a_device_it_cannot_use(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, device: str, needle: str
) -> None:
    code, _, err = run(capsys, "bench", "attention", "--device", device, "--out", tmp_path / "b")
    assert_one_line_error(code, err, needle)
    assert not (tmp_path / "b").exists()
