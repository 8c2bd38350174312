"""Train a grid of variants x seeds, one run folder each, skipping finished runs; record the machine.

``run_grid`` trains ``DIR/runs/<variant>-seed<seed>/`` for every pair, in order, in this process:

- a folder holding ``results.json`` is finished and is not trained again (unless that file says the run
  was stopped by a signal: it is then resumed from its checkpoint by the trainer); if its ``config.yaml``
  differs from the config asked for (other than in :data:`IGNORED_KEYS`), the run is reported as failed
  with the first differing key, never silently reused;
- any other folder is trained with :func:`csan.training.trainer.train`, which resumes from the last
  checkpoint when there is one (with ``train.compile``, the compiler state is reset first, so that
  every run is compiled the same way);
- a run that raises is recorded as failed (its message in the record and in ``error.txt`` of its folder)
  and the grid goes on; ``KeyboardInterrupt`` stops the grid.

Config of a run: the base (preset or YAML file), then ``defaults`` (what the experiment needs, e.g. test
scoring), then the user's ``--set`` items, then the variant's overrides, then ``train.seed``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import re
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from csan.checkpoint import read_model_meta
from csan.config import (
    Config,
    apply_float32,
    config_from_dict,
    dump_config,
    flat_keys,
    load_config,
)
from csan.errors import CsanError
from csan.experiments.variants import Variant
from csan.info import count_parameters
from csan.machine import choose_runtime, machine_label
from csan.machine import machine_info as record
from csan.models import build_model
from csan.training.trainer import train

__all__ = [
    "IGNORED_KEYS",
    "RunRecord",
    "collect",
    "config_difference",
    "machine_info",
    "run_config",
    "run_folder",
    "run_grid",
    "steady_speed",
    "write_machine",
]

log = logging.getLogger("csan")

TrainFn = Callable[..., Any]


@dataclass
class RunRecord:
    """What one variant x seed run gave (``status``: ``"ok"``, ``"failed"`` or ``"not run"``).

    Example:
        >>> r = RunRecord("csan1d", 2, "cmp/runs/csan1d-seed2", "failed", error="ValueError: x")
        >>> r.status, r.error, r.bleu, r.to_dict()["seed"]
        ('failed', 'ValueError: x', None, 2)
    """

    variant: str
    seed: int
    run_dir: str
    status: str
    error: str = ""
    params: int | None = None
    steps: int | None = None
    epochs: float | None = None
    steps_per_s: float | None = None  # over the whole run's training time
    steady_steps_per_s: float | None = None  # after the first epoch (see :func:`steady_speed`)
    tokens_per_s: float | None = None
    train_minutes: float | None = None
    wall_minutes: float | None = None
    stop_reason: str = ""
    bleu: float | None = None  # test BLEU (sacreBLEU), when the run scored the test split
    chrf: float | None = None
    valid_bleu: float | None = None  # BLEU of the last validation (greedy), when logged
    valid_accuracy: float | None = None
    signature: str = ""
    hyp_file: str = ""  # the test translations, for significance tests
    machine: str = ""  # where the run trained (:func:`csan.machine.machine_label`), when recorded
    precision: str = ""  # how it trained: results.json's ``mode``, e.g. "float32 eager"
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_folder(out_dir: Path, variant: str, seed: int) -> Path:
    """``out_dir/runs/<variant>-seed<seed>``; characters unsafe in file names become ``_``.

    Example:
        >>> run_folder(Path("cmp"), "csan2d@0-1", 3).as_posix()
        'cmp/runs/csan2d@0-1-seed3'
    """
    safe = re.sub(r"[^A-Za-z0-9_.@+,=-]", "_", variant)
    return Path(out_dir) / "runs" / f"{safe}-seed{seed}"


def _finished(run_dir: Path) -> dict[str, Any] | None:
    path = run_dir / "results.json"
    if not path.is_file():
        return None
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return None
    if str(results.get("stop_reason", "")).startswith("signal"):
        return None  # interrupted: resume it
    return results


# Keys that do not change what a run computes (or only add evaluation), or, like the device and
# compilation, change only how it computes it: a finished run is reused anyway. ``train.cpu_bf16``
# (float32 or bf16 autocast on a CPU) is one of these: with ``auto`` the same config already trains in
# bf16 on one CPU and in float32 on another, so the precision a run used is read from its results.json
# (``mode``), and a table whose runs differ in it says which ran how (``report.machine_note``).
IGNORED_KEYS = frozenset(
    {
        "data.data_dir",
        "train.threads",
        "train.device",
        "train.evaluate_test",
        "train.valid_bleu",
        "train.log_every",
        "train.checkpoint_minutes",
        "train.compile",
        "train.cpu_bf16",
    }
)


def config_difference(run_dir: Path, cfg: Config) -> str | None:
    """The first key where ``run_dir/config.yaml`` differs from ``cfg`` (as ``key: old != new``).

    Example (a run folder trained with another learning rate is not reused silently):
        >>> import tempfile
        >>> from csan.config import load_config
        >>> run = Path(tempfile.mkdtemp())
        >>> _ = (run / "config.yaml").write_text(dump_config(load_config("tiny", ["train.lr=0.001"])))
        >>> config_difference(run, load_config("tiny", ["train.lr=0.002"]))
        'train.lr: 0.001 != 0.002'
        >>> config_difference(run, load_config("tiny", ["train.lr=0.001"])) is None
        True
    """
    import yaml

    path = run_dir / "config.yaml"
    if not path.is_file():
        return None
    saved = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    # read as csan reads it now (an older csan wrote 0 where None is meant); a key this version
    # does not know stays as written, so that the difference shows
    with contextlib.suppress(CsanError):
        saved = yaml.safe_load(dump_config(config_from_dict(saved)))
    old = flat_keys(saved)
    # a run saves its float32 section settled: emptied, and applied where it computed in float32
    if cfg.float32:
        applied = _difference(old, apply_float32(cfg))
        return None if applied is None else _difference(old, replace(cfg, float32={}))
    return _difference(old, cfg)


def _difference(old: dict[str, Any], cfg: Config) -> str | None:
    """The first key where the flat saved config ``old`` differs from ``cfg``."""
    import yaml

    new = flat_keys(yaml.safe_load(dump_config(cfg)))
    for key in sorted(set(old) | set(new)):
        if key in IGNORED_KEYS or new.get(key) == "auto":  # a run saves what auto chose (or "auto")
            continue
        if old.get(key) != new.get(key):
            return f"{key}: {old.get(key)!r} != {new.get(key)!r}"
    return None


def _metrics(run_dir: Path) -> list[dict[str, Any]]:
    """The records of ``run_dir/metrics.jsonl`` (none if absent; a line cut by a crash is skipped)."""
    path = run_dir / "metrics.jsonl"
    records = []
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return records


def steady_speed(records: list[dict[str, Any]]) -> float | None:
    """Training steps per second after the first epoch, from ``metrics.jsonl`` records.

    The first epoch holds ``torch.compile``'s compilation (minutes on a CPU, and different for every
    architecture) and the allocator's warm-up; the steady rate is measured over the intervals between
    consecutive training log lines at or past epoch 1, over training time (validation excluded). An
    interval across a ``resume`` record is left out: it holds the restart and a new compilation. None
    when no interval remains.

    Example:
        >>> lines = [{"kind": "train", "step": s, "epoch": s / 100, "train_seconds": t}
        ...          for s, t in [(50, 90.0), (150, 140.0), (250, 190.0)]]
        >>> steady_speed(lines)
        2.0
        >>> resumed = {"kind": "resume", "step": 160, "epoch": 1.6, "train_seconds": 145.0}
        >>> later = [{"kind": "train", "step": s, "epoch": s / 100, "train_seconds": t}
        ...          for s, t in [(250, 400.0), (350, 450.0)]]
        >>> steady_speed([*lines[:2], resumed, *later])  # 150->250 (restart) is not counted
        2.0
    """
    steps = seconds = 0.0
    previous: dict[str, Any] | None = None
    for r in records:
        if r.get("kind") == "resume":
            previous = None
        elif r.get("kind") == "train" and "train_seconds" in r and r.get("epoch", 0) >= 1.0:
            if previous is not None:
                steps += r["step"] - previous["step"]
                seconds += r["train_seconds"] - previous["train_seconds"]
            previous = r
    return steps / seconds if seconds > 0 else None


def _count_params(run_dir: Path) -> int | None:
    """Parameters of the run's final model (tied weights once), from its config; None if absent."""
    folder = run_dir / "model"
    if not (folder / "config.json").is_file():
        return None
    meta = read_model_meta(folder)
    model = build_model(config_from_dict(meta["config"]).model, int(meta["vocab_size"]))
    return count_parameters(model)["total"]


def collect(variant: str, seed: int, run_dir: Path, results: dict[str, Any]) -> RunRecord:
    """A :class:`RunRecord` from a finished run folder and its ``results.json``.

    Example (a run folder with its metrics and test translations, but no kept model):
        >>> import tempfile
        >>> run = Path(tempfile.mkdtemp()) / "runs" / "vanilla-seed1"
        >>> run.mkdir(parents=True)
        >>> _ = (run / "test2016.hyp").write_text("a dog runs .\\n")
        >>> lines = [{"kind": "train", "step": s, "epoch": s / 100, "train_seconds": t}
        ...          for s, t in [(100, 60.0), (200, 110.0)]]
        >>> lines.append({"kind": "valid", "step": 200, "bleu": 21.5, "accuracy": 0.61})
        >>> _ = (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\\n" for r in lines))
        >>> results = {"steps": 200, "epochs": 2.0, "stop_reason": "max_steps",
        ...            "test": {"split": "test2016", "bleu": 24.6, "chrf": 51.2},
        ...            "machine": {"cpu": "AMD EPYC", "capability": "AVX2", "threads": 2}}
        >>> r = collect("vanilla", 1, run, results)
        >>> r.status, r.steps, r.steady_steps_per_s, r.bleu, r.valid_bleu, r.params
        ('ok', 200, 2.0, 24.6, 21.5, None)
        >>> Path(r.hyp_file).name, r.machine
        ('test2016.hyp', 'AMD EPYC (AVX2, bf16 emulated), 2 threads')
    """
    test = results.get("test") or {}
    records = _metrics(run_dir)
    valid = next((r for r in reversed(records) if r.get("kind") == "valid"), {})
    hyp = run_dir / f"{test.get('split', '')}.hyp" if test else None
    return RunRecord(
        variant=variant,
        seed=seed,
        run_dir=str(run_dir),
        status="ok",
        params=_count_params(run_dir),
        steps=results.get("steps"),
        epochs=results.get("epochs"),
        steps_per_s=results.get("steps_per_s"),
        steady_steps_per_s=steady_speed(records),
        tokens_per_s=results.get("tokens_per_s"),
        train_minutes=results.get("train_minutes"),
        wall_minutes=results.get("wall_minutes"),
        stop_reason=str(results.get("stop_reason", "")),
        bleu=test.get("bleu"),
        chrf=test.get("chrf"),
        valid_bleu=valid.get("bleu"),
        valid_accuracy=valid.get("accuracy"),
        signature=str(test.get("signature", "")),
        hyp_file=str(hyp) if hyp is not None and hyp.is_file() else "",
        machine=machine_label(results.get("machine") or {}),
        precision=str(results.get("mode") or ""),
    )


def run_config(
    source: str, variant: Variant, seed: int, *, overrides: Sequence[str], defaults: Sequence[str]
) -> Config:
    """The config of one run (see the module docstring for the order of the overrides).

    Example:
        >>> variant = Variant("csan1d", ("model.encoder_attention=csan1d",))
        >>> cfg = run_config("tiny", variant, 3, overrides=["train.lr=0.002"],
        ...                  defaults=["train.evaluate_test=true"])
        >>> cfg.model.encoder_attention, cfg.train.seed, cfg.train.lr, cfg.train.evaluate_test
        ('csan1d', 3, 0.002, True)
    """
    return load_config(source, [*defaults, *overrides, *variant.overrides, f"train.seed={seed}"])


def run_grid(
    source: str,
    variants: Sequence[Variant],
    seeds: Sequence[int],
    out_dir: str | os.PathLike[str],
    *,
    overrides: Sequence[str] = (),
    defaults: Sequence[str] = (),
    train_fn: TrainFn | None = None,
    progress: bool = False,
    say: Callable[[str], None] = print,
    train: bool = True,
    machine: str | None = None,
    command: str | None = None,
) -> list[RunRecord]:
    """Train (or skip, or resume) every variant x seed; one :class:`RunRecord` each, in grid order.

    ``train=False`` (report only): finished runs are collected, the others are recorded with status
    ``"not run"`` and left untouched.
    ``machine``: the machine record ``out_dir/<machine>`` with ``command``, the config and overrides
    (:func:`write_machine`), written before the first run this call trains; a call that trains nothing (a
    report, or all runs finished before) keeps the record that is there, the one of the machine that
    trained, and a folder without one gets this machine's first.

    Example (a stand-in trainer; a second call skips the finished runs, a bad variant fails alone):
        >>> import tempfile
        >>> from csan.toy import toy_train
        >>> out = Path(tempfile.mkdtemp())
        >>> grid = [Variant("vanilla", ()), Variant("csan1d", ("model.encoder_attention=csan1d",))]
        >>> records = run_grid("tiny", grid, [1, 2], out, train_fn=toy_train)  # doctest: +ELLIPSIS
        [1/4] vanilla seed 1: training in .../runs/vanilla-seed1
        [2/4] vanilla seed 2: training in .../runs/vanilla-seed2
        [3/4] csan1d seed 1: training in .../runs/csan1d-seed1
        [4/4] csan1d seed 2: training in .../runs/csan1d-seed2
        >>> [(r.variant, r.seed, r.bleu) for r in records if r.status == "ok"]
        [('vanilla', 1, 21.0), ('vanilla', 2, 22.0), ('csan1d', 1, 22.0), ('csan1d', 2, 23.0)]
        >>> grid.append(Variant("typo", ("train.lrr=0.1",)))
        >>> records = run_grid("tiny", grid, [1], out, train_fn=toy_train)  # doctest: +ELLIPSIS
        [1/3] vanilla seed 1: finished before, skipped (.../runs/vanilla-seed1)
        [2/3] csan1d seed 1: finished before, skipped (.../runs/csan1d-seed1)
        [3/3] typo seed 1: FAILED: CsanError: unknown config key 'train.lrr' (did you mean ...
        >>> [r.status for r in records], (out / "runs" / "typo-seed1" / "error.txt").is_file()
        (['ok', 'ok', 'failed'], True)
    """
    if not seeds:
        raise CsanError("no seeds given (e.g. --seeds 1,2,3)")
    train_fn = train_fn or _default_train()
    out = Path(out_dir)
    record_machine: Callable[..., Path] | None = None
    if machine is not None:
        # The record says which machine trained: written where a run trains, kept as it is by a call
        # that trains nothing (a report, or every run finished before), so rebuilding a kept table
        # elsewhere does not rewrite it. A folder without one gets this machine's now.
        record_machine = functools.partial(
            write_machine,
            out,
            load_config(source, [*defaults, *overrides]),
            name=machine,
            command=command,
            config=source,
            overrides=list(overrides),
        )
        record_machine(keep=True)
    records = []
    total = len(variants) * len(seeds)
    for n, (variant, seed) in enumerate(((v, s) for v in variants for s in seeds), start=1):
        run_dir = run_folder(out, variant.name, seed)
        tag = f"[{n}/{total}] {variant.name} seed {seed}"
        try:
            cfg = run_config(source, variant, seed, overrides=overrides, defaults=defaults)
            results = _finished(run_dir)
            if results is not None:
                diff = config_difference(run_dir, cfg)
                if diff is not None:
                    raise CsanError(
                        f"{run_dir} finished with another config ({diff}); "
                        "delete that folder or choose another --out"
                    )
                say(f"{tag}: finished before, skipped ({run_dir})")
            elif not train:
                say(f"{tag}: not finished, not run (report only)")
                records.append(RunRecord(variant.name, seed, str(run_dir), status="not run"))
                continue
            else:
                say(f"{tag}: training in {run_dir}")
                if record_machine is not None:  # once: this call's first run that trains
                    record_machine(keep=False)
                    record_machine = None
                if cfg.train.compile:
                    _reset_compiler()
                train_fn(cfg, run_dir, progress=progress)
                results = _finished(run_dir)
                if results is None:  # the trainer stopped on a signal: stop the grid too
                    raise KeyboardInterrupt
                (run_dir / "error.txt").unlink(missing_ok=True)  # left by an earlier attempt
            records.append(collect(variant.name, seed, run_dir, results))
        except KeyboardInterrupt:
            raise
        except Exception as e:  # one failing run must not stop the table
            records.append(_failed(variant.name, seed, run_dir, e))
            say(f"{tag}: FAILED: {records[-1].error}")
    return records


def _reset_compiler() -> None:
    """Forget earlier runs' ``torch.compile`` state so every run compiles afresh.

    One process trains the whole grid, and TorchDynamo caches compiled code per Python function: after
    ``recompile_limit`` (8) runs it would silently fall back to eager mode for the rest, and the speed
    column would compare compiled with eager runs.
    """
    import torch

    torch._dynamo.reset()


def _default_train() -> TrainFn:

    return train


def _failed(variant: str, seed: int, run_dir: Path, error: BaseException) -> RunRecord:
    message = f"{type(error).__name__}: {error}".splitlines()[0]
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "error.txt").write_text(
        "".join(traceback.format_exception(type(error), error, error.__traceback__)),
        encoding="utf-8",
    )
    return RunRecord(
        variant=variant, seed=seed, run_dir=str(run_dir), status="failed", error=message
    )


def machine_info(cfg: Config | None = None) -> dict[str, Any]:
    """The machine a table was measured on (:func:`csan.machine.machine_info`) and the run settings.

    Example:
        >>> info = machine_info(load_config("tiny"))
        >>> info["cpu"] != "", info["device"], info["cpu_bf16"], info["compile"], info["mode"]
        (True, 'cpu', False, False, 'float32 eager')
        >>> "mode" in machine_info()  # no config: the machine only
        False
    """
    if cfg is None:
        return record()
    tc = cfg.train
    device = "cpu" if tc.device == "auto" else tc.device
    return record(
        device,
        train_threads=tc.threads,
        cpu_bf16=tc.cpu_bf16,
        compile=tc.compile,
        mode=choose_runtime(tc.cpu_bf16, tc.compile, device=device, warn=False).mode,
    )


def write_machine(
    out_dir: Path,
    cfg: Config | None = None,
    *,
    name: str = "machine.json",
    keep: bool = False,
    **extra: Any,
) -> Path:
    """Write ``out_dir/<name>`` (:func:`machine_info` plus ``extra``, e.g. the command).

    ``keep``: leave a record that is there as it is (a report keeps the training machine's).

    Example:
        >>> import tempfile
        >>> out = Path(tempfile.mkdtemp())
        >>> path = write_machine(out, command="csan compare")
        >>> path.name, json.loads(path.read_text())["command"]
        ('machine.json', 'csan compare')
        >>> _ = write_machine(out, command="csan compare --report", keep=True)  # kept as it was
        >>> json.loads(path.read_text())["command"]
        'csan compare'
    """
    path = Path(out_dir) / name
    if keep and path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**machine_info(cfg), **extra}, indent=2) + "\n", encoding="utf-8")
    return path
