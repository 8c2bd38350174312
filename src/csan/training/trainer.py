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

import logging
import os
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from csan import checkpoint as ckpt
from csan.config import Config, dump_config
from csan.host import HostMeter, steal_note
from csan.machine import (
    RuntimeChoice,
    choose_runtime,
    compile_dynamic,
    keep_freed_memory,
    machine_info,
    pick_device,
)
from csan.textio import on_terminal
from csan.training.data import TrainingData, load_training_data
from csan.training.distributed import DistInfo, barrier, init_distributed, shutdown
from csan.training.final_model import score_tests, write_final_model
from csan.training.loss import TranslationLoss
from csan.training.prepare import (
    apply_optimizer_settings,
    budget_steps,
    check_before_work,
    learning_rate,
    make_optimizer,
    resume_point,
    seed_everything,
    settle_for_runtime,
)
from csan.training.progress import Progress
from csan.training.records import (
    LossWindow,
    MetricsLog,
    TrainResult,
    run_header,
    train_line,
    write_results,
)
from csan.training.run_dir import RunCheckpoints, tidy_after_crash
from csan.training.safety import RunLock, StopRequest, agree_to_stop
from csan.training.schedule import Budget
from csan.training.step import BadSteps, optimizer_step
from csan.training.validation import validate

__all__ = ["TrainResult", "Trainer", "train"]

log = logging.getLogger("csan")


class Trainer:
    """Holds the moving parts of one run; :meth:`run` is the loop.

    The run folder is locked from construction to :meth:`close` (``with Trainer(...) as t:``), so
    nothing in it is read while another trainer may be writing it.

    Example (a corpus of 3 sentence pairs; the encoded corpus is cached under ``$CSAN_CACHE``):
        >>> import os
        >>> from unittest import mock
        >>> from csan.config import load_config
        >>> from csan.toy import toy_corpus
        >>> d = toy_corpus()
        >>> cfg = load_config("tiny", [f"data.data_dir={d}", "data.vocab_size=300",
        ...                            "train.max_steps=4", "train.device=cpu", "train.threads=1"])
        >>> with mock.patch.dict(os.environ, CSAN_CACHE=str(d / "cache")):
        ...     with Trainer(cfg, d / "run", progress=False) as trainer:  # doctest: +ELLIPSIS
        ...         print(trainer.data.n_train, len(trainer.data.spm), trainer.device)
        ...         result = trainer.run()
        60 300 cpu
        machine: ...
        training stopped: max_steps=4
        ...
        >>> result.steps, result.epochs, result.stop_reason
        (4, 4.0, 'max_steps=4')
    """

    def __init__(
        self, cfg: Config, out_dir: Path, *, progress: bool = True, force: bool = False
    ) -> None:
        self.cfg = cfg
        self.out = Path(out_dir)
        # a bar on a terminal; redirected to a file, a plain line every train.log_every steps instead
        # (fairseq's tqdm/simple choice), so a log holds lines and not thousands of bar redraws
        self.show_bar = progress and on_terminal(sys.stderr)
        self.log_lines = progress and not self.show_bar
        tc = cfg.train
        # config mistakes and a folder that is not ours surface before anything is written or read
        check_before_work(cfg, self.out, force=force)
        self.lr_at = learning_rate(
            cfg, lambda step: self.budget.used(step, self.progress.wall_seconds)
        )
        self.device = pick_device(tc.device)
        self.dist: DistInfo = init_distributed(self.device)
        self._lock: RunLock | None = None
        try:
            if self.is_main:  # the lock first: no file of the run is read before it is ours
                self._lock = RunLock(self.out).__enter__()
            self._build()
        except BaseException:
            if self._lock is not None:
                self._lock.undo()  # refused input leaves the folder as it was, or no folder
                self._lock = None
            self.close()
            raise

    def _build(self) -> None:
        cfg, tc = self.cfg, self.cfg.train
        if tc.threads is not None:
            torch.set_num_threads(tc.threads)
        keep_freed_memory()  # before the first large tensor: no page faults on every step's tensors
        if self.device.type == "cuda" and self.dist.enabled:
            self.device = torch.device("cuda", self.dist.local_rank)
            torch.cuda.set_device(self.device)
        if not self.is_main:
            log.setLevel(max(log.getEffectiveLevel(), logging.WARNING))  # rank 0 tells the story
        self.runtime: RuntimeChoice = choose_runtime(
            tc.cpu_bf16, tc.compile, device=self.device, cuda_bf16=tc.bf16, warn=self.is_main
        )
        # the float32 section and model.output_vocab=auto made concrete here, so config.yaml and
        # the checkpoints hold what the run trains
        self.cfg, self.float32_why, self.output_vocab_why = settle_for_runtime(
            cfg, self.runtime, self.out
        )
        cfg = self.cfg
        seed_everything(tc.seed)
        resume_dir, spm_bytes = resume_point(self.out, cfg)
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
            max_steps=budget_steps(tc, batches_per_epoch=self.data.batches_per_epoch),
            max_seconds=None if tc.max_minutes is None else tc.max_minutes * 60,
            cooldown_fraction=tc.cooldown_fraction if tc.schedule == "budget" else 0.0,
            average_last=tc.average_last,
        )
        self.checkpoints = RunCheckpoints(self.out, keep=max(tc.keep_last, tc.average_last))
        self.metrics = MetricsLog(self.out / "metrics.jsonl", enabled=self.is_main)
        self.model = self.data.build_model(cfg.model).to(self.device)
        self.loss_fn: nn.Module = TranslationLoss(self.model, epsilon=tc.label_smoothing)
        if self.dist.enabled:
            self.loss_fn = DistributedDataParallel(self.loss_fn)
        self.optimizer = make_optimizer(self.model, tc, self.device)
        self.progress = Progress()
        self.bad_steps = BadSteps(limit=tc.max_bad_steps)
        self.interrupted_by: str | None = None
        self.last_ckpt_time = time.monotonic()
        self.last_ckpt_step = -1
        self.last_ckpt_planned = True  # see save_checkpoint
        if resume_dir is not None:
            self._resume(resume_dir)
        if self.runtime.compile:
            self.loss_fn = compile_dynamic(self.loss_fn)
        # the host's steal over this session and per train line (metrics.jsonl's host_steal), and
        # its product rate at the start and the end (results.json's machine.host_products)
        self.host = HostMeter(products=self.is_main)

    def close(self) -> None:
        """Release the run folder's lock and leave the process group (idempotent)."""
        if self._lock is not None:
            self._lock.__exit__(None, None, None)
            self._lock = None
        shutdown(self.dist)

    def __enter__(self) -> Trainer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- bookkeeping ------------------------------------------------------------------------------
    @property
    def is_main(self) -> bool:
        return self.dist.is_main

    @property
    def step(self) -> int:
        return self.progress.step

    @property
    def epochs_done(self) -> float:
        return self.progress.epochs_done(len(self.data.epoch_batches(self.progress.epoch)))

    def say(self, msg: str) -> None:
        if self.is_main:
            tqdm.write(msg) if self.show_bar else print(msg, flush=True)

    def autocast(self):
        if self.runtime.bf16 and self.device.type in ("cuda", "cpu"):
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return nullcontext()

    # -- checkpoints ------------------------------------------------------------------------------
    def save_checkpoint(self, *, is_best: bool = False, planned: bool = True) -> None:
        """Write ``checkpoints/step_N`` aside, rename it into place, then point ``LAST`` at it.

        ``planned=False``: a checkpoint only to resume from (a signal's, the ``checkpoint_minutes``
        timer's). Its counters say ``unplanned`` and the final model does not average it
        (:func:`csan.training.final_model.write_final_model`), so where a run was stopped and
        resumed, or how slow its machine was, does not change which checkpoints it averages. A
        planned checkpoint at the step of an unplanned one (a signal at an epoch's last step, then
        the resumed run's validation) writes it again as planned."""
        done = self.last_ckpt_step == self.step and (self.last_ckpt_planned or not planned)
        if not self.is_main or done:
            if is_best and self.is_main:
                self.checkpoints.point("BEST", self.step)
            return
        counters = self.progress.counters(cooldown_step=self.budget.cooldown_step)
        if not planned:
            counters["unplanned"] = True
        refused = self.checkpoints.save_state(
            self.step,
            model=self.model,
            cfg=self.cfg,
            spm_bytes=self.data.spm.to_bytes(),
            optimizer=self.optimizer,
            counters=counters,
            is_best=is_best,
            protect_from=self.budget.cooldown_step,
        )
        if refused:
            self.say(f"warning: step {self.step}: {refused}; no checkpoint")
            return
        self.last_ckpt_time = time.monotonic()
        self.last_ckpt_step = self.step
        self.last_ckpt_planned = planned

    def _resume(self, folder: Path) -> None:
        meta = self.checkpoints.load_state(folder, model=self.model, optimizer=self.optimizer)
        apply_optimizer_settings(self.optimizer, self.cfg.train)  # the config's, not the saved
        self.progress = Progress.from_counters(meta)
        # where the budget stood, or the first step after the resume would look like a new slot
        # of the cooldown and write a checkpoint that the final model averages
        self.budget.resume(
            step=self.step,
            seconds=self.progress.wall_seconds,
            cooldown_step=meta.get("cooldown_step"),
        )
        self.last_ckpt_step = self.step
        self.last_ckpt_planned = not meta.get("unplanned", False)
        self.say(f"resuming from step {self.step} ({folder})")

    # -- one optimizer step -----------------------------------------------------------------------
    def train_step(self, batches: list) -> dict[str, Any]:
        """One optimizer step over ``batches`` (:func:`csan.training.step.optimizer_step`)."""
        stats = optimizer_step(
            self.loss_fn,
            self.model,
            self.optimizer,
            batches,
            device=self.device,
            dist=self.dist,
            autocast=self.autocast,
            clip_norm=self.cfg.train.clip_norm,
            next_lr=lambda: self.lr_at(self.step + 1),
        )
        if not stats["skipped"]:
            self.progress.step += 1
        return stats

    @torch.no_grad()
    def validate(self) -> dict[str, float]:
        self.model.eval()
        with self.autocast():
            metrics = validate(self.model, self.data, self.cfg, device=self.device)
        self.model.train()
        return metrics

    def stop_vote(self, stop: StopRequest) -> str | None:
        """Why to stop now, agreed by every rank (:func:`csan.training.safety.agree_to_stop`)."""
        tc = self.cfg.train
        reason = self.progress.limit_reached(
            max_steps=tc.max_steps, max_minutes=tc.max_minutes, max_epochs=tc.max_epochs
        )
        reason, sig = agree_to_stop(reason, stop, self.dist, max_minutes=tc.max_minutes)
        self.interrupted_by = self.interrupted_by or sig
        return reason

    # -- the loop ---------------------------------------------------------------------------------
    def run(self) -> TrainResult:
        if self.is_main:
            dropped = tidy_after_crash(self.out, self.step)
            if dropped:
                self.say(f"metrics.jsonl: dropped {dropped} line(s) written after step {self.step}")
            ckpt.atomic_write_text(self.out / "config.yaml", dump_config(self.cfg))
            # the first lines of stdout, after the data checks (refused input prints nothing)
            for line in run_header(
                self.cfg,
                self.model,
                self.data,
                self.runtime,
                self.device,
                self.dist,
                output_vocab_why=self.output_vocab_why,
                float32_why=self.float32_why,
            ):
                self.say(line)
        with StopRequest() as stop:
            stop_reason = self.stop_vote(stop)
            if stop_reason is None and self.step > 0:
                # resumed: the next interval holds start-up and compilation again
                self.metrics.write(
                    {
                        "kind": "resume",
                        "step": self.step,
                        "epoch": round(self.epochs_done, 3),
                        "train_seconds": round(self.progress.train_seconds, 1),
                    }
                )
            while stop_reason is None:
                stop_reason = self._run_epoch(stop)
            # a second signal would interrupt this, atomically
            self.save_checkpoint(planned=self.interrupted_by is None)
        if self.interrupted_by:
            self.say(
                f"training interrupted by {self.interrupted_by} at step {self.step}: "
                f"checkpoint {self.out / 'checkpoints' / self.checkpoints.name(self.step)}; "
                "run the same command to resume"
            )
        else:
            self.say(f"training stopped: {stop_reason}")
        return self.finish(stop_reason)  # Ctrl-C here (test scoring) stops at once

    def _run_epoch(self, stop: StopRequest) -> str | None:
        """Train on the rest of the current epoch; returns why to stop, or None for the next epoch."""
        tc, p = self.cfg.train, self.progress
        batches = self.data.epoch_batches(p.epoch)
        bar = tqdm(
            total=len(batches),
            initial=p.batch_in_epoch,
            desc=f"epoch {p.epoch}",
            disable=not (self.show_bar and self.is_main),
            dynamic_ncols=True,
            leave=False,
        )
        window = LossWindow()  # the logged loss: the mean over the steps since the previous line
        try:
            while p.batch_in_epoch < len(batches):
                group = batches[p.batch_in_epoch : p.batch_in_epoch + tc.update_freq]
                t0 = time.monotonic()
                stats = self.train_step([self.data.batch(idx, epoch=p.epoch) for idx in group])
                p.train_seconds += time.monotonic() - t0
                p.batch_in_epoch += len(group)
                bar.update(len(group))
                if stats["skipped"]:
                    last = ckpt.latest_checkpoint(self.out)
                    self.say(self.bad_steps.skipped(stats, step=self.step, last_checkpoint=last))
                else:
                    self.bad_steps.good()
                    p.tokens_seen += int(stats["tokens"])
                    window.add(stats)
                    eta = p.eta(tc.max_minutes)
                    if not bar.disable:  # a log without a bar formats nothing for it
                        bar.set_postfix(
                            loss=f"{stats['loss']:.3f}",
                            lr=f"{stats['lr']:.2e}",
                            tok_s=f"{window.tokens_per_s():,.0f}",
                            eta=eta,
                        )
                    if self.step % tc.log_every == 0:
                        record = window.record(
                            step=self.step, epoch=self.epochs_done, lr=stats["lr"], progress=p
                        )
                        steal = self.host.lap()
                        if steal is not None:
                            record["host_steal"] = steal
                        self.metrics.write(record)
                        if self.log_lines:
                            self.say(train_line(record, eta=eta))
                        window.reset()
                    # planned: a cooldown point of the budget schedule, or checkpoint_every
                    planned = self.budget.cooldown_checkpoint_due(self.step, p.wall_seconds) or (
                        tc.checkpoint_every is not None and self.step % tc.checkpoint_every == 0
                    )
                    if tc.validate_every is not None and self.step % tc.validate_every == 0:
                        self._validate_and_save()
                    elif planned or self._timer_due():
                        self.save_checkpoint(planned=planned)
                reason = self.stop_vote(stop)
                if reason:
                    return reason
        finally:
            bar.close()
        p.epoch += 1
        p.batch_in_epoch = 0
        if tc.validate_every is None:
            self._validate_and_save()
        return self.stop_vote(stop)

    def _timer_due(self) -> bool:
        """Whether ``checkpoint_minutes`` have passed since the last checkpoint."""
        minutes = self.cfg.train.checkpoint_minutes
        return minutes is not None and time.monotonic() - self.last_ckpt_time >= minutes * 60

    def _validate_and_save(self) -> None:
        """Rank 0 validates and checkpoints; no collective here, the others go on to the next step."""
        is_best = False
        if self.is_main:
            metrics = self.validate()
            is_best = self.progress.better(metrics)
            if is_best:
                self.progress.best = metrics
            self.metrics.write(
                {
                    "kind": "valid",
                    "step": self.step,
                    "epoch": round(self.epochs_done, 3),
                    "wall_seconds": round(self.progress.wall_seconds, 1),
                    **metrics,
                }
            )
            shown = ", ".join(f"{k} {v:.4g}" for k, v in metrics.items())
            self.say(
                f"step {self.step} epoch {self.epochs_done:.2f} valid: {shown}"
                + (" *" if is_best else "")
            )
        # a cooldown point that the validation's time passed is this checkpoint, not the next step's
        self.budget.cooldown_checkpoint_due(self.step, self.progress.wall_seconds)
        self.save_checkpoint(is_best=is_best)

    def finish(self, stop_reason: str) -> TrainResult:
        """Last checkpoint, final model, test scores (not after a signal), ``results.json``."""
        self.save_checkpoint(planned=self.interrupted_by is None)
        p, tc = self.progress, self.cfg.train
        wall = p.wall_seconds
        tests: dict[str, dict[str, Any]] = {}
        model_dir = self.out / "model"
        if self.is_main:
            cooldown = self.budget.cooldown_step
            how = write_final_model(self.out, model_dir, tc.average_last, cooldown_step=cooldown)
            self.say(f"final model: {model_dir} ({how})")
            if tc.evaluate_test and not self.interrupted_by:
                tests = score_tests(
                    model_dir, self.data.tests, self.cfg, self.out, device=self.device, say=self.say
                )
        result = TrainResult.of(
            p,
            wall_seconds=wall,
            epochs=self.epochs_done,
            tests=tests,
            model_dir=model_dir,
            stop_reason=stop_reason,
            interrupted_by=self.interrupted_by,
            mode=self.runtime.mode,
        )
        if self.is_main:
            host = self.host.record()
            steal = host["host_steal"]
            machine = machine_info(self.device, **host)
            write_results(self.out / "results.json", result, machine)
            self.say(result.summary())
            if note := steal_note(steal):
                self.say(
                    f"{note}: the hypervisor gave this machine's CPUs to other work for "
                    f"{steal:.0%} of the time this run had work for them, so its tokens/s are below "
                    "what this CPU does alone (results.json: machine.host_steal)"
                )
        # every rank leaves the process group together: a rank that tears its group down while rank 0
        # still writes the final model is the pattern PyTorch's docs warn can hang the shutdown
        barrier(self.dist)
        return result


def train(
    cfg: Config, out_dir: str | os.PathLike[str], *, progress: bool = True, force: bool = False
) -> TrainResult:
    """Train (or resume) a model described by ``cfg`` in ``out_dir``.

    ``out_dir`` must be new, empty or a csan run; ``force`` allows any folder (csan never deletes
    what it did not write, but its own file names in there are overwritten).

    Example (5 steps on a corpus of 3 sentence pairs, then the same run resumed to step 8; the
    encoded corpus is cached under ``$CSAN_CACHE``):
        >>> from unittest import mock
        >>> from csan.config import load_config
        >>> from csan.toy import toy_corpus
        >>> d = toy_corpus()
        >>> cfg = load_config("tiny", [f"data.data_dir={d}", "data.vocab_size=300",
        ...                            "train.max_steps=5", "train.device=cpu", "train.threads=1",
        ...                            "train.evaluate_test=false"])
        >>> with mock.patch.dict(os.environ, CSAN_CACHE=str(d / "cache")):
        ...     result = train(cfg, d / "run", progress=False)  # doctest: +ELLIPSIS
        machine: ...
        mode: float32 eager: float32 (train.cpu_bf16=false); compile off (train.compile=false)
        model: transformer, 186,880 parameters; train pairs: 60 ...
        training stopped: max_steps=5
        final model: .../run/model (copy of step_00000005)
        trained 5 steps (5.00 epochs) in ...
        >>> result.steps, result.stop_reason, sorted(p.name for p in result.model_dir.iterdir())
        (5, 'max_steps=5', ['config.json', 'model.safetensors', 'spm.model'])
        >>> cfg.train.max_steps = 8
        >>> with mock.patch.dict(os.environ, CSAN_CACHE=str(d / "cache")):
        ...     result = train(cfg, d / "run", progress=False)  # doctest: +ELLIPSIS
        resuming from step 5 (.../run/checkpoints/step_00000005)
        machine: ...
        training stopped: max_steps=8
        ...
        >>> result.steps
        8
    """
    with Trainer(cfg, Path(out_dir), progress=progress, force=force) as trainer:
        return trainer.run()
