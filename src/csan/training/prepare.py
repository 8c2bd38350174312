"""What a run settles before its first step: the checks that come before any work, the checkpoint
to resume from, the learning-rate schedule, the optimizer and the random seeds."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from torch import nn

from csan import checkpoint as ckpt
from csan.config import (
    Config,
    TrainConfig,
    apply_float32,
    check_data_config,
    check_train_config,
    config_from_dict,
    flat_keys,
    nested_keys,
    resume_difference,
)
from csan.errors import CsanError
from csan.machine import RuntimeChoice, choose_output_vocab
from csan.models import check_model
from csan.training.data import cache_root
from csan.training.distributed import distributed_env
from csan.training.schedule import budget_schedule, make_schedule

__all__ = [
    "apply_optimizer_settings",
    "budget_steps",
    "check_before_work",
    "learning_rate",
    "make_optimizer",
    "resume_point",
    "seed_everything",
    "settle_float32",
    "settle_for_runtime",
    "settle_output_vocab",
]


def check_before_work(cfg: Config, out: Path, *, force: bool = False) -> None:
    """Every mistake that can be seen without data: the config's values, the model it builds (on
    the meta device), the environment (``WORLD_SIZE``/``RANK``, the cache folder) and the output
    folder (a file, or a folder that is not a csan run, unless ``force``). Raises CsanError.

    Example (nothing is written: a new output folder is not made yet):
        >>> import tempfile
        >>> from csan.config import load_config
        >>> out = Path(tempfile.mkdtemp()) / "run"
        >>> check_before_work(load_config("tiny"), out)
        >>> out.exists()
        False
        >>> check_before_work(load_config("tiny", ["model.heads=3"]), out)
        Traceback (most recent call last):
        ...
        csan.errors.CsanError: model config: d_model (64) must be divisible by heads (3)
    """
    check_train_config(cfg.train)
    check_data_config(cfg.data)
    check_model(cfg.model)
    if cfg.float32:  # the model a float32 run would build, too
        check_model(apply_float32(cfg).model)
    if cfg.model.output_vocab == "target" and cfg.data.bpe_dropout > 0:
        raise CsanError(
            f"model.output_vocab='target' with data.bpe_dropout={cfg.data.bpe_dropout}: sampled "
            "segmentations use pieces the targets' usual one does not; set model.output_vocab=full"
        )
    distributed_env()
    cache_root()
    ckpt.check_run_output(out, force=force)


def settle_float32(
    cfg: Config, runtime: RuntimeChoice, out: Path | None = None
) -> tuple[Config, str | None]:
    """``cfg`` with its ``float32`` section settled for a run computing as ``runtime`` does, and
    what that did (None: ``cfg`` has no such section).

    Where the products are float32 (no bf16 autocast) the section is merged over the rest
    (:func:`csan.config.apply_float32`); under bf16 it is dropped. Either way the section is emptied,
    so the config a run saves holds what it trains. A run resumed from ``out`` (a run folder, or None
    for none) keeps its checkpoint's values for the section's keys, whatever this machine computes
    in: a model does not change its layers halfway.

    Example:
        >>> import tempfile
        >>> from csan.config import load_config
        >>> from csan.machine import Machine, choose_runtime
        >>> cfg = load_config("tiny", ["float32.model.ffn_dim=64"])
        >>> avx2 = choose_runtime("auto", "auto", machine=Machine("AMD EPYC", "AVX2", False, 2, 2))
        >>> fp32, why = settle_float32(cfg, avx2, Path(tempfile.mkdtemp()))
        >>> fp32.model.ffn_dim, fp32.float32, why
        (64, {}, 'float32 settings: model.ffn_dim=64 (the products are float32)')
        >>> bf16 = choose_runtime("auto", "auto", machine=Machine("AMD EPYC", "AVX512", True, 2, 2))
        >>> settle_float32(cfg, bf16)[0].model.ffn_dim, settle_float32(cfg, bf16)[1]
        (128, 'float32 settings not used: bf16 autocast')
    """
    section = cfg.float32
    if not section:
        return cfg, None
    keys = flat_keys(section)
    folder = ckpt.latest_checkpoint(out) if out is not None else None
    if folder is not None:
        saved = ckpt.read_model_meta(folder)["config"]
        kept = {key: value for key in keys if (value := _at(saved, key)) is not _MISSING}
        settled = apply_float32(replace(cfg, float32=nested_keys(kept)))
        shown = ", ".join(f"{key}={value}" for key, value in kept.items())
        return settled, f"float32 settings: the run's checkpoints' own ({shown})"
    if runtime.bf16:
        return replace(cfg, float32={}), "float32 settings not used: bf16 autocast"
    shown = ", ".join(f"{key}={value}" for key, value in keys.items())
    return apply_float32(cfg), f"float32 settings: {shown} (the products are float32)"


_MISSING = object()


def _at(data: dict, key: str) -> object:
    """The value at dotted ``key`` of a nested dict, or ``_MISSING``."""
    node: object = data
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def settle_output_vocab(
    cfg: Config, runtime: RuntimeChoice, out: Path | None = None
) -> tuple[Config, str]:
    """``cfg`` with ``model.output_vocab`` made concrete for a run computing as ``runtime`` does
    (:func:`csan.machine.choose_output_vocab`), and why. A run resumed from ``out`` (a run folder, or
    None for none) keeps the softmax its checkpoint was trained with, whatever this machine would pick. The config a run saves holds
    the concrete choice, so its checkpoints load the same model anywhere.

    Example:
        >>> import tempfile
        >>> from csan.config import load_config
        >>> from csan.machine import Machine, choose_runtime
        >>> avx2 = choose_runtime("auto", "auto", machine=Machine("AMD EPYC", "AVX2", False, 2, 2))
        >>> cfg, why = settle_output_vocab(load_config("tiny", ["model.output_vocab=auto"]), avx2,
        ...                                Path(tempfile.mkdtemp()))
        >>> cfg.model.output_vocab, why
        ('target', 'auto: float32, where the output product is a quarter of the step')
    """
    mc = cfg.model
    if mc.output_vocab == "auto" and out is not None:
        folder = ckpt.latest_checkpoint(out)
        if folder is not None:
            saved = config_from_dict(ckpt.read_model_meta(folder)["config"]).model.output_vocab
            if saved != "auto":
                why = f"auto: the run's checkpoints were trained with {saved}"
                return replace(cfg, model=replace(mc, output_vocab=saved)), why
    choice, why = choose_output_vocab(
        mc.output_vocab, runtime, arch=mc.arch, bpe_dropout=cfg.data.bpe_dropout
    )
    return replace(cfg, model=replace(mc, output_vocab=choice)), why


def settle_for_runtime(
    cfg: Config, runtime: RuntimeChoice, out: Path | None = None
) -> tuple[Config, str | None, str]:
    """``cfg`` as a run computing as ``runtime`` does trains it: its ``float32`` section
    (:func:`settle_float32`), then ``model.output_vocab`` (:func:`settle_output_vocab`); and the
    two accounts of what they did. ``out``: the run folder a resumed run keeps its choices from.

    Example:
        >>> from csan.config import load_config
        >>> from csan.machine import Machine, choose_runtime
        >>> avx2 = choose_runtime("auto", "auto", machine=Machine("AMD EPYC", "AVX2", False, 2, 2))
        >>> cfg, float32_why, vocab_why = settle_for_runtime(load_config("multi30k-small"), avx2)
        >>> cfg.model.encoder_attention, cfg.model.output_vocab, cfg.float32
        ('vanilla', 'target', {})
    """
    cfg, float32_why = settle_float32(cfg, runtime, out)
    cfg, vocab_why = settle_output_vocab(cfg, runtime, out)
    return cfg, float32_why, vocab_why


def resume_point(out: Path, cfg: Config) -> tuple[Path | None, bytes | None]:
    """The checkpoint of ``out`` to resume from and its subword model, or ``(None, None)``.

    A checkpoint trained with another setting than ``cfg`` (other than the keys that may change on
    resume, :data:`csan.config.RESUMABLE_KEYS`) is refused, naming the first changed key.

    Example (a checkpoint written by hand: only its ``config.json`` and ``spm.model`` are read):
        >>> import json, tempfile
        >>> from csan.config import load_config
        >>> run = Path(tempfile.mkdtemp())
        >>> resume_point(run, load_config("tiny"))  # a new run
        (None, None)
        >>> step = run / "checkpoints" / "step_00000100"
        >>> step.mkdir(parents=True)
        >>> for name in ckpt.CHECKPOINT_FILES:
        ...     (step / name).touch()
        >>> meta = {"config": load_config("tiny").to_dict(), "vocab_size": 1000}
        >>> _ = (step / "config.json").write_text(json.dumps(meta))
        >>> _ = (step / "spm.model").write_bytes(b"the subword model")
        >>> folder, spm_bytes = resume_point(run, load_config("tiny", ["train.max_steps=400"]))
        >>> folder.name, spm_bytes
        ('step_00000100', b'the subword model')
        >>> resume_point(run, load_config("tiny", ["model.ffn_dim=256"]))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        csan.errors.CsanError: ...: ... another setting (model.ffn_dim: 128 -> 256); resume it ...
    """
    folder = ckpt.latest_checkpoint(out)
    if folder is None:
        return None, None
    saved = config_from_dict(ckpt.read_model_meta(folder)["config"])
    changed = resume_difference(saved, cfg)
    if changed:
        raise CsanError(
            f"{out}: this run was trained with another setting ({changed}); resume it unchanged, "
            "or train into a new --out (what may change on resume: csan.config.RESUMABLE_KEYS)"
        )
    try:
        return folder, (folder / "spm.model").read_bytes()
    except OSError as e:
        raise CsanError(f"{folder / 'spm.model'}: cannot read ({e.strerror})") from None


def learning_rate(cfg: Config, budget_used: Callable[[int], float]) -> Callable[[int], float]:
    """The rate at each step: ``train.schedule`` ``budget`` follows the fraction of the budget used
    (``budget_used(step)``, steps or time), the others follow the step.

    Example:
        >>> from csan.config import load_config
        >>> rate = learning_rate(load_config("tiny"), budget_used=lambda step: step / 100)
        >>> rate(1) < rate(10)  # warming up
        True
    """
    tc = cfg.train
    try:
        if tc.schedule == "budget":
            rate = budget_schedule(
                lr=tc.lr, warmup_fraction=tc.warmup_fraction, cooldown_fraction=tc.cooldown_fraction
            )
            return lambda step: rate(budget_used(step))
        return make_schedule(tc.schedule, lr=tc.lr, warmup=tc.warmup, d_model=cfg.model.d_model)
    except ValueError as e:
        raise CsanError(str(e)) from None


def budget_steps(tc: TrainConfig, *, batches_per_epoch: int) -> int | None:
    """The step budget: ``train.max_steps``, or ``max_epochs`` epochs, whichever is smaller.

    Example:
        >>> from csan.config import load_config
        >>> tc = load_config("tiny", ["train.max_steps=500", "train.max_epochs=2"]).train
        >>> budget_steps(tc, batches_per_epoch=100)  # 2 epochs of 100 updates
        200
    """
    limits = [tc.max_steps] if tc.max_steps is not None else []
    if tc.max_epochs is not None:
        per_epoch = -(-batches_per_epoch // tc.update_freq)
        limits.append(tc.max_epochs * per_epoch)
    return min(limits) if limits else None


def make_optimizer(model: nn.Module, tc: TrainConfig, device: torch.device) -> torch.optim.Adam:
    """Adam with the config's betas, eps and weight decay; the schedule sets the absolute rate.

    Example:
        >>> tc = TrainConfig(weight_decay=0.01)
        >>> group = make_optimizer(nn.Linear(2, 2), tc, torch.device("cpu")).param_groups[0]
        >>> group["lr"], group["betas"], group["weight_decay"], group["fused"]
        (1.0, (0.9, 0.98), 0.01, True)
    """
    optimizer = torch.optim.Adam(
        model.parameters(),
        lr=1.0,  # the schedule gives the absolute rate
        fused=device.type in ("cpu", "cuda"),  # one kernel for all parameters: 2.6x on CPU
    )
    apply_optimizer_settings(optimizer, tc)
    return optimizer


def apply_optimizer_settings(optimizer: torch.optim.Optimizer, tc: TrainConfig) -> None:
    """Put the config's Adam settings into an optimizer, a restored one included (they may change
    on resume).

    Example:
        >>> optimizer = torch.optim.Adam(nn.Linear(2, 2).parameters())
        >>> apply_optimizer_settings(optimizer, TrainConfig(adam_betas=(0.9, 0.997), adam_eps=1e-8))
        >>> optimizer.param_groups[0]["betas"], optimizer.param_groups[0]["eps"]
        ((0.9, 0.997), 1e-08)
    """
    for group in optimizer.param_groups:
        group.update(betas=tc.adam_betas, eps=tc.adam_eps, weight_decay=tc.weight_decay)


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's generators.

    Example:
        >>> seed_everything(7); first = (random.random(), np.random.rand(), torch.rand(1).item())
        >>> seed_everything(7); first == (random.random(), np.random.rand(), torch.rand(1).item())
        True
    """
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
