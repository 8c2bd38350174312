"""Resume only what is the same run (issue 18, cases 10-12): a changed model, data, vocabulary or seed
is refused naming the key; limits and optimizer settings may change, and the latter are applied."""

from __future__ import annotations

from pathlib import Path

import pytest

from csan.config import load_config
from csan.errors import CsanError
from csan.training.trainer import Trainer, train


@pytest.fixture(scope="module")
def short_run(tmp_path_factory: pytest.TempPathFactory, tiny_overrides: list[str]) -> Path:
    out = tmp_path_factory.mktemp("short") / "run"
    train(load_config("tiny", [*tiny_overrides, "train.max_steps=3", "train.evaluate_test=false"]),
          out, progress=False)  # fmt: skip
    return out


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (["data.src_lang=de", "data.tgt_lang=en"], "data.src_lang: 'en' -> 'de'"),
        (["train.seed=7"], "train.seed: 1 -> 7"),
        (["model.d_model=128"], "model.d_model: 64 -> 128"),
        (["data.vocab_size=500"], "data.vocab_size"),
    ],
)
def test_a_changed_run_is_refused_naming_the_key(
    short_run: Path, tiny_overrides: list[str], change: list[str], needle: str
) -> None:
    before = (short_run / "config.yaml").read_text()
    cfg = load_config("tiny", [*tiny_overrides, "train.max_steps=6", *change])
    with pytest.raises(CsanError, match="trained with another setting") as info:
        Trainer(cfg, short_run, progress=False)
    assert needle in str(info.value)
    assert (short_run / "config.yaml").read_text() == before


def test_limits_may_change_and_optimizer_settings_are_applied(
    short_run: Path, tiny_overrides: list[str]
) -> None:
    cfg = load_config(
        "tiny",
        [*tiny_overrides, "train.max_steps=6", "train.adam_eps=1e-6", "train.weight_decay=0.01",
         "train.adam_betas=[0.8, 0.99]", "decode.beam=2"],
    )  # fmt: skip
    with Trainer(cfg, short_run, progress=False) as trainer:
        assert trainer.step == 3  # resumed
        group = trainer.optimizer.param_groups[0]
    assert (group["eps"], group["weight_decay"], tuple(group["betas"])) == (1e-6, 0.01, (0.8, 0.99))


def test_the_lock_comes_before_anything_in_the_run_is_read(
    tmp_path: Path, short_run: Path, tiny_overrides: list[str]
) -> None:
    """A run folder held by another trainer is refused before its checkpoint is read: with the
    checkpoint's config damaged, the error is still the lock's, not the damaged file's."""
    import shutil

    from csan.training.safety import RunLock

    run = tmp_path / "run"
    shutil.copytree(short_run, run)
    for meta in (run / "checkpoints").glob("step_*/config.json"):
        meta.write_text("{ damaged", encoding="utf-8")
    cfg = load_config("tiny", [*tiny_overrides, "train.max_steps=6"])
    with RunLock(run), pytest.raises(CsanError, match="another `csan train`"):
        Trainer(cfg, run, progress=False)
    with pytest.raises(CsanError, match=r"config\.json"):  # unlocked: now the damage is read
        Trainer(cfg, run, progress=False)


def test_refused_data_leaves_no_run_folder(tmp_path: Path, tiny_overrides: list[str]) -> None:
    """The folder is created for the lock, and removed again when the data is refused."""
    (tmp_path / "empty").mkdir()
    out = tmp_path / "new" / "run"
    cfg = load_config("tiny", [*tiny_overrides, f"data.data_dir={tmp_path / 'empty'}"])
    with pytest.raises(CsanError, match="train"):
        Trainer(cfg, out, progress=False)
    assert not (tmp_path / "new").exists()  # nor the parent it created
