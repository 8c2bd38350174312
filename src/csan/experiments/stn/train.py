"""One run of the distorted-MNIST table: a row trained with a seed on one distortion, resumable.

A run folder holds, while training, ``run.json`` (the settings that define it) and ``checkpoint/``
(``model.safetensors``, ``optimizer.safetensors`` and ``state.json``: step, epoch, the curve so far,
seconds); nothing is pickled. When it ends: ``model.safetensors`` (final weights),
``predictions.txt`` (one predicted class per test image, in order) and, written last, ``result.json``
(test error, the curve, time). A folder with ``result.json`` is finished; one with a checkpoint resumes
from it and computes exactly what an uninterrupted run would (the batch order of an epoch is drawn from
the seed and the epoch number, and the models have no dropout).

Example:
    >>> epoch_order(seed=1, epoch=0, n=5).tolist() == epoch_order(seed=1, epoch=0, n=5).tolist()
    True
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from csan.checkpoint import remove_folder, write_folder_atomically
from csan.checkpoint.trainer_state import optimizer_from_files, optimizer_to_files
from csan.errors import CsanError
from csan.experiments.stn.config import RUN_KEYS, StnConfig
from csan.experiments.stn.data import DistortedSet, as_input
from csan.experiments.stn.models import ROWS, build_model, count_parameters
from csan.textio import atomic_write_text

__all__ = ["EVAL_BATCH", "epoch_order", "evaluate", "run_settings", "train_run"]

EVAL_BATCH = 500  # test images scored at a time


def epoch_order(*, seed: int, epoch: int, n: int) -> Tensor:
    """The order of the ``n`` training images in ``epoch`` of a run with ``seed`` (a permutation).

    Example:
        >>> order = epoch_order(seed=1, epoch=0, n=10)
        >>> again = epoch_order(seed=1, epoch=0, n=10)
        >>> sorted(order.tolist()) == list(range(10)), torch.equal(order, again)
        (True, True)
        >>> torch.equal(order, epoch_order(seed=1, epoch=1, n=10))  # another epoch, another order
        False
    """
    generator = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    return torch.randperm(n, generator=generator)


@torch.no_grad()
def predict(model: nn.Module, images: Tensor) -> Tensor:
    """Predicted classes (N,) of uint8 ``images`` (N, S, S)."""
    model.eval()
    out = [
        model(as_input(images[i : i + EVAL_BATCH])).argmax(1)
        for i in range(0, len(images), EVAL_BATCH)
    ]
    model.train()
    return torch.cat(out)


def evaluate(model: nn.Module, images: Tensor, labels: Tensor) -> float:
    """Test error in percent of ``model`` on ``images`` (N, S, S) uint8.

    Example (a model that answers 3 for every image: right on 2 of 4):
        >>> model = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 10))
        >>> with torch.no_grad():
        ...     _ = model[1].weight.zero_()
        ...     _ = model[1].bias.copy_(torch.arange(10) == 3)
        >>> images = torch.randint(0, 256, (4, 28, 28), dtype=torch.uint8)
        >>> evaluate(model, images, torch.tensor([3, 3, 1, 7]))
        50.0
    """
    return 100.0 * (predict(model, images) != labels).float().mean().item()


def run_settings(cfg: StnConfig, row: str, seed: int, distortion: str) -> dict[str, Any]:
    """What defines a run (``run.json``): the row, seed, distortion and the :data:`RUN_KEYS` settings.

    The transformers' own settings are left out of the runs they do not change (``st_output`` where
    the row has no transformer at the input, ``tps_grid`` where it has no TPS one, ``st_lr_scale``
    where it has none), so a finished CNN run can stand in a zoom table as it is.

    Example:
        >>> from csan.experiments.stn.config import stn_config
        >>> cfg = stn_config("tiny", ["st_output=30"])
        >>> "st_output" in run_settings(cfg, "cnn", 1, "RTS")
        False
        >>> run_settings(cfg, "st-cnn-affine", 1, "RTS")["st_output"]
        30
    """
    spec = ROWS[row]
    unused = set()
    if spec.transform is None or spec.placement != "input":
        unused.add("st_output")
    if spec.transform != "tps":
        unused.add("tps_grid")
    if spec.transform is None:
        unused.add("st_lr_scale")
    settings = {key: getattr(cfg, key) for key in RUN_KEYS if key not in unused}
    return {"row": row, "seed": seed, "distortion": distortion, **settings}


def _param_groups(model: nn.Module, cfg: StnConfig) -> list[dict[str, Any]]:
    st = [p for name, p in model.named_parameters() if name.startswith("st.") or ".st." in name]
    st_ids = {id(p) for p in st}
    rest = [p for p in model.parameters() if id(p) not in st_ids]
    groups = [{"params": rest, "lr": cfg.lr}]
    if st:
        groups.append({"params": st, "lr": cfg.lr * cfg.st_lr_scale})
    return groups


def _set_lr(optimizer: torch.optim.Optimizer, cfg: StnConfig, step: int, total: int) -> None:
    factor = 1.0
    if cfg.schedule == "cosine":
        factor = 0.5 * (1 + math.cos(math.pi * min(step, total) / total))
    for i, group in enumerate(optimizer.param_groups):
        group["lr"] = cfg.lr * factor * (cfg.st_lr_scale if i == 1 else 1.0)


def _check_settings(run_dir: Path, settings: dict[str, Any]) -> None:
    path = run_dir / "run.json"
    if not path.is_file():
        atomic_write_text(path, json.dumps(settings, indent=2) + "\n")
        return
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise CsanError(f"{path}: corrupted ({e})") from None
    changed = [k for k in settings if old.get(k) != json.loads(json.dumps(settings[k]))]
    if changed:
        diffs = ", ".join(f"{k}: {old.get(k)!r} -> {settings[k]!r}" for k in changed)
        raise CsanError(
            f"{run_dir}: this run was started with other settings ({diffs}); "
            "use another --out, or the settings it was started with"
        )


def _save_checkpoint(
    folder: Path, model: nn.Module, optimizer: torch.optim.Optimizer, state: dict
) -> None:
    tensors, meta = optimizer_to_files(optimizer)

    def fill(tmp: Path) -> None:
        save_file(
            {k: v.detach().contiguous() for k, v in model.state_dict().items()},
            str(tmp / "model.safetensors"),
        )
        save_file(tensors, str(tmp / "optimizer.safetensors"))
        (tmp / "state.json").write_text(json.dumps({**state, "optimizer": meta}), encoding="utf-8")

    write_folder_atomically(folder, fill)


def _load_checkpoint(folder: Path, model: nn.Module, optimizer: torch.optim.Optimizer) -> dict:
    try:
        model.load_state_dict(load_file(str(folder / "model.safetensors")))
        state = json.loads((folder / "state.json").read_text(encoding="utf-8"))
        optimizer_from_files(
            optimizer, load_file(str(folder / "optimizer.safetensors")), state.pop("optimizer")
        )
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        raise CsanError(
            f"{folder}: cannot resume from this checkpoint ({str(e).splitlines()[0]})"
        ) from None
    return state


def train_run(
    cfg: StnConfig,
    *,
    row: str,
    seed: int,
    data: DistortedSet,
    run_dir: str | Path,
    say: Callable[[str], Any] = print,
) -> dict[str, Any]:
    """Train ``row`` with ``seed`` on ``data`` into ``run_dir`` (resuming it), test it, return the result.

    A finished folder is not trained again: its ``result.json`` is returned.

    Example (the ``tiny`` preset's CNN, one epoch on 100 blank images of side 42, in two batches):
        >>> import tempfile
        >>> from csan.experiments.stn.config import stn_config
        >>> cfg = stn_config("tiny")
        >>> images, labels = torch.zeros(120, 42, 42, dtype=torch.uint8), torch.arange(120) % 10
        >>> data = DistortedSet("RTS", images[:100], labels[:100], images[100:], labels[100:])
        >>> run = Path(tempfile.mkdtemp()) / "cnn-seed1"
        >>> result = train_run(cfg, row="cnn", seed=1, data=data, run_dir=run)  # doctest: +ELLIPSIS
          cnn-seed1 epoch 1/1: loss ..., curve error 90.00%
          cnn-seed1: test error 90.00% (... min)
        >>> result["steps"], result["test_images"], round(result["test_error"], 2)
        (2, 20, 90.0)
        >>> sorted(p.name for p in run.iterdir())  # the checkpoint is gone once the run is done
        ['model.safetensors', 'predictions.txt', 'result.json', 'run.json']
        >>> train_run(cfg, row="cnn", seed=1, data=data, run_dir=run) == result  # read back
        True
    """
    run_dir = Path(run_dir)
    if (run_dir / "result.json").is_file():
        return json.loads((run_dir / "result.json").read_text(encoding="utf-8"))
    run_dir.mkdir(parents=True, exist_ok=True)
    settings = run_settings(cfg, row, seed, data.distortion)
    _check_settings(run_dir, settings)
    torch.manual_seed(seed)
    model = build_model(
        row, image_size=data.image_size, st_output=cfg.st_output, tps_grid=cfg.tps_grid
    )
    optimizer = torch.optim.Adam(_param_groups(model, cfg), lr=cfg.lr)
    n = len(data.train_labels)
    per_epoch = math.ceil(n / cfg.batch_size)
    total = per_epoch * cfg.epochs
    state: dict[str, Any] = {"step": 0, "train_seconds": 0.0, "curve": []}
    ckpt = run_dir / "checkpoint"
    if ckpt.is_dir():
        state = _load_checkpoint(ckpt, model, optimizer)
        say(f"  resuming {run_dir.name} at step {state['step']}/{total}")
    curve_x, curve_y = data.test_images[: cfg.curve_images], data.test_labels[: cfg.curve_images]
    if not state["curve"]:
        state["curve"].append([0, evaluate(model, curve_x, curve_y)])
    model.train()
    while state["step"] < total:
        epoch, first = divmod(state["step"], per_epoch)
        order = epoch_order(seed=seed, epoch=epoch, n=n)
        start = time.perf_counter()
        for b in range(first, per_epoch):
            idx = order[b * cfg.batch_size : (b + 1) * cfg.batch_size]
            _set_lr(optimizer, cfg, state["step"], total)
            loss = F.cross_entropy(model(as_input(data.train_images[idx])), data.train_labels[idx])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            state["step"] += 1
            step = state["step"]
            if step % cfg.eval_every == 0 or step == total:
                state["curve"].append([step, evaluate(model, curve_x, curve_y)])
            if step % cfg.checkpoint_every == 0 or b == per_epoch - 1:
                state["train_seconds"] += time.perf_counter() - start
                start = time.perf_counter()
                _save_checkpoint(ckpt, model, optimizer, state)
        say(
            f"  {run_dir.name} epoch {epoch + 1}/{cfg.epochs}: loss {loss.item():.3f}, "
            f"curve error {state['curve'][-1][1]:.2f}%"
        )
    predictions = predict(model, data.test_images)
    error = 100.0 * (predictions != data.test_labels).float().mean().item()
    save_file(
        {k: v.detach().contiguous() for k, v in model.state_dict().items()},
        str(run_dir / "model.safetensors"),
    )
    atomic_write_text(run_dir / "predictions.txt", "".join(f"{p}\n" for p in predictions.tolist()))
    result = {
        **settings,
        "test_error": error,
        "test_images": len(data.test_labels),
        "steps": state["step"],
        "params": count_parameters(model),
        "train_seconds": state["train_seconds"],
        "curve": state["curve"],
    }
    atomic_write_text(run_dir / "result.json", json.dumps(result, indent=2) + "\n")
    remove_folder(ckpt)  # finished: the final weights are in model.safetensors
    say(f"  {run_dir.name}: test error {error:.2f}% ({state['train_seconds'] / 60:.1f} min)")
    return result
