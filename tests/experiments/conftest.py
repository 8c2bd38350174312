"""Fixtures of the experiment tests: a small corpus cut from Multi30k, and a fake trainer."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from csan.config import Config, dump_config


@pytest.fixture(scope="session")
def small_corpus(multi30k_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """train/valid/test2016 of short Multi30k sentences (300 / 16 / 16 pairs)."""
    folder = tmp_path_factory.mktemp("small-multi30k")
    for split, n in (("train", 300), ("valid", 16), ("test2016", 16)):
        en = (multi30k_dir / f"{split}.en").read_text(encoding="utf-8").splitlines()
        de = (multi30k_dir / f"{split}.de").read_text(encoding="utf-8").splitlines()
        pairs = [(a, b) for a, b in zip(en, de) if len(a) < 60 and len(b) < 60][:n]
        (folder / f"{split}.en").write_text("".join(a + "\n" for a, _ in pairs), encoding="utf-8")
        (folder / f"{split}.de").write_text("".join(b + "\n" for _, b in pairs), encoding="utf-8")
    return folder


@pytest.fixture(scope="session")
def small_overrides(small_corpus: Path) -> list[str]:
    """``--set`` items: the ``tiny`` preset on the small corpus, a few steps on one thread."""
    return [
        f"data.data_dir={small_corpus}",
        "data.vocab_size=400",
        "train.threads=1",
        "train.device=cpu",
        "train.max_steps=6",
        "train.validate_every=6",
        "train.log_every=3",
        "train.checkpoint_minutes=null",
        "decode.beam=1",
    ]


FakeTrain = Callable[..., None]


@pytest.fixture
def fake_train() -> FakeTrain:
    """A stand-in for ``csan.training.trainer.train`` that writes what a finished run folder holds.

    Its ``calls`` list records the run folders it was asked to train. Validation BLEU is the window of
    the csan1d/csan2d option when set (so sweeps have a shape), else 10; an encoder attention starting
    with ``bogus`` raises ``ValueError`` as a bad config would.
    """
    calls: list[Path] = []

    def train(cfg: Config, out_dir: Path, *, progress: bool = False) -> None:
        out = Path(out_dir)
        calls.append(out)
        if cfg.model.encoder_attention.startswith("bogus"):
            raise ValueError(f"unknown self-attention {cfg.model.encoder_attention!r}")
        options = cfg.model.attention_options
        bleu = float(options.get("csan1d", options.get("csan2d", {})).get("window", 10))
        bleu += float(options.get("csan2d", {}).get("head_window", 0))
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.yaml").write_text(dump_config(cfg), encoding="utf-8")
        valid = {
            "kind": "valid",
            "step": 1,
            "epoch": 1.0,
            "loss": 1.0,
            "accuracy": 0.5,
            "bleu": bleu,
        }
        (out / "metrics.jsonl").write_text(json.dumps(valid) + "\n", encoding="utf-8")
        results = {
            "steps": 1,
            "epochs": 1.0,
            "train_minutes": 0.1,
            "wall_minutes": 0.1,
            "tokens_per_s": 10.0,
            "steps_per_s": 2.0,
            "best_valid": valid,
            "test": None,
            "model_dir": str(out / "model"),
            "stop_reason": "max_steps=1",
        }
        (out / "results.json").write_text(json.dumps(results), encoding="utf-8")

    train.calls = calls  # type: ignore[attr-defined]
    return train


@pytest.fixture
def fake_evaluate() -> Callable[..., None]:
    """A stand-in for ``csan.training.final_model.evaluate_test`` (no model needed).

    It writes ``<run>/<name>.hyp``: of the split's 16 references, the first ``w`` are copied and the
    rest replaced by "x", ``w`` being the fake trainer's validation BLEU (the window, or 10), so
    a wider window scores higher. Its ``calls`` list records the run folders.
    """
    calls: list[Path] = []

    def evaluate(model_dir, split, cfg, run_dir, *, device, name=None) -> dict:
        run_dir = Path(run_dir)
        calls.append(run_dir)
        valid = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])
        keep = int(valid["bleu"])
        hyps = [ref if i < keep else "x" for i, ref in enumerate(split.tgt_text)]
        (run_dir / f"{name}.hyp").write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
        return {}

    evaluate.calls = calls  # type: ignore[attr-defined]
    return evaluate
