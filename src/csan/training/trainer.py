"""The training loop: read it top to bottom.

``train(cfg, out_dir)`` prepares the data, builds the model, resumes from ``out_dir`` when it holds a
checkpoint, trains with label-smoothed cross-entropy and Adam, validates, checkpoints (atomically, best
and last kept), and at the end writes the final model folder ``out_dir/model`` and scores the test split.

When things go wrong:

- ``kill -9`` at any moment loses at most the steps since the last checkpoint (``train.checkpoint_every``
  steps, ``train.checkpoint_minutes``); running the same command again resumes from it and follows the
  trajectory the uninterrupted run would have followed (metrics lines past it are dropped).
- SIGINT or SIGTERM: the current step ends, a checkpoint is written, the final model is written, the
  test split is *not* scored, and ``results.json`` says ``"stop_reason": "signal SIGTERM"``;
  ``TrainResult.interrupted_by`` names the signal and ``csan train`` exits with 128 + its number
  (130, 143). A second signal stops at once.
- A non-finite loss or gradient norm skips the update with a warning; ``train.max_bad_steps`` in a
  row stop the run with a :class:`CsanError` naming the last good checkpoint (none is written then).
- Under ``torchrun`` every rank takes the same steps and the same stop decision; rank 0 alone writes.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import signal
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from csan import checkpoint as ckpt
from csan.checkpoint import trainer_state
from csan.config import (
    Config,
    check_data_config,
    check_train_config,
    config_from_dict,
    dump_config,
    resume_difference,
)
from csan.errors import CsanError
from csan.machine import (
    RuntimeChoice,
    choose_runtime,
    describe_machine,
    keep_freed_memory,
    machine_info,
    pick_device,
)
from csan.models import build_model, check_model
from csan.training.data import TrainingData, cache_root, load_training_data
from csan.training.distributed import (
    DistInfo,
    all_reduce_sum,
    any_rank,
    distributed_env,
    init_distributed,
    shutdown,
)
from csan.training.final_model import evaluate_test, write_final_model
from csan.training.loss import TranslationLoss
from csan.training.run_dir import RunCheckpoints
from csan.training.safety import RunLock, StopRequest, trim_metrics
from csan.training.schedule import Budget, budget_schedule, make_schedule
from csan.training.validation import validate

__all__ = ["TrainResult", "train"]

log = logging.getLogger("csan")

# what the run writes aside (``<name>.tmp-<pid>``) and renames into place in its folder
RUN_LEFTOVERS = ("model", ".config.yaml", ".results.json")


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
    test: dict[str, Any] | None  # the first test set's score (tests: all of them)
    model_dir: Path
    stop_reason: str  # "max_steps=200", "max_minutes=60", "max_epochs=5" or "signal SIGTERM"
    interrupted_by: str | None  # "SIGINT" or "SIGTERM" when a signal stopped the run
    mode: str = ""  # what the run computed with: "bf16 + compile", "float32 eager", ...
    tests: dict[str, dict[str, Any]] = field(default_factory=dict)  # every test set: name -> score


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


class Trainer:
    """Holds the moving parts of one run; :meth:`run` is the loop."""

    def __init__(
        self, cfg: Config, out_dir: Path, *, progress: bool = True, force: bool = False
    ) -> None:
        self.cfg = cfg
        self.out = Path(out_dir)
        self.progress = progress
        tc = cfg.train
        # config mistakes and a folder that is not ours surface before the data preparation
        check_train_config(tc)
        check_data_config(cfg.data)
        check_model(cfg.model)
        distributed_env()
        cache_root()
        ckpt.check_run_output(self.out, force=force)
        try:
            if tc.schedule == "budget":
                rate = budget_schedule(
                    lr=tc.lr,
                    warmup_fraction=tc.warmup_fraction,
                    cooldown_fraction=tc.cooldown_fraction,
                )
                self.lr_at = lambda step: rate(self.budget.used(step, self.wall_seconds))
            else:
                self.lr_at = make_schedule(
                    tc.schedule, lr=tc.lr, warmup=tc.warmup, d_model=cfg.model.d_model
                )
        except ValueError as e:
            raise CsanError(str(e)) from None
        self.device = pick_device(tc.device)
        if tc.threads is not None:
            torch.set_num_threads(tc.threads)
        keep_freed_memory()  # before the first large tensor: no page faults on every step's tensors
        self.dist: DistInfo = init_distributed(self.device)
        if self.device.type == "cuda" and self.dist.enabled:
            self.device = torch.device("cuda", self.dist.local_rank)
            torch.cuda.set_device(self.device)
        if not self.is_main:
            log.setLevel(max(log.getEffectiveLevel(), logging.WARNING))  # rank 0 tells the story
        self.runtime: RuntimeChoice = choose_runtime(
            tc.cpu_bf16, tc.compile, device=self.device, cuda_bf16=tc.bf16, warn=self.is_main
        )
        seed_everything(tc.seed)
        resume_dir = ckpt.latest_checkpoint(self.out)
        spm_bytes = None
        if resume_dir is not None:
            saved = config_from_dict(ckpt.read_model_meta(resume_dir)["config"])
            changed = resume_difference(saved, cfg)
            if changed:
                raise CsanError(
                    f"{self.out}: this run was trained with another setting ({changed}); "
                    "resume it unchanged, or train into a new --out (what may change on resume: "
                    "csan.config.RESUMABLE_KEYS)"
                )
            try:
                spm_bytes = (resume_dir / "spm.model").read_bytes()
            except OSError as e:
                raise CsanError(f"{resume_dir / 'spm.model'}: cannot read ({e.strerror})") from None
        # Batch widths: multiples of 8 on a GPU (tensor-core tiles), exact on a CPU, where rounding
        # to 8 made 25% of the source and 19% of the target positions padding and cost 15% of the
        # throughput (multi30k-small, 2 threads: 2,855 -> 3,368 tok/s on AVX2, 4,258 -> 4,729 bf16)
        self.data: TrainingData = load_training_data(
            cfg,
            spm_bytes=spm_bytes,
            dist=self.dist,
            pad_to_multiple=8 if self.device.type == "cuda" else 1,
        )
        self.budget = Budget(
            max_steps=self.budget_steps(),
            max_seconds=None if tc.max_minutes is None else tc.max_minutes * 60,
            cooldown_fraction=tc.cooldown_fraction if tc.schedule == "budget" else 0.0,
            average_last=tc.average_last,
        )
        self.checkpoints = RunCheckpoints(self.out, keep=max(tc.keep_last, tc.average_last))
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
            fused=self.device.type in ("cpu", "cuda"),  # one kernel for all parameters: 2.6x on CPU
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
        self.interrupted_by: str | None = None
        self.last_ckpt_time = time.monotonic()
        self.last_ckpt_step = -1
        if resume_dir is not None:
            self._resume(resume_dir)
        if self.runtime.compile:
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
        (every ``train.log_every`` steps) adds ``loss`` and ``nll`` (bits per target token, the
        token-weighted mean over the steps since the previous line of this epoch and process), ``lr``,
        ``tokens_per_s`` and ``train_seconds``; ``kind == "valid"`` adds ``loss`` (bits per token),
        ``accuracy`` and, with ``train.valid_bleu``, ``bleu``; ``kind == "resume"`` marks where a resumed
        run started again (``train_seconds`` so far).
        """
        if not self.is_main:
            return
        record = {"time": round(time.time(), 3), **record}
        with open(self.out / "metrics.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")

    def autocast(self):
        if self.runtime.bf16 and self.device.type in ("cuda", "cpu"):
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return nullcontext()

    # -- the budget -----------------------------------------------------------------------------------
    def budget_steps(self) -> int | None:
        """The step budget: ``train.max_steps``, or ``max_epochs`` epochs, whichever is smaller."""
        tc = self.cfg.train
        limits = [tc.max_steps] if tc.max_steps is not None else []
        if tc.max_epochs is not None:
            per_epoch = -(-len(self.data.sampler) // tc.update_freq)
            limits.append(tc.max_epochs * per_epoch)
        return min(limits) if limits else None

    # -- checkpoints ------------------------------------------------------------------------------
    def save_checkpoint(self, *, is_best: bool = False) -> None:
        """Write ``checkpoints/step_N`` aside, rename it into place, then point ``LAST`` at it."""
        if not self.is_main or self.last_ckpt_step == self.step:
            if is_best and self.is_main:
                self.checkpoints.point("BEST", self.step)
            return
        bad = [n for n, p in self.model.named_parameters() if not torch.isfinite(p).all()]
        if bad:  # never replace a good checkpoint by a broken one
            self.say(f"warning: step {self.step}: weights not finite ({bad[0]}); no checkpoint")
            return
        counters = {
            "step": self.step,
            "epoch": self.epoch,
            "batch_in_epoch": self.batch_in_epoch,
            "train_seconds": self.train_seconds,
            "wall_seconds": self.wall_seconds,
            "tokens_seen": self.tokens_seen,
            "best": self.best,
            "cooldown_step": self.budget.cooldown_step,
        }
        tensors, meta = trainer_state.capture(self.optimizer, counters)

        def fill(tmp: Path) -> None:
            ckpt.save_model_dir(tmp, self.model, self.cfg, self.data.spm.to_bytes(), step=self.step)
            ckpt.save_trainer_state(tmp, tensors, meta)

        self.checkpoints.save(
            self.step, fill, is_best=is_best, protect_from=self.budget.cooldown_step
        )
        self.last_ckpt_time = time.monotonic()
        self.last_ckpt_step = self.step

    def _resume(self, folder: Path) -> None:
        ckpt.load_weights(self.model, folder / "model.safetensors")
        meta = trainer_state.restore(folder, self.optimizer)
        tc = self.cfg.train
        for group in self.optimizer.param_groups:  # the config's settings, not the checkpoint's
            group.update(betas=tc.adam_betas, eps=tc.adam_eps, weight_decay=tc.weight_decay)
        self.step = meta["step"]
        self.epoch = meta["epoch"]
        self.batch_in_epoch = meta["batch_in_epoch"]
        self.train_seconds = meta["train_seconds"]
        self.wall_before = meta.get("wall_seconds", meta["train_seconds"])
        self.tokens_seen = meta["tokens_seen"]
        self.best = meta["best"]
        self.budget.cooldown_step = meta.get("cooldown_step")
        self.last_ckpt_step = self.step
        self.say(f"resuming from step {self.step} ({folder})")

    # -- one optimizer step -----------------------------------------------------------------------
    def _train_step(self, batches: list) -> dict[str, Any]:
        """Forward/backward over ``batches`` (gradient accumulation), then one Adam step.

        A non-finite loss or gradient norm skips the Adam step: ``{"skipped": True, ...}``.
        """
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
        # the gradients are the same on every rank after DDP's all-reduce: so is this decision
        clip = self.cfg.train.clip_norm
        grad_norm = float(
            torch.nn.utils.clip_grad_norm_(
                self.model.parameters(), clip if clip is not None else math.inf
            )
        )
        if not (math.isfinite(sum_loss) and math.isfinite(grad_norm)):
            self.optimizer.zero_grad(set_to_none=True)
            return {"skipped": True, "loss": sum_loss, "grad_norm": grad_norm}
        lr = self.lr_at(self.step + 1)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.step()
        self.step += 1
        return {
            "skipped": False,
            "loss": sum_loss / total_tokens / math.log(2),
            "nll": sum_nll / total_tokens / math.log(2),
            "lr": lr,
            "tokens": total_tokens,
            "grad_norm": grad_norm,
        }

    # -- validation -------------------------------------------------------------------------------
    @torch.no_grad()
    def validate(self) -> dict[str, float]:
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
        """The limit this rank has reached, if any (see :meth:`stop_vote` for the agreed one)."""
        tc = self.cfg.train
        if tc.max_steps is not None and self.step >= tc.max_steps:
            return f"max_steps={tc.max_steps}"
        if tc.max_minutes is not None and self.wall_seconds >= tc.max_minutes * 60:
            return f"max_minutes={tc.max_minutes}"
        if tc.max_epochs is not None and self.epoch > tc.max_epochs:
            return f"max_epochs={tc.max_epochs}"
        return None

    def stop_vote(self, stop: StopRequest) -> str | None:
        """Why to stop now, the same on every rank: a signal or a time limit one rank sees stops all.

        Under DDP this is a collective (one small all-reduce): every rank calls it at the same point.
        Steps and epochs advance in lockstep, so only the clock and signals need the vote.
        """
        reason = self.limits_reached()
        sig = float(stop.signal or 0)
        if self.dist.enabled:
            sig, over = any_rank([sig, 1.0 if reason else 0.0], self.dist)
            if over and reason is None:
                reason = f"max_minutes={self.cfg.train.max_minutes}"
        if sig:
            self.interrupted_by = signal.Signals(int(sig)).name
            return f"signal {self.interrupted_by}"
        return reason

    def run(self) -> TrainResult:
        lock = RunLock(self.out) if self.is_main else nullcontext()
        if self.is_main:
            self.out.mkdir(parents=True, exist_ok=True)
        with lock:
            if self.is_main:
                self._tidy_after_crash()
                ckpt.atomic_write_text(self.out / "config.yaml", dump_config(self.cfg))
                # the first lines of stdout (after the data checks, so refused input prints nothing)
                if self.device.type == "cpu":
                    self.say(f"machine: {describe_machine().summary()}")
                self.say(f"mode: {self.runtime.mode}: {'; '.join(self.runtime.reasons)}")
                n_params = sum(p.numel() for p in self.model.parameters())
                self.say(
                    f"model: {self.cfg.model.arch}, {n_params:,} parameters; "
                    f"train pairs: {self.data.n_train:,} (dropped {self.data.n_dropped:,} over "
                    f"{self.cfg.data.max_len} tokens or empty); device {self.device}"
                    + (f", {self.dist.world_size} processes" if self.dist.enabled else "")
                )
            with StopRequest() as stop:
                stop_reason = self.stop_vote(stop)
                if stop_reason is None and self.step > 0:
                    # resumed: the next interval holds start-up and compilation again
                    self.log_metrics(
                        {
                            "kind": "resume",
                            "step": self.step,
                            "epoch": round(self.epochs_done, 3),
                            "train_seconds": round(self.train_seconds, 1),
                        }
                    )
                while stop_reason is None:
                    stop_reason = self._run_epoch(self.data.sampler, stop)
                self.save_checkpoint()  # a second signal would interrupt this, atomically
            if self.interrupted_by:
                self.say(
                    f"training interrupted by {self.interrupted_by} at step {self.step}: "
                    f"checkpoint {self.out / 'checkpoints' / f'step_{self.step:08d}'}; "
                    "run the same command to resume"
                )
            else:
                self.say(f"training stopped: {stop_reason}")
            return self.finish(stop_reason)  # Ctrl-C here (test scoring) stops at once

    def _tidy_after_crash(self) -> None:
        """Remove a killed run's temporary folders and its metrics lines past the checkpoint."""
        root = self.out / "checkpoints"
        if root.is_dir():
            removed = ckpt.remove_stale_temporaries(root)
            if removed:
                log.info("removed leftovers of an interrupted checkpoint: %s", ", ".join(removed))
        # the final model and the run's own files, written aside and renamed: their leftovers only
        removed = ckpt.remove_stale_temporaries(self.out, names=RUN_LEFTOVERS)
        if removed:
            log.info("removed leftovers of an interrupted write: %s", ", ".join(removed))
        dropped = trim_metrics(self.out / "metrics.jsonl", self.step)
        if dropped:
            self.say(f"metrics.jsonl: dropped {dropped} line(s) written after step {self.step}")

    def _run_epoch(self, sampler, stop: StopRequest) -> str | None:
        """Train on the rest of the current epoch; returns why to stop, or None for the next epoch."""
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
        # the logged loss is the token-weighted mean over the steps since the previous line
        window_tokens, window_loss, window_nll, window_start = 0.0, 0.0, 0.0, time.monotonic()
        pos = self.batch_in_epoch
        try:
            while pos < len(batches):
                group = batches[pos : pos + tc.update_freq]
                t0 = time.monotonic()
                stats = self._train_step([self.data.batch(idx) for idx in group])
                self.train_seconds += time.monotonic() - t0
                pos += len(group)
                self.batch_in_epoch = pos
                bar.update(len(group))
                if stats["skipped"]:
                    self._bad_step(stats)
                else:
                    self.bad_steps = 0
                    self.tokens_seen += int(stats["tokens"])
                    window_tokens += stats["tokens"]
                    window_loss += stats["loss"] * stats["tokens"]
                    window_nll += stats["nll"] * stats["tokens"]
                    tok_s = window_tokens / max(time.monotonic() - window_start, 1e-9)
                    bar.set_postfix(
                        loss=f"{stats['loss']:.3f}",
                        lr=f"{stats['lr']:.2e}",
                        tok_s=f"{tok_s:,.0f}",
                        eta=self._eta(),
                    )
                    if self.step % tc.log_every == 0:
                        mean = {
                            **stats,
                            "loss": window_loss / window_tokens,
                            "nll": window_nll / window_tokens,
                        }
                        self._log_train(mean, tok_s)
                        window_tokens, window_loss, window_nll = 0.0, 0.0, 0.0
                        window_start = time.monotonic()
                    cooldown_point = self.budget.cooldown_checkpoint_due(
                        self.step, self.wall_seconds
                    )
                    if tc.validate_every is not None and self.step % tc.validate_every == 0:
                        self._validate_and_save()
                    elif self._checkpoint_due() or cooldown_point:
                        self.save_checkpoint()
                reason = self.stop_vote(stop)
                if reason:
                    return reason
        finally:
            bar.close()
        self.epoch += 1
        self.batch_in_epoch = 0
        if tc.validate_every is None:
            self._validate_and_save()
        return self.stop_vote(stop)

    def _log_train(self, stats: dict[str, Any], tok_s: float) -> None:
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

    def _bad_step(self, stats: dict[str, Any]) -> None:
        """Count a skipped update; too many in a row stop the run (the same on every rank)."""
        tc = self.cfg.train
        self.bad_steps += 1
        what = "loss" if not math.isfinite(stats["loss"]) else "gradient norm"
        value = stats["loss"] if what == "loss" else stats["grad_norm"]
        self.say(
            f"warning: non-finite {what} ({value}) at step {self.step + 1}; update skipped "
            f"({self.bad_steps} in a row, train.max_bad_steps={tc.max_bad_steps})"
        )
        if self.bad_steps < tc.max_bad_steps:
            return
        last = ckpt.latest_checkpoint(self.out)
        kept = (
            f"the last good checkpoint is {last} (step {int(last.name.split('_')[1])})"
            if last is not None
            else "no checkpoint was written before"
        )
        raise CsanError(
            f"training diverged: {self.bad_steps} updates in a row with a non-finite {what} "
            f"after step {self.step} (train.max_bad_steps={tc.max_bad_steps}); {kept}; "
            "lower train.lr or raise train.warmup"
        )

    def _eta(self) -> str:
        mm = self.cfg.train.max_minutes
        if mm is None:
            return "-"
        left = max(mm * 60 - self.wall_seconds, 0)
        return f"{int(left // 60)}m{int(left % 60):02d}s"

    def _checkpoint_due(self) -> bool:
        tc = self.cfg.train
        if tc.checkpoint_every is not None and self.step % tc.checkpoint_every == 0:
            return True
        minutes = tc.checkpoint_minutes
        return minutes is not None and time.monotonic() - self.last_ckpt_time >= minutes * 60

    def _validate_and_save(self) -> None:
        """Rank 0 validates and checkpoints; no collective here, the others go on to the next step."""
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
        """Last checkpoint, final model, test score (not after a signal), ``results.json``."""
        self.save_checkpoint()
        wall = self.wall_seconds
        minutes = self.train_seconds / 60
        result_test = None
        result_tests: dict[str, dict[str, Any]] = {}
        model_dir = self.out / "model"
        if self.is_main:
            how = write_final_model(
                self.out,
                model_dir,
                self.cfg.train.average_last,
                cooldown_step=self.budget.cooldown_step,
            )
            self.say(f"final model: {model_dir} ({how})")
            if self.cfg.train.evaluate_test and not self.interrupted_by:
                for name, test in self.data.tests.items():
                    record = evaluate_test(
                        model_dir, test, self.cfg, self.out, device=self.device, name=name
                    )
                    result_tests[name] = record
                    self.say(
                        f"{name} BLEU = {record['bleu']:.2f}  chrF = {record['chrf']:.2f}  "
                        f"({record['signature']})"
                    )
                result_test = next(iter(result_tests.values()), None)
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
            tests=result_tests,
            model_dir=model_dir,
            stop_reason=stop_reason,
            interrupted_by=self.interrupted_by,
            mode=self.runtime.mode,
        )
        if self.is_main:
            record = {k: (str(v) if isinstance(v, Path) else v) for k, v in result.__dict__.items()}
            record["machine"] = machine_info(self.device)
            ckpt.atomic_write_text(self.out / "results.json", json.dumps(record, indent=2) + "\n")
            self.say(
                f"trained {result.steps} steps ({result.epochs:.2f} epochs) in {wall / 60:.1f} min "
                f"({minutes:.1f} min in training steps), {tok_s:,.0f} target tokens/s"
            )
        return result


def train(
    cfg: Config, out_dir: str | os.PathLike[str], *, progress: bool = True, force: bool = False
) -> TrainResult:
    """Train (or resume) a model described by ``cfg`` in ``out_dir``.

    ``out_dir`` must be new, empty or a csan run; ``force`` allows any folder (csan never deletes
    what it did not write, but its own file names in there are overwritten).

    Example (a few seconds on 2 cores)::

        from csan.config import load_config
        result = train(load_config("tiny", ["train.max_steps=20"]), "runs/tiny")
    """
    trainer = Trainer(cfg, Path(out_dir), progress=progress, force=force)
    try:
        return trainer.run()
    finally:
        shutdown(trainer.dist)
