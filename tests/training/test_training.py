"""The training loop on real data with the ``tiny`` preset: it learns, resumes exactly, logs, checkpoints,
prunes, averages and writes a final model that loads."""

from __future__ import annotations

import itertools
import json
import math
import re
from pathlib import Path

import pytest
import sacrebleu
import torch
from checkpoint_states import assert_same_training_state
from safetensors.torch import load_file

from csan.config import load_config
from csan.data import SubwordModel, read_lines
from csan.decoding import load_model, translate_lines
from csan.errors import CsanError
from csan.host import CpuTimes
from csan.training.schedule import make_schedule
from csan.training.trainer import train

TRAIN_KEYS = {"time", "kind", "step", "epoch", "loss", "nll", "lr", "tokens_per_s", "train_seconds"}
VALID_KEYS = {"time", "kind", "step", "epoch", "wall_seconds", "loss", "accuracy"}


def metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def step_dirs(run: Path) -> list[str]:
    return sorted(p.name for p in (run / "checkpoints").iterdir() if p.name.startswith("step_"))


def pointer(run: Path, name: str) -> str:
    return (run / "checkpoints" / name).read_text().strip()


def test_tiny_overfits_100_pairs(
    tmp_path: Path, tiny_overrides: list[str], multi30k_dir: Path
) -> None:
    n, steps = 100, 160
    cfg = load_config(
        "tiny",
        [
            *tiny_overrides,
            f"data.train_subset={n}",
            "data.valid_split=train",
            f"data.valid_subset={n}",
            "train.max_tokens=2048",
            "train.lr=0.005",
            "train.warmup=50",
            f"train.max_steps={steps}",
            f"train.validate_every={steps}",
            "train.log_every=20",
        ],
    )
    result = train(cfg, tmp_path / "run", progress=False)
    assert result.steps == steps
    assert result.best_valid is not None and result.best_valid["accuracy"] > 0.95
    src = read_lines(multi30k_dir / "train.en")[:n]
    ref = read_lines(multi30k_dir / "train.de")[:n]
    loaded = load_model(tmp_path / "run")
    hyps = translate_lines(
        loaded.model, SubwordModel.from_bytes(loaded.spm_bytes), src, beam=1, lenpen=0.0
    )
    bleu = sacrebleu.corpus_bleu(hyps, [ref]).score
    assert bleu > 90, f"BLEU {bleu:.1f} on the training pairs; first: {hyps[0]!r} vs {ref[0]!r}"


RESUME_N = (
    12  # 300 pairs at 512 tokens make ~20 batches: the resume falls mid-epoch 1, the run ends in 2
)


def resume_overrides(tiny_overrides: list[str], steps: int, bpe_dropout: float = 0.0) -> list[str]:
    return [
        *tiny_overrides,
        f"data.bpe_dropout={bpe_dropout}",
        "model.dropout=0.1",  # dropout on: the restored RNG state matters too
        "data.train_subset=300",
        "train.max_tokens=512",
        "train.log_every=1",
        "train.validate_every=null",  # validate at each epoch end
        f"train.checkpoint_every={RESUME_N}",
        "train.keep_last=10",
        f"train.max_steps={steps}",
    ]


def comparable(records: list[dict], after: int) -> list[dict]:
    timing = {"time", "tokens_per_s", "train_seconds", "wall_seconds", "host_steal"}
    return [{k: v for k, v in r.items() if k not in timing} for r in records if r["step"] > after]


@pytest.mark.parametrize("bpe_dropout", [0.0, 0.1], ids=["usual-subwords", "bpe-dropout"])
def test_resumed_run_continues_exactly_like_an_uninterrupted_one(
    tmp_path: Path,
    tiny_overrides: list[str],
    capsys: pytest.CaptureFixture[str],
    bpe_dropout: float,
) -> None:
    n = RESUME_N
    resumed, straight = tmp_path / "resumed", tmp_path / "straight"

    def cfg(steps: int):
        return load_config("tiny", resume_overrides(tiny_overrides, steps, bpe_dropout))

    first = train(cfg(n), resumed, progress=False)
    assert first.steps == n
    assert "resuming" not in capsys.readouterr().out
    second = train(cfg(2 * n), resumed, progress=False)
    assert f"resuming from step {n} " in capsys.readouterr().out
    assert second.steps == 2 * n
    whole = train(cfg(2 * n), straight, progress=False)
    assert whole.steps == 2 * n

    a, b = metrics(resumed), metrics(straight)
    (marker,) = [r for r in a if r["kind"] == "resume"]  # where the second process started
    assert marker["step"] == n and marker["train_seconds"] > 0
    assert not [r for r in b if r["kind"] == "resume"]
    assert [r["step"] for r in a if r["kind"] == "train"] == list(range(1, 2 * n + 1))
    epochs = [r["epoch"] for r in b if r["kind"] == "train"]  # completed epochs, fractional
    assert min(epochs) < 1 < max(epochs)  # an epoch boundary is crossed
    assert comparable(a, n) == comparable(b, n)  # train and valid lines after the resume point
    # bit for bit: weights, Adam's moments, the RNG states (dropout is on), counters; and the
    # final model too (not the first run's model/)
    last = f"checkpoints/step_{2 * n:08d}"
    assert_same_training_state(resumed / last, straight / last)
    wa = load_file(str(resumed / "model" / "model.safetensors"))
    wb = load_file(str(straight / "model" / "model.safetensors"))
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wb)
    assert second.best_valid == whole.best_valid


def test_resuming_a_finished_run_trains_no_further(
    tmp_path: Path, tiny_overrides: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = load_config("tiny", [*tiny_overrides, "train.max_steps=4", "train.validate_every=4"])
    train(cfg, tmp_path, progress=False)
    before = (tmp_path / "metrics.jsonl").read_text()
    capsys.readouterr()
    again = train(cfg, tmp_path, progress=False)
    assert again.steps == 4
    assert "resuming from step 4 " in capsys.readouterr().out
    assert (tmp_path / "metrics.jsonl").read_text() == before


def test_metrics_checkpoints_pruning_and_final_model(
    tmp_path: Path, tiny_overrides: list[str]
) -> None:
    steps, keep_last = 30, 2
    cfg = load_config(
        "tiny",
        [
            *tiny_overrides,
            "data.valid_subset=20",
            "train.valid_bleu=true",
            f"train.max_steps={steps}",
            "train.log_every=4",
            "train.validate_every=10",
            "train.checkpoint_every=5",
            f"train.keep_last={keep_last}",
        ],
    )
    result = train(cfg, tmp_path, progress=False)

    records = metrics(tmp_path)
    train_lines = [r for r in records if r["kind"] == "train"]
    valid_lines = [r for r in records if r["kind"] == "valid"]
    assert {r["kind"] for r in records} == {"train", "valid"}
    assert [r["step"] for r in train_lines] == list(range(4, steps + 1, 4))
    assert [r["step"] for r in valid_lines] == [10, 20, 30]
    schedule = make_schedule("inverse_sqrt", lr=cfg.train.lr, warmup=cfg.train.warmup, d_model=64)
    # where /proc/stat tells (Linux) and a clock tick passed, a train line has the host's steal
    linux = CpuTimes.read() is not None
    for r in train_lines:
        assert set(r) - {"host_steal"} == TRAIN_KEYS, r
        assert 0 <= r.get("host_steal", 0) <= 1, r
        assert r["lr"] == pytest.approx(schedule(r["step"]))
        assert r["loss"] > 0 and r["nll"] > 0 and r["tokens_per_s"] > 0
    for r in valid_lines:
        assert set(r) == VALID_KEYS | {"bleu"}, r
        assert 0 <= r["accuracy"] <= 1 and 0 <= r["bleu"] <= 100
    assert train_lines[-1]["loss"] < train_lines[0]["loss"]

    kept = step_dirs(tmp_path)
    best, last = pointer(tmp_path, "BEST"), pointer(tmp_path, "LAST")
    assert last == f"step_{steps:08d}"
    assert len(kept) <= keep_last + 1
    assert kept[-keep_last:] == [f"step_{s:08d}" for s in (25, 30)]
    best_line = max(valid_lines, key=lambda r: r["bleu"])  # the first of equal bests
    assert best == f"step_{best_line['step']:08d}" and best in kept
    assert result.best_valid == {k: best_line[k] for k in result.best_valid}
    assert not [p for p in (tmp_path / "checkpoints").iterdir() if ".tmp" in p.name]
    for name in kept:
        assert {p.name for p in (tmp_path / "checkpoints" / name).iterdir()} == {
            "model.safetensors",
            "config.json",
            "spm.model",
            "trainer.safetensors",
            "trainer.json",
        }

    loaded = load_model(tmp_path / "model")
    assert loaded.config == cfg
    assert result.model_dir == tmp_path / "model"
    best_weights = load_file(str(tmp_path / "checkpoints" / best / "model.safetensors"))
    final_weights = load_file(str(tmp_path / "model" / "model.safetensors"))
    assert best_weights.keys() == final_weights.keys()
    assert all(torch.equal(best_weights[k], final_weights[k]) for k in best_weights)

    summary = json.loads((tmp_path / "results.json").read_text())
    assert summary["steps"] == steps and summary["stop_reason"] == f"max_steps={steps}"
    steal = summary["machine"]["host_steal"]  # the whole run's, with the machine
    assert (steal is not None) == linux and (steal is None or 0 <= steal <= 1)
    # and the host's product rate at the run's start and end (float32; bf16 where native)
    products = summary["machine"]["host_products"]
    assert set(products) == {"start", "end"}
    for rates in products.values():
        assert set(rates) == {"float32_gflops"} | (
            {"bf16_gflops"} if summary["machine"]["native_bf16"] else set()
        )
        assert all(rate > 0 for rate in rates.values()), products
    assert summary["best_valid"] == result.best_valid
    assert (tmp_path / "config.yaml").is_file()
    assert load_config(str(tmp_path / "config.yaml")) == cfg


class _StolenHost:
    """A stand-in for csan.host.StealMeter on a host that takes 45% of the CPU time."""

    def __init__(self, **_: object) -> None:
        pass

    def lap(self) -> float:
        return 0.45

    def total(self) -> float:
        return 0.452


def test_a_run_on_a_host_that_steals_says_so_and_records_it(
    tmp_path: Path,
    tiny_overrides: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("csan.host.StealMeter", _StolenHost)
    cfg = load_config(
        "tiny",
        [*tiny_overrides, "train.max_steps=4", "train.log_every=2", "train.evaluate_test=false"],
    )
    train(cfg, tmp_path, progress=False)
    out = capsys.readouterr().out.splitlines()
    (note,) = [line for line in out if "steal" in line]
    assert note.startswith("host steal 45%: ") and "machine.host_steal" in note
    assert out.index(note) == len(out) - 1  # after the summary line
    assert json.loads((tmp_path / "results.json").read_text())["machine"]["host_steal"] == 0.452
    assert [r["host_steal"] for r in metrics(tmp_path) if r["kind"] == "train"] == [0.45, 0.45]


def test_average_last_makes_the_final_model_the_mean(
    tmp_path: Path, tiny_overrides: list[str]
) -> None:
    cfg = load_config(
        "tiny",
        [
            *tiny_overrides,
            "train.max_steps=12",
            "train.validate_every=12",
            "train.checkpoint_every=3",
            "train.keep_last=1",
            "train.average_last=3",
        ],
    )
    train(cfg, tmp_path, progress=False)
    kept = step_dirs(tmp_path)
    assert kept[-3:] == [f"step_{s:08d}" for s in (6, 9, 12)]  # average_last outranks keep_last
    parts = [load_file(str(tmp_path / "checkpoints" / k / "model.safetensors")) for k in kept[-3:]]
    final = load_file(str(tmp_path / "model" / "model.safetensors"))
    assert not torch.equal(parts[0]["src_embed.weight"], parts[2]["src_embed.weight"])
    for name, value in final.items():
        mean = sum(p[name].double() for p in parts) / 3
        torch.testing.assert_close(value, mean.float(), rtol=0, atol=1e-6, msg=name)
    meta = json.loads((tmp_path / "model" / "config.json").read_text())
    assert meta["made_from"].startswith("average of 3 checkpoints")
    load_model(tmp_path / "model")


def test_test_split_is_scored_at_the_end(tiny_run: Path, multi30k_dir: Path) -> None:
    summary = json.loads((tiny_run / "results.json").read_text())
    test = summary["test"]
    assert test["split"] == "test2016"
    assert 0 <= test["bleu"] <= 100 and 0 <= test["chrf"] <= 100
    assert test["signature"].startswith("nrefs:1|")
    assert json.loads((tiny_run / "test2016.json").read_text()) == test
    n_lines = len(read_lines(multi30k_dir / "test2016.en"))
    hyp = (tiny_run / "test2016.hyp").read_text(encoding="utf-8")
    assert hyp.count("\n") == n_lines


def test_bad_schedule_fails_before_reading_data(tmp_path: Path) -> None:
    cfg = load_config("tiny", [f"data.data_dir={tmp_path / 'absent'}", "train.schedule=cosine"])
    with pytest.raises(CsanError, match=r"train\.schedule: unknown schedule 'cosine'"):
        train(cfg, tmp_path / "run", progress=False)


def test_missing_data_dir_is_named(tmp_path: Path) -> None:
    cfg = load_config("tiny", [f"data.data_dir={tmp_path / 'absent'}"])
    with pytest.raises(CsanError, match="absent"):
        train(cfg, tmp_path / "run", progress=False)
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_validation_skips_only_the_pairs_longer_than_the_model() -> None:
    from csan.config import ModelConfig
    from csan.data import EncodedSplit
    from csan.models import build_model
    from csan.training.validation import teacher_forced_metrics

    model = build_model(
        ModelConfig(
            d_model=16, heads=2, ffn_dim=32, encoder_layers=1, decoder_layers=1, max_positions=8
        ),
        vocab_size=30,
    ).eval()
    short = EncodedSplit([[5, 6]], [[7, 8]], ["a"], ["b"])
    mixed = EncodedSplit([[5, 6], [5] * 20], [[7, 8], [7] * 20], ["a", "long"], ["b", "long"])
    # the long pair sits in the same batch; it is left out alone, the short one still counts
    assert teacher_forced_metrics(model, mixed, device="cpu") == teacher_forced_metrics(
        model, short, device="cpu"
    )


def _train_lrs(run: Path) -> list[float]:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [r["lr"] for r in map(json.loads, lines) if r["kind"] == "train"]


def test_budget_schedule_over_steps_averages_the_cooldown(
    tmp_path: Path, tiny_overrides: list[str]
) -> None:
    """max_steps=40, cooldown 0.2, average_last 3: checkpoints at steps 32, 35, 38 and 40."""
    cfg = load_config(
        "tiny",
        [
            *tiny_overrides,
            "train.schedule=budget",
            "train.max_steps=40",
            "train.warmup_fraction=0.25",
            "train.cooldown_fraction=0.2",
            "train.average_last=3",
            "train.keep_last=1",
            "train.log_every=1",
        ],
    )
    train(cfg, tmp_path, progress=False)
    lrs = _train_lrs(tmp_path)
    assert len(lrs) == 40
    assert max(lrs) == pytest.approx(cfg.train.lr) and lrs.index(max(lrs)) == 9  # step 10 = 25%
    assert lrs[-1] == 0.0 and lrs[30] > lrs[35] > lrs[39]
    assert step_dirs(tmp_path) == [f"step_{s:08d}" for s in (32, 35, 38, 40)]
    meta = json.loads((tmp_path / "model" / "config.json").read_text())
    assert meta["made_from"].startswith("average of 4 checkpoints (step_00000032")


def _made_from(run: Path) -> str:
    return json.loads((run / "model" / "config.json").read_text())["made_from"]


def test_a_validation_past_a_cooldown_point_is_averaged_once(
    tmp_path: Path, tiny_overrides: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a minutes budget, a validation longer than a cooldown slot passes a cooldown point:
    the epoch's checkpoint stands for it, and the next step writes none (on an H100 the final
    model averaged steps 1064 and 1065). A fake clock: 1 s a step, 6 s a validation, 5 s slots."""
    from csan.training.progress import Progress
    from csan.training.trainer import Trainer

    clock = [0.0]
    real_step, real_validate = Trainer.train_step, Trainer.validate

    def step(self, *args, **kwargs):
        clock[0] += 1.0
        return real_step(self, *args, **kwargs)

    def validate(self, *args, **kwargs):
        clock[0] += 6.0
        return real_validate(self, *args, **kwargs)

    monkeypatch.setattr(Progress, "wall_seconds", property(lambda self: clock[0]))
    monkeypatch.setattr(Trainer, "train_step", step)
    monkeypatch.setattr(Trainer, "validate", validate)
    overrides = [
        *tiny_overrides, "train.schedule=budget", "train.max_steps=null", "train.max_minutes=2.5",
        "train.warmup_fraction=0.25", "train.cooldown_fraction=0.2", "train.average_last=6",
        "train.validate_every=null", "train.checkpoint_minutes=null", "data.train_subset=120",
    ]  # fmt: skip
    run = tmp_path / "run"
    train(load_config("tiny", overrides), run, progress=False)
    made_from = _made_from(run)
    steps = [int(name[len("step_") :]) for name in re.findall(r"step_\d+", made_from)]
    assert len(steps) >= 4, made_from
    assert all(b - a > 1 for a, b in itertools.pairwise(steps)), made_from


def test_a_stop_in_the_cooldown_does_not_change_what_is_averaged(
    tmp_path: Path, tiny_overrides: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A signal in the cooldown (at step 33 of 40, and at step 36, after its second point)
    checkpoints there to resume from; the resumed run averages what an uninterrupted run averages
    (steps 32, 35, 38, 40), writes no other checkpoint, and ends with the same weights. A
    checkpoint timer that fires at every step adds none to the average either."""
    import csan.training.trainer as trainer_module

    overrides = [
        *tiny_overrides, "train.schedule=budget", "train.max_steps=40", "train.warmup_fraction=0.25",
        "train.cooldown_fraction=0.2", "train.average_last=3", "train.keep_last=1",
        "train.log_every=1", "train.validate_every=null",
    ]  # fmt: skip
    cfg = load_config("tiny", overrides)
    reference = tmp_path / "reference"
    train(cfg, reference, progress=False)
    expected = _made_from(reference)
    assert expected == (
        "average of 4 checkpoints (step_00000032, step_00000035, step_00000038, step_00000040)"
    )

    real = trainer_module.agree_to_stop
    for stop_at in (33, 36):  # 36: the first step after the resume is past the point at 35
        run, fired = tmp_path / f"stopped-{stop_at}", []

        def signal_at(reason, stop, dist, *, max_minutes, run=run, fired=fired, stop_at=stop_at):
            metrics = run / "metrics.jsonl"
            lines = metrics.read_text().splitlines() if metrics.is_file() else []
            steps = [r["step"] for r in map(json.loads, lines) if r["kind"] == "train"]
            if not fired and steps and steps[-1] == stop_at:
                fired.append(stop_at)
                return "signal SIGTERM", "SIGTERM"
            return real(reason, stop, dist, max_minutes=max_minutes)

        monkeypatch.setattr(trainer_module, "agree_to_stop", signal_at)
        stopped = train(cfg, run, progress=False)
        assert stopped.interrupted_by == "SIGTERM" and stopped.steps == stop_at
        assert f"step_{stop_at:08d}" in step_dirs(run)
        resumed = train(cfg, run, progress=False)
        assert resumed.steps == 40 and _made_from(run) == expected
        assert step_dirs(run) == sorted({*step_dirs(reference), f"step_{stop_at:08d}"})
        ours, theirs = (load_file(r / "model" / "model.safetensors") for r in (run, reference))
        assert all(torch.equal(ours[name], theirs[name]) for name in theirs)
    monkeypatch.setattr(trainer_module, "agree_to_stop", real)

    timer = tmp_path / "timer"
    train(load_config("tiny", [*overrides, "train.checkpoint_minutes=1e-9"]), timer, progress=False)
    assert "step_00000033" in step_dirs(timer)  # written by the timer, kept (cooldown) ...
    assert _made_from(timer) == expected  # ... and not averaged


def test_budget_schedule_over_minutes_is_complete(
    tmp_path: Path, tiny_overrides: list[str]
) -> None:
    """A 15-second budget: whatever this machine's speed, the run warms up, peaks and cools down."""
    cfg = load_config(
        "tiny",
        [
            *tiny_overrides,
            "train.schedule=budget",
            "train.max_steps=null",
            "train.max_minutes=0.25",
            "train.validate_every=null",
            "train.average_last=3",
            "train.log_every=1",
        ],
    )
    result = train(cfg, tmp_path, progress=False)
    assert result.stop_reason == "max_minutes=0.25"
    assert 0.25 <= result.wall_minutes < 0.35  # stopped at the first step boundary past 15 s
    lrs = _train_lrs(tmp_path)
    assert len(lrs) >= 12, "too few steps in 15 s to see the schedule"
    assert max(lrs) > 0.85 * cfg.train.lr
    assert lrs[-1] < 0.15 * cfg.train.lr
    meta = json.loads((tmp_path / "model" / "config.json").read_text())
    assert meta["made_from"].startswith("average of")


@pytest.mark.parametrize("terminal", [False, True])
def test_progress_is_a_bar_on_a_terminal_and_plain_lines_in_a_log(
    tmp_path: Path,
    tiny_overrides: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    terminal: bool,
) -> None:
    monkeypatch.setattr("csan.training.trainer.on_terminal", lambda stream: terminal)
    items = [*tiny_overrides, "data.valid_subset=20", "train.max_steps=8", "train.log_every=4"]
    train(load_config("tiny", items), tmp_path, progress=True)
    out, err = capsys.readouterr()
    shown = [line for line in out.splitlines() if " train: " in line]
    if terminal:  # the bar (on stderr) carries the loss; stdout keeps the run's messages only
        assert shown == [] and "epoch 1" in err
    else:  # redirected: one plain line per metrics line, no bar redraws
        records = [r for r in metrics(tmp_path) if r["kind"] == "train"]
        assert (
            [line.split()[1] for line in shown] == [str(r["step"]) for r in records] == ["4", "8"]
        )
        assert all(f"loss {r['loss']:.4g}," in line for line, r in zip(shown, records, strict=True))
        assert "\r" not in err and "epoch 1:" not in err


def test_max_epochs_stops_at_the_end_of_that_epoch(
    tmp_path: Path, tiny_overrides: list[str]
) -> None:
    cfg = load_config(
        "tiny",
        [
            *tiny_overrides,
            "data.train_subset=300",
            "data.valid_subset=20",
            "train.max_tokens=512",
            "train.max_steps=null",
            "train.max_epochs=2",
            "train.validate_every=null",
            "train.log_every=1",
        ],
    )
    result = train(cfg, tmp_path, progress=False)
    records = metrics(tmp_path)
    per_epoch = sum(1 for r in records if r["kind"] == "train" and r["epoch"] <= 1)
    assert result.stop_reason == "max_epochs=2" and result.epochs == 2.0
    assert per_epoch > 1 and result.steps == 2 * per_epoch
    assert [r["epoch"] for r in records if r["kind"] == "valid"] == [1.0, 2.0]


def test_budget_schedule_needs_a_budget(tmp_path: Path) -> None:
    cfg = load_config(
        "tiny",
        [f"data.data_dir={tmp_path / 'absent'}", "train.schedule=budget", "train.max_steps=null"],
    )
    with pytest.raises(CsanError, match="schedule=budget: needs a budget"):
        train(cfg, tmp_path / "run", progress=False)


def test_main_preset_trains_in_the_mode_auto_picks(tmp_path: Path, multi30k_dir: Path) -> None:
    """The main job's own settings (cpu_bf16/compile auto, budget schedule) train a few steps here.

    On a CPU with native bf16 this compiles and runs bf16 autocast; elsewhere float32 eager: the path
    users take on this machine, whichever kind it is. Less data and fewer layers keep it short
    (two encoder layers: the preset's convolutions are in layers 0-1).
    """
    from csan.machine import choose_runtime

    cfg = load_config(
        "multi30k-small",
        [
            f"data.data_dir={multi30k_dir}",
            "data.train_subset=2000",
            "data.valid_subset=50",
            "data.vocab_size=1000",
            "model.encoder_layers=2",
            "model.decoder_layers=1",
            "train.max_minutes=null",
            "train.max_steps=3",
            "train.valid_bleu=false",
            "train.evaluate_test=false",
            "train.checkpoint_minutes=null",
            "train.log_every=1",
        ],
    )
    result = train(cfg, tmp_path, progress=False)
    want = choose_runtime("auto", "auto", device="cpu", warn=False)
    assert result.mode == want.mode
    assert result.steps == 3 and all(math.isfinite(lr) for lr in _train_lrs(tmp_path))
    summary = json.loads((tmp_path / "results.json").read_text())
    assert summary["mode"] == want.mode and "capability" in summary["machine"]
    # the preset's softmax (model.output_vocab=auto): the German side's pieces only in float32,
    # the whole vocabulary under bf16 autocast; the run saves which
    model = load_model(tmp_path).model
    if want.bf16:
        assert model.cfg.output_vocab == "full" and model.output_mask is None
    else:
        assert model.cfg.output_vocab == "target" and len(model.output_ids) < model.vocab_size
    # its encoder: the convolutions under bf16, the plain Transformer in float32 (the float32 section)
    saved = load_model(tmp_path).config
    assert saved.model.encoder_attention == ("cnn@0-1" if want.bf16 else "vanilla")
    assert saved.float32 == {}


@pytest.mark.parametrize(("src", "tgt"), [("en", "fr"), ("de", "en")])
def test_another_pair_of_the_corpus_trains_and_scores_its_own_side(
    tmp_path: Path, tiny_overrides: list[str], src: str, tgt: str
) -> None:
    overrides = [*tiny_overrides, f"data.src_lang={src}", f"data.tgt_lang={tgt}",
                 "train.max_steps=3", "data.valid_subset=10", "train.evaluate_test=true"]  # fmt: skip
    result = train(load_config("tiny", overrides), tmp_path / "run", progress=False)
    assert result.test is not None and result.test["split"] == "test2016"
    meta = load_model(tmp_path / "run" / "model").config.data
    assert (meta.src_lang, meta.tgt_lang) == (src, tgt)
    hyp = (tmp_path / "run" / "test2016.hyp").read_text(encoding="utf-8").splitlines()
    assert len(hyp) == 1000


def test_files_by_prefix_and_several_test_sets(
    tmp_path: Path, tiny_overrides: list[str], multi30k_dir: Path
) -> None:
    """fairseq-style prefixes (<prefix>.<lang>) anywhere, and every test set scored at the end."""
    shared = multi30k_dir
    own = tmp_path / "own"
    own.mkdir()
    for name, split in (("corpus-train", "train"), ("dev", "valid"), ("flickr16", "test2016"),
                        ("flickr16-again", "test2016")):  # fmt: skip
        for lang in ("en", "fr"):
            (own / f"{name}.{lang}").symlink_to(shared / f"{split}.{lang}")
    overrides = [
        *[o for o in tiny_overrides if not o.startswith("data.data_dir=")],
        "data.dataset=multi30k", "data.data_dir=/nonexistent", "data.tgt_lang=fr",
        f"data.train_prefix={own}/corpus-train", f"data.valid_prefix={own}/dev",
        f"data.test_prefix={own}/flickr16,{own}/flickr16-again",
        "train.max_steps=3", "data.valid_subset=10", "train.evaluate_test=true",
    ]  # fmt: skip
    result = train(load_config("tiny", overrides), tmp_path / "run", progress=False)
    assert list(result.tests) == ["flickr16", "flickr16-again"]
    assert result.tests["flickr16"]["bleu"] == result.tests["flickr16-again"]["bleu"]
    for name in result.tests:
        assert len((tmp_path / "run" / f"{name}.hyp").read_text().splitlines()) == 1000
    with pytest.raises(CsanError, match=r"nope\.en: no such file \(from the prefix"):
        train(load_config("tiny", [*overrides, f"data.valid_prefix={own}/nope"]),
              tmp_path / "run2", progress=False)  # fmt: skip
