"""The training loop: read it top to bottom.

``train(cfg, out_dir)`` prepares the data, builds the model, resumes from ``out_dir`` when it holds a
checkpoint, trains with label-smoothed cross-entropy and Adam, validates, checkpoints (atomically, best
and last kept), and at the end writes the final model folder ``out_dir/model`` and scores the test split.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import random
import signal
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from csan import checkpoint as ckpt
from csan.config import Config, dump_config
from csan.errors import CsanError
from csan.models import build_model
from csan.training.data import TrainingData, load_training_data
from csan.training.distributed import DistInfo, all_reduce_sum, init_distributed, shutdown
from csan.training.loss import TranslationLoss
from csan.training.schedule import make_schedule

__all__ = ["TrainResult", "pick_device", "train"]

log = logging.getLogger("csan")


@dataclass
class TrainResult:
    """What a finished run reports (also written to ``out_dir/results.json``)."""

    steps: int
    epochs: float
    train_minutes: float  # time in training steps
    wall_minutes: float  # the whole run: steps, validation, checkpoints (test scoring excluded)
    tokens_per_s: float
    steps_per_s: float
    best_valid: dict[str, float] | None
    test: dict[str, Any] | None
    model_dir: Path


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        return torch.device(name)
    except RuntimeError:
        raise CsanError(f"train.device: unknown device {name!r}") from None


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


class StopRequest:
    """SIGINT/SIGTERM ask the loop to checkpoint and exit at the next step boundary."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self._old: dict[int, Any] = {}

    def __enter__(self) -> StopRequest:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(ValueError):  # not the main thread
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signal is not None:  # second signal: stop now
            raise KeyboardInterrupt
        self.signal = signum

    def __exit__(self, *exc: Any) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)


class Trainer:
    """Holds the moving parts of one run; :meth:`run` is the loop."""

    def __init__(self, cfg: Config, out_dir: Path, *, progress: bool = True) -> None:
        self.cfg = cfg
        self.out = Path(out_dir)
        self.progress = progress
        tc = cfg.train
        try:  # config mistakes surface before the (possibly long) data preparation
            self.lr_at = make_schedule(
                tc.schedule, lr=tc.lr, warmup=tc.warmup, d_model=cfg.model.d_model
            )
        except ValueError as e:
            raise CsanError(str(e)) from None
        self.device = pick_device(tc.device)
        if tc.threads > 0:
            torch.set_num_threads(tc.threads)
        self.dist: DistInfo = init_distributed(self.device)
        if self.device.type == "cuda" and self.dist.enabled:
            self.device = torch.device("cuda", self.dist.local_rank)
            torch.cuda.set_device(self.device)
        seed_everything(tc.seed)
        resume_dir = ckpt.latest_checkpoint(self.out)
        spm_bytes = (resume_dir / "spm.model").read_bytes() if resume_dir else None
        self.data: TrainingData = load_training_data(cfg, spm_bytes=spm_bytes, dist=self.dist)
        self.model = build_model(cfg.model, len(self.data.spm)).to(self.device)
        self.loss_fn: nn.Module = TranslationLoss(self.model, epsilon=tc.label_smoothing)
        if self.dist.enabled:
            self.loss_fn = DistributedDataParallel(self.loss_fn)
        self.optimizer = torch.optim.Adam(
            self.model.parameters(),
            lr=1.0,  # the schedule gives the absolute rate
            betas=tc.adam_betas,
            eps=tc.adam_eps,
            weight_decay=tc.weight_decay,
        )
        self.step = 0
        self.epoch = 1
        self.batch_in_epoch = 0  # batches of the current epoch already consumed
        self.train_seconds = 0.0  # time in training steps (validation excluded), over resumes
        self.wall_before = 0.0  # wall time of earlier sessions of this run (resume)
        self.wall_start = time.monotonic()
        self.tokens_seen = 0
        self.best: dict[str, float] | None = None
        self.bad_steps = 0
        self.last_ckpt_time = time.monotonic()
        self.last_ckpt_step = -1
        if resume_dir is not None:
            self._resume(resume_dir)
        self.train_step_fn = self._train_step
        if tc.compile:
            self.loss_fn = torch.compile(self.loss_fn, dynamic=True)

    # -- bookkeeping ------------------------------------------------------------------------------
    @property
    def is_main(self) -> bool:
        return self.dist.is_main

    def say(self, msg: str) -> None:
        if self.is_main:
            tqdm.write(msg) if self.progress else print(msg, flush=True)

    def log_metrics(self, record: dict[str, Any]) -> None:
        """Append one JSON line to ``metrics.jsonl``.

        Every line has ``time`` (Unix seconds), ``kind``, ``step`` and ``epoch``. ``kind == "train"``
        (every ``train.log_every`` steps) adds ``loss`` and ``nll`` (bits per target token), ``lr``,
        ``tokens_per_s`` and ``train_seconds``; ``kind == "valid"`` adds ``loss`` (bits per token),
        ``accuracy`` and, with ``train.valid_bleu``, ``bleu``.
        """
        if not self.is_main:
            return
        record = {"time": round(time.time(), 3), **record}
        with open(self.out / "metrics.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")

    def autocast(self):
        tc = self.cfg.train
        if self.device.type == "cuda" and tc.bf16:
            return torch.autocast("cuda", dtype=torch.bfloat16)
        if self.device.type == "cpu" and tc.cpu_bf16:
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return nullcontext()

    # -- checkpoints ------------------------------------------------------------------------------
    def _trainer_meta(self) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        tensors, opt_meta = ckpt.optimizer_to_files(self.optimizer)
        tensors["rng.torch"] = torch.get_rng_state()
        if torch.cuda.is_available():
            tensors["rng.cuda"] = torch.cuda.get_rng_state()
        py_state = random.getstate()
        np_state = np.random.get_state()
        meta = {
            "step": self.step,
            "epoch": self.epoch,
            "batch_in_epoch": self.batch_in_epoch,
            "train_seconds": self.train_seconds,
            "wall_seconds": self.wall_seconds,
            "tokens_seen": self.tokens_seen,
            "best": self.best,
            "optimizer": opt_meta,
            "rng_python": [py_state[0], list(py_state[1]), py_state[2]],
            "rng_numpy": [np_state[0], np_state[1].tolist(), *np_state[2:]],
        }
        return tensors, meta

    def save_checkpoint(self, *, is_best: bool = False) -> None:
        if not self.is_main or self.last_ckpt_step == self.step:
            if is_best and self.is_main:
                self._point("BEST", f"step_{self.step:08d}")
            return
        root = self.out / "checkpoints"
        root.mkdir(parents=True, exist_ok=True)
        name = f"step_{self.step:08d}"
        tensors, meta = self._trainer_meta()

        def fill(tmp: Path) -> None:
            ckpt.save_model_dir(tmp, self.model, self.cfg, self.data.spm.to_bytes(), step=self.step)
            ckpt.save_trainer_state(tmp, tensors, meta)

        ckpt.write_folder_atomically(root / name, fill)
        self._point("LAST", name)
        if is_best:
            self._point("BEST", name)
        self.last_ckpt_time = time.monotonic()
        self.last_ckpt_step = self.step
        self._prune(root)

    def _point(self, pointer: str, name: str) -> None:
        ckpt.atomic_write_text(self.out / "checkpoints" / pointer, name + "\n")

    def _prune(self, root: Path) -> None:
        keep = {p.read_text().strip() for p in (root / "LAST", root / "BEST") if p.is_file()}
        steps = sorted(p.name for p in root.glob("step_*") if p.is_dir() and "." not in p.name)
        keep.update(steps[-max(self.cfg.train.keep_last, self.cfg.train.average_last, 1) :])
        for name in steps:
            if name not in keep:
                import shutil

                shutil.rmtree(root / name, ignore_errors=True)

    def _resume(self, folder: Path) -> None:
        ckpt.load_weights(self.model, folder / "model.safetensors")
        tensors, meta = ckpt.load_trainer_state(folder)
        ckpt.optimizer_from_files(self.optimizer, tensors, meta["optimizer"])
        torch.set_rng_state(tensors["rng.torch"])
        if "rng.cuda" in tensors and torch.cuda.is_available():
            torch.cuda.set_rng_state(tensors["rng.cuda"])
        py = meta["rng_python"]
        random.setstate((py[0], tuple(py[1]), py[2]))
        npst = meta["rng_numpy"]
        np.random.set_state((npst[0], np.array(npst[1], dtype=np.uint32), *npst[2:]))
        self.step = meta["step"]
        self.epoch = meta["epoch"]
        self.batch_in_epoch = meta["batch_in_epoch"]
        self.train_seconds = meta["train_seconds"]
        self.wall_before = meta.get("wall_seconds", meta["train_seconds"])
        self.tokens_seen = meta["tokens_seen"]
        self.best = meta["best"]
        self.last_ckpt_step = self.step
        self.say(f"resuming from step {self.step} ({folder})")

    # -- one optimizer step -----------------------------------------------------------------------
    def _train_step(self, batches: list) -> dict[str, float] | None:
        """Forward/backward over ``batches`` (gradient accumulation), then one Adam step."""
        self.loss_fn.train()
        self.optimizer.zero_grad(set_to_none=True)
        tokens = sum(b.tgt_tokens for b in batches)
        (total_tokens,) = all_reduce_sum([float(tokens)], self.dist)
        sum_loss = sum_nll = sum_correct = 0.0
        for i, batch in enumerate(batches):
            batch = batch.to(self.device)
            sync = nullcontext()
            if self.dist.enabled and i < len(batches) - 1:
                sync = self.loss_fn.no_sync()
            with sync, self.autocast():
                loss, nll, correct = self.loss_fn(batch.src, batch.tgt_in, batch.tgt_out)
            # normalise by the update's tokens over all ranks; DDP averages over ranks, so scale back
            (loss * (self.dist.world_size / total_tokens)).backward()
            sum_loss += loss.item()
            sum_nll += nll.item()
            sum_correct += correct.item()
        sum_loss, sum_nll = all_reduce_sum([sum_loss, sum_nll], self.dist)
        if not math.isfinite(sum_loss):
            self.optimizer.zero_grad(set_to_none=True)
            return None
        lr = self.lr_at(self.step + 1)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        grad_norm = 0.0
        if self.cfg.train.clip_norm > 0:
            grad_norm = float(
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.train.clip_norm)
            )
        self.optimizer.step()
        self.step += 1
        return {
            "loss": sum_loss / total_tokens / math.log(2),
            "nll": sum_nll / total_tokens / math.log(2),
            "lr": lr,
            "tokens": total_tokens,
            "grad_norm": grad_norm,
        }

    # -- validation -------------------------------------------------------------------------------
    @torch.no_grad()
    def validate(self) -> dict[str, float]:
        from csan.training.evaluate import validate

        self.model.eval()
        with self.autocast():
            metrics = validate(self.model, self.data, self.cfg, device=self.device)
        self.model.train()
        return metrics

    def better(self, metrics: dict[str, float]) -> bool:
        key = "bleu" if "bleu" in metrics else "loss"
        if self.best is None:
            return True
        return metrics[key] > self.best[key] if key == "bleu" else metrics[key] < self.best[key]

    # -- the loop ---------------------------------------------------------------------------------
    @property
    def wall_seconds(self) -> float:
        """Wall time of the run so far (validation and checkpoints included), over resumes."""
        return self.wall_before + time.monotonic() - self.wall_start

    @property
    def epochs_done(self) -> float:
        """Completed epochs as a fraction (3.5 = half-way through the fourth)."""
        return self.epoch - 1 + self.batch_in_epoch / max(len(self.data.sampler), 1)

    def limits_reached(self) -> str | None:
        tc = self.cfg.train
        if tc.max_steps and self.step >= tc.max_steps:
            return f"max_steps={tc.max_steps}"
        if tc.max_minutes and self.wall_seconds >= tc.max_minutes * 60:
            return f"max_minutes={tc.max_minutes}"
        if tc.max_epochs and self.epoch > tc.max_epochs:
            return f"max_epochs={tc.max_epochs}"
        return None

    def run(self) -> TrainResult:
        if self.is_main:
            self.out.mkdir(parents=True, exist_ok=True)
            ckpt.atomic_write_text(self.out / "config.yaml", dump_config(self.cfg))
            n_params = sum(p.numel() for p in self.model.parameters())
            self.say(
                f"model: {self.cfg.model.arch}, {n_params:,} parameters; "
                f"train pairs: {self.data.n_train:,} (dropped {self.data.n_dropped:,} over "
                f"{self.cfg.data.max_len} tokens or empty); device {self.device}"
                + (f", {self.dist.world_size} processes" if self.dist.enabled else "")
            )
        sampler = self.data.sampler
        stop_reason = self.limits_reached()
        with StopRequest() as stop:
            while stop_reason is None:
                stop_reason = self._run_epoch(sampler, stop)
        self.say(f"training stopped: {stop_reason}")
        return self.finish(stop_reason)

    def _run_epoch(self, sampler, stop: StopRequest) -> str | None:
        tc = self.cfg.train
        batches = sampler.batches(self.epoch)
        bar = tqdm(
            total=len(batches),
            initial=self.batch_in_epoch,
            desc=f"epoch {self.epoch}",
            disable=not (self.progress and self.is_main),
            dynamic_ncols=True,
            leave=False,
        )
        window_tokens, window_start = 0.0, time.monotonic()
        pos = self.batch_in_epoch
        try:
            while pos < len(batches):
                group = batches[pos : pos + tc.update_freq]
                t0 = time.monotonic()
                stats = self.train_step_fn([self.data.batch(idx) for idx in group])
                self.train_seconds += time.monotonic() - t0
                pos += len(group)
                self.batch_in_epoch = pos
                bar.update(len(group))
                if stats is None:
                    self.bad_steps += 1
                    self.say(f"warning: non-finite loss at step {self.step + 1}; batch skipped")
                    if self.bad_steps >= tc.max_bad_steps:
                        raise CsanError(
                            f"training diverged: {self.bad_steps} consecutive non-finite losses at "
                            f"step {self.step}; the last good checkpoint is kept in {self.out}"
                        )
                    continue
                self.bad_steps = 0
                self.tokens_seen += int(stats["tokens"])
                window_tokens += stats["tokens"]
                elapsed = time.monotonic() - window_start
                tok_s = window_tokens / max(elapsed, 1e-9)
                bar.set_postfix(
                    loss=f"{stats['loss']:.3f}",
                    lr=f"{stats['lr']:.2e}",
                    tok_s=f"{tok_s:,.0f}",
                    eta=self._eta(),
                )
                if self.step % tc.log_every == 0:
                    self.log_metrics(
                        {
                            "kind": "train",
                            "step": self.step,
                            "epoch": round(self.epochs_done, 3),
                            "loss": round(stats["loss"], 4),
                            "nll": round(stats["nll"], 4),
                            "lr": stats["lr"],
                            "tokens_per_s": round(tok_s, 1),
                            "train_seconds": round(self.train_seconds, 1),
                        }
                    )
                    window_tokens, window_start = 0.0, time.monotonic()
                if tc.validate_every and self.step % tc.validate_every == 0:
                    self._validate_and_save()
                elif self._checkpoint_due():
                    self.save_checkpoint()
                reason = self.limits_reached()
                if stop.signal is not None:
                    reason = f"signal {signal.Signals(stop.signal).name}"
                    self.save_checkpoint()
                if reason:
                    return reason
        finally:
            bar.close()
        self.epoch += 1
        self.batch_in_epoch = 0
        if not tc.validate_every:
            self._validate_and_save()
        return self.limits_reached()

    def _eta(self) -> str:
        mm = self.cfg.train.max_minutes
        if not mm:
            return "-"
        left = max(mm * 60 - self.wall_seconds, 0)
        return f"{int(left // 60)}m{int(left % 60):02d}s"

    def _checkpoint_due(self) -> bool:
        tc = self.cfg.train
        if tc.checkpoint_every and self.step % tc.checkpoint_every == 0:
            return True
        minutes = tc.checkpoint_minutes
        return bool(minutes) and time.monotonic() - self.last_ckpt_time >= minutes * 60

    def _validate_and_save(self) -> None:
        metrics = self.validate() if self.is_main else {}
        is_best = False
        if self.is_main:
            is_best = self.better(metrics)
            if is_best:
                self.best = metrics
            self.log_metrics(
                {
                    "kind": "valid",
                    "step": self.step,
                    "epoch": round(self.epochs_done, 3),
                    "wall_seconds": round(self.wall_seconds, 1),
                    **metrics,
                }
            )
            shown = ", ".join(f"{k} {v:.4g}" for k, v in metrics.items())
            self.say(
                f"step {self.step} epoch {self.epochs_done:.2f} valid: {shown}"
                + (" *" if is_best else "")
            )
        self.save_checkpoint(is_best=is_best)

    def finish(self, stop_reason: str) -> TrainResult:
        from csan.training.evaluate import evaluate_test, write_final_model

        self.save_checkpoint()
        wall = self.wall_seconds
        minutes = self.train_seconds / 60
        result_test = None
        model_dir = self.out / "model"
        if self.is_main:
            write_final_model(self, model_dir)
            if self.cfg.train.evaluate_test:
                result_test = evaluate_test(self, model_dir)
        tok_s = self.tokens_seen / max(self.train_seconds, 1e-9)
        steps_s = self.step / max(self.train_seconds, 1e-9)
        result = TrainResult(
            steps=self.step,
            epochs=self.epochs_done,
            train_minutes=minutes,
            wall_minutes=wall / 60,
            tokens_per_s=tok_s,
            steps_per_s=steps_s,
            best_valid=self.best,
            test=result_test,
            model_dir=model_dir,
        )
        if self.is_main:
            record = {k: (str(v) if isinstance(v, Path) else v) for k, v in result.__dict__.items()}
            record["stop_reason"] = stop_reason
            ckpt.atomic_write_text(self.out / "results.json", json.dumps(record, indent=2) + "\n")
            self.say(
                f"trained {result.steps} steps ({result.epochs:.2f} epochs) in {wall / 60:.1f} min "
                f"({minutes:.1f} min in training steps), {tok_s:,.0f} target tokens/s"
            )
        return result


def train(cfg: Config, out_dir: str | os.PathLike[str], *, progress: bool = True) -> TrainResult:
    """Train (or resume) a model described by ``cfg`` in ``out_dir``.

    Example (a few seconds on 2 cores)::

        from csan.config import load_config
        result = train(load_config("tiny", ["train.max_steps=20"]), "runs/tiny")
    """
    trainer = Trainer(cfg, Path(out_dir), progress=progress)
    try:
        return trainer.run()
    finally:
        shutdown(trainer.dist)
