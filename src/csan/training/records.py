"""What a run writes about itself: ``metrics.jsonl`` line by line, and ``results.json`` at the end."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from csan import checkpoint as ckpt
from csan.config import Config
from csan.host import steal_note
from csan.machine import RuntimeChoice, describe_machine
from csan.training.data import TrainingData
from csan.training.distributed import DistInfo
from csan.training.progress import Progress

__all__ = ["LossWindow", "MetricsLog", "TrainResult", "run_header", "train_line", "write_results"]


@dataclass
class TrainResult:
    """What a finished run reports (also written to ``out_dir/results.json``).

    Example:
        >>> result = TrainResult(steps=200, epochs=1.5, train_minutes=2.0, wall_minutes=2.5,
        ...                      tokens_per_s=1234.0, steps_per_s=1.67, best_valid=None, test=None,
        ...                      model_dir=Path("run/model"), stop_reason="max_steps=200",
        ...                      interrupted_by=None)
        >>> result.summary()
        'trained 200 steps (1.50 epochs) in 2.5 min (2.0 min in training steps), 1,234 target tokens/s'
    """

    steps: int
    epochs: float
    train_minutes: float  # time in training steps
    wall_minutes: float  # the whole run: steps, validation, checkpoints (test scoring excluded)
    tokens_per_s: float
    steps_per_s: float
    best_valid: dict[str, float] | None
    test: dict[str, Any] | None  # the first test set's score (tests: all of them)
    model_dir: Path
    stop_reason: str  # "max_steps=200", "max_minutes=60", "max_epochs=5" or "signal SIGTERM"
    interrupted_by: str | None  # "SIGINT" or "SIGTERM" when a signal stopped the run
    mode: str = ""  # what the run computed with: "bf16 + compile", "float32 eager", ...
    tests: dict[str, dict[str, Any]] = field(default_factory=dict)  # every test set: name -> score

    @classmethod
    def of(
        cls,
        progress: Progress,
        *,
        wall_seconds: float,
        epochs: float,
        tests: dict[str, dict[str, Any]],
        model_dir: Path,
        stop_reason: str,
        interrupted_by: str | None,
        mode: str,
    ) -> TrainResult:
        """The result of a run that stands at ``progress``."""
        seconds = max(progress.train_seconds, 1e-9)
        return cls(
            steps=progress.step,
            epochs=epochs,
            train_minutes=progress.train_seconds / 60,
            wall_minutes=wall_seconds / 60,
            tokens_per_s=progress.tokens_seen / seconds,
            steps_per_s=progress.step / seconds,
            best_valid=progress.best,
            test=next(iter(tests.values()), None),
            tests=tests,
            model_dir=model_dir,
            stop_reason=stop_reason,
            interrupted_by=interrupted_by,
            mode=mode,
        )

    def summary(self) -> str:
        """The run's last line: steps, epochs, minutes, tokens/s."""
        return (
            f"trained {self.steps} steps ({self.epochs:.2f} epochs) in {self.wall_minutes:.1f} min "
            f"({self.train_minutes:.1f} min in training steps), {self.tokens_per_s:,.0f} "
            "target tokens/s"
        )


class MetricsLog:
    """``metrics.jsonl``: one JSON record a line, appended (by rank 0 only: ``enabled``).

    Every line has ``time`` (Unix seconds), ``kind``, ``step`` and ``epoch``. ``kind == "train"``
    (every ``train.log_every`` steps) adds ``loss`` and ``nll`` (bits per target token, the
    token-weighted mean over the steps since the previous line of this epoch and process), ``lr``,
    ``tokens_per_s``, ``train_seconds`` and, where ``/proc/stat`` tells, ``host_steal`` (the share
    of the CPU time the host took over those steps, :mod:`csan.host`); ``kind == "valid"`` adds
    ``wall_seconds``, ``loss`` (bits per token), ``accuracy`` and, with ``train.valid_bleu``,
    ``bleu``; ``kind == "resume"`` marks where a resumed run started again (``train_seconds`` so
    far).

    Example:
        >>> import tempfile
        >>> log = MetricsLog(Path(tempfile.mkdtemp()) / "metrics.jsonl")
        >>> log.write({"kind": "valid", "step": 4, "epoch": 1.0, "loss": 3.2})
        >>> sorted(json.loads(log.path.read_text()))
        ['epoch', 'kind', 'loss', 'step', 'time']
    """

    def __init__(self, path: Path, *, enabled: bool = True) -> None:
        self.path = Path(path)
        self.enabled = enabled

    def write(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        record = {"time": round(time.time(), 3), **record}
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")


def run_header(
    cfg: Config,
    model: nn.Module,
    data: TrainingData,
    runtime: RuntimeChoice,
    device: torch.device,
    dist: DistInfo,
    *,
    output_vocab_why: str | None = None,
    float32_why: str | None = None,
) -> list[str]:
    """The first lines a run prints: the machine (on a CPU), the mode ``auto`` chose and why, the
    config's float32 settings where it has them (``float32_why``:
    :func:`~csan.training.prepare.settle_float32`'s account), the model's size and softmax
    (``output_vocab_why``: :func:`~csan.training.prepare.settle_output_vocab`'s reason) and the
    training pairs.

    Example (of ``data`` only the pair counts are read):
        >>> from types import SimpleNamespace
        >>> from csan.config import load_config
        >>> from csan.machine import Machine, choose_runtime
        >>> from csan.models import build_model
        >>> cfg = load_config("tiny")
        >>> runtime = choose_runtime(False, False, machine=Machine("AMD EPYC", "AVX2", False, 2, 2))
        >>> data = SimpleNamespace(n_train=29000, n_dropped=12)
        >>> lines = run_header(cfg, build_model(cfg.model, 1000), data, runtime,
        ...                    torch.device("cpu"), DistInfo())
        >>> lines[0]  # doctest: +ELLIPSIS
        'machine: ..., ... cores; ATen capability ...'
        >>> lines[1]
        'mode: float32 eager: float32 (train.cpu_bf16=false); compile off (train.compile=false)'
        >>> for part in lines[2].split("; "):
        ...     print(part)
        model: transformer, 231,680 parameters
        train pairs: 29,000 (dropped 12 over 48 tokens or empty)
        device cpu
    """
    lines = [f"machine: {describe_machine().summary()}"] if device.type == "cpu" else []
    lines.append(f"mode: {runtime.mode}: {'; '.join(runtime.reasons)}")
    if float32_why:
        lines.append(float32_why)
    n_params = sum(p.numel() for p in model.parameters())
    softmax, why = "", f" ({output_vocab_why})" if output_vocab_why else ""
    if cfg.model.output_vocab == "target":
        softmax = f", softmax over {len(model.output_ids):,} of {model.vocab_size:,} pieces{why}"
    elif output_vocab_why and output_vocab_why.startswith("auto"):
        softmax = f", softmax over all {model.vocab_size:,} pieces{why}"
    lines.append(
        f"model: {cfg.model.arch}, {n_params:,} parameters{softmax}; "
        f"train pairs: {data.n_train:,} (dropped {data.n_dropped:,} over "
        f"{cfg.data.max_len} tokens or empty"
        + (f"; BPE-dropout {cfg.data.bpe_dropout:g}" if cfg.data.bpe_dropout else "")
        + f"); device {device}"
        + (f", {dist.world_size} processes" if dist.enabled else "")
    )
    return lines


def write_results(path: Path, result: TrainResult, machine: dict[str, Any]) -> None:
    """Write ``results.json`` (atomically): the result's fields and the machine record.

    Example:
        >>> import tempfile
        >>> result = TrainResult(steps=200, epochs=1.5, train_minutes=2.0, wall_minutes=2.5,
        ...                      tokens_per_s=1234.0, steps_per_s=1.67, best_valid=None, test=None,
        ...                      model_dir=Path("run/model"), stop_reason="max_steps=200",
        ...                      interrupted_by=None, mode="float32 eager")
        >>> path = Path(tempfile.mkdtemp()) / "results.json"
        >>> write_results(path, result, {"cpu": "AMD EPYC", "threads": 2})
        >>> saved = json.loads(path.read_text())
        >>> saved["steps"], saved["stop_reason"], saved["model_dir"], saved["machine"]["cpu"]
        (200, 'max_steps=200', 'run/model', 'AMD EPYC')
    """
    record = {k: (str(v) if isinstance(v, Path) else v) for k, v in result.__dict__.items()}
    record["machine"] = machine
    ckpt.atomic_write_text(path, json.dumps(record, indent=2) + "\n")


class LossWindow:
    """The token-weighted mean loss and the tokens/s since the last :meth:`reset` (what one
    ``train`` line of ``metrics.jsonl`` reports).

    Example:
        >>> w = LossWindow()
        >>> w.add({"tokens": 100.0, "loss": 4.0, "nll": 3.0})
        >>> w.add({"tokens": 300.0, "loss": 2.0, "nll": 1.0})
        >>> w.mean("loss"), w.mean("nll")
        (2.5, 1.5)
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.tokens = 0.0
        self.sums = {"loss": 0.0, "nll": 0.0}
        self.start = time.monotonic()

    def add(self, stats: dict[str, Any]) -> None:
        self.tokens += stats["tokens"]
        for key in self.sums:
            self.sums[key] += stats[key] * stats["tokens"]

    def mean(self, key: str) -> float:
        return self.sums[key] / max(self.tokens, 1e-9)

    def tokens_per_s(self) -> float:
        return self.tokens / max(time.monotonic() - self.start, 1e-9)

    def record(self, *, step: int, epoch: float, lr: float, progress: Progress) -> dict[str, Any]:
        """The ``train`` line of ``metrics.jsonl`` for the steps in this window."""
        return {
            "kind": "train",
            "step": step,
            "epoch": round(epoch, 3),
            "loss": round(self.mean("loss"), 4),
            "nll": round(self.mean("nll"), 4),
            "lr": lr,
            "tokens_per_s": round(self.tokens_per_s(), 1),
            "train_seconds": round(progress.train_seconds, 1),
        }


def train_line(record: dict[str, Any], *, eta: str = "-") -> str:
    """A ``train`` record of ``metrics.jsonl`` as the plain line a log gets instead of a bar.

    Example:
        >>> train_line({"kind": "train", "step": 300, "epoch": 2.344, "loss": 5.1234, "nll": 3.2101,
        ...             "lr": 0.000421, "tokens_per_s": 1757.4, "train_seconds": 612.0}, eta="32m05s")
        'step 300 epoch 2.34 train: loss 5.123, nll 3.21, lr 4.21e-04, 1,757 tok/s, eta 32m05s'

    A host steal of 5% or more (:func:`csan.host.steal_note`) is named after the tokens/s:
        >>> train_line({"kind": "train", "step": 300, "epoch": 2.344, "loss": 5.1234, "nll": 3.2101,
        ...             "lr": 0.000421, "tokens_per_s": 1171.0, "train_seconds": 612.0,
        ...             "host_steal": 0.452})
        'step 300 epoch 2.34 train: loss 5.123, nll 3.21, lr 4.21e-04, 1,171 tok/s (host steal 45%)'
    """
    note = steal_note(record.get("host_steal"))
    return (
        f"step {record['step']} epoch {record['epoch']:.2f} train: loss {record['loss']:.4g}, "
        f"nll {record['nll']:.4g}, lr {record['lr']:.2e}, {record['tokens_per_s']:,.0f} tok/s"
        + (f" ({note})" if note else "")
        + (f", eta {eta}" if eta != "-" else "")
    )
