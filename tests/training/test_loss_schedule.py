"""Label-smoothed cross-entropy against a hand computation; the learning-rate schedules."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from csan.config import ModelConfig
from csan.models import build_model
from csan.training.loss import TranslationLoss, label_smoothed_nll
from csan.training.schedule import Budget, budget_progress, budget_schedule, make_schedule

PAD = 0


def hand_smoothed_loss(
    logits: torch.Tensor, target: torch.Tensor, epsilon: float, ignore_index: int
) -> tuple[float, float]:
    """Sum over kept tokens of -sum_v q_v log p_v with q = (1 - eps) one-hot + eps / V, and plain NLL."""
    vocab = logits.size(-1)
    loss = nll = 0.0
    for row, tgt in zip(logits.double().tolist(), target.tolist()):
        if tgt == ignore_index:
            continue
        log_z = math.log(sum(math.exp(x) for x in row))
        log_p = [x - log_z for x in row]
        q = [epsilon / vocab + (1.0 - epsilon if v == tgt else 0.0) for v in range(vocab)]
        assert math.isclose(sum(q), 1.0)
        loss -= sum(qv * lp for qv, lp in zip(q, log_p))
        nll -= log_p[tgt]
    return loss, nll


@pytest.mark.parametrize("epsilon", [0.0, 0.1, 0.3])
@pytest.mark.parametrize("ignore_index", [PAD, -100])
def test_label_smoothed_nll_matches_hand_computation(epsilon: float, ignore_index: int) -> None:
    gen = torch.Generator().manual_seed(3)
    logits = torch.randn(9, 7, generator=gen) * 3
    target = torch.tensor([1, 2, 0, 6, 0, 3, 5, 0, 4])  # zeros are padding when ignore_index=0
    loss, nll = label_smoothed_nll(logits, target, epsilon=epsilon, ignore_index=ignore_index)
    want_loss, want_nll = hand_smoothed_loss(logits, target, epsilon, ignore_index)
    assert loss.item() == pytest.approx(want_loss, rel=1e-5)
    assert nll.item() == pytest.approx(want_nll, rel=1e-5)
    if epsilon == 0.0:
        assert loss.item() == pytest.approx(nll.item(), rel=1e-6)


def test_padding_rows_contribute_nothing() -> None:
    gen = torch.Generator().manual_seed(4)
    logits = torch.randn(4, 5, generator=gen)
    target = torch.tensor([1, 2, PAD, PAD])
    loss, nll = label_smoothed_nll(logits, target, epsilon=0.1, ignore_index=PAD)
    garbage = logits.clone()
    garbage[2:] = torch.randn(2, 5, generator=gen) * 100
    loss2, nll2 = label_smoothed_nll(garbage, target, epsilon=0.1, ignore_index=PAD)
    assert torch.equal(loss, loss2) and torch.equal(nll, nll2)
    only_real, _ = label_smoothed_nll(logits[:2], target[:2], epsilon=0.1, ignore_index=PAD)
    assert loss.item() == pytest.approx(only_real.item(), rel=1e-6)


def test_nll_carries_no_gradient_and_loss_does() -> None:
    logits = torch.randn(3, 4, requires_grad=True)
    loss, nll = label_smoothed_nll(logits, torch.tensor([0, 1, 2]), epsilon=0.1)
    assert loss.requires_grad and not nll.requires_grad


def test_translation_loss_equals_loss_on_full_logits_without_padding() -> None:
    torch.manual_seed(0)
    cfg = ModelConfig(
        d_model=16, heads=2, ffn_dim=32, encoder_layers=1, decoder_layers=1, dropout=0
    )
    model = build_model(cfg, vocab_size=23).eval()
    src = torch.tensor([[5, 6, 7, 3], [8, 9, 3, PAD]])
    tgt_in = torch.tensor([[2, 10, 11, 12], [2, 13, PAD, PAD]])
    tgt_out = torch.tensor([[10, 11, 12, 3], [13, 3, PAD, PAD]])
    loss, nll, correct = TranslationLoss(model, epsilon=0.1)(src, tgt_in, tgt_out)
    logits = model(src, tgt_in)  # (batch, tgt, vocab), padding included
    flat_logits, flat_target = logits.reshape(-1, 23), tgt_out.reshape(-1)
    want_loss, want_nll = hand_smoothed_loss(flat_logits.detach(), flat_target, 0.1, PAD)
    assert loss.item() == pytest.approx(want_loss, rel=1e-5)
    assert nll.item() == pytest.approx(want_nll, rel=1e-5)
    keep = flat_target.ne(PAD)
    assert correct.item() == int(flat_logits[keep].argmax(-1).eq(flat_target[keep]).sum())


# -- schedules ----------------------------------------------------------------------------------------
def test_inverse_sqrt_warms_up_linearly_peaks_then_decays() -> None:
    lr, warmup = 2e-3, 100
    f = make_schedule("inverse_sqrt", lr=lr, warmup=warmup, d_model=256)
    assert f(1) == pytest.approx(lr / warmup)
    assert f(50) == pytest.approx(lr / 2)
    assert f(warmup) == pytest.approx(lr)
    assert f(4 * warmup) == pytest.approx(lr / 2)
    assert f(100 * warmup) == pytest.approx(lr / 10)
    values = [f(s) for s in range(1, 1001)]
    assert max(values) == pytest.approx(lr)
    assert values.index(max(values)) + 1 == warmup
    assert all(a < b for a, b in itertools.pairwise(values[:warmup]))  # rising
    assert all(a > b for a, b in itertools.pairwise(values[warmup - 1 :]))  # falling


@pytest.mark.parametrize(("d_model", "warmup"), [(512, 4000), (64, 10)])
def test_noam_formula(d_model: int, warmup: int) -> None:
    lr = 2.0
    f = make_schedule("noam", lr=lr, warmup=warmup, d_model=d_model)
    for step in (1, warmup // 2, warmup, 2 * warmup, 10 * warmup):
        want = lr * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
        assert f(step) == pytest.approx(want, rel=1e-12)
    peak = lr * (d_model * warmup) ** -0.5
    assert max(f(s) for s in range(1, 3 * warmup)) == pytest.approx(peak)


@pytest.mark.parametrize("name", ["inverse_sqrt", "noam"])
def test_step_zero_is_treated_as_step_one(name: str) -> None:
    f = make_schedule(name, lr=1e-3, warmup=10, d_model=64)
    assert f(0) == f(1) > 0


def test_schedule_errors_name_the_field() -> None:
    with pytest.raises(ValueError, match=r"train\.schedule: unknown schedule 'cosine'"):
        make_schedule("cosine", lr=1e-3, warmup=10, d_model=64)
    with pytest.raises(ValueError, match=r"train\.warmup must be >= 1, got 0"):
        make_schedule("inverse_sqrt", lr=1e-3, warmup=0, d_model=64)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_loss_gradient_equals_pytorch_cross_entropy(dtype: torch.dtype) -> None:
    """The hand-written backward against autograd through F.cross_entropy(label_smoothing=...)."""
    gen = torch.Generator().manual_seed(5)
    base = (torch.randn(40, 300, generator=gen) * 2).to(dtype)
    target = torch.randint(0, 300, (40,), generator=gen)
    target[[3, 17]] = -100
    ours = base.clone().requires_grad_()
    loss, _ = label_smoothed_nll(ours, target, epsilon=0.1)
    (loss * 0.37).backward()
    ref = base.clone().requires_grad_()
    want = torch.nn.functional.cross_entropy(
        ref.float(), target, label_smoothing=0.1, reduction="sum"
    )
    (want * 0.37).backward()
    assert ours.grad.dtype == dtype
    tol = 1e-6 if dtype == torch.float32 else 1e-2
    assert loss.item() == pytest.approx(want.item(), rel=1e-5)
    assert torch.allclose(ours.grad.float(), ref.grad.float(), atol=tol, rtol=tol)
    assert not ours.grad[[3, 17]].any()  # ignored rows get no gradient


def test_fused_loss_gradcheck_in_float64() -> None:
    gen = torch.Generator().manual_seed(6)
    logits = torch.randn(6, 9, generator=gen, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([0, 8, 3, 3, 1, 5])
    assert torch.autograd.gradcheck(
        lambda z: label_smoothed_nll(z, target, epsilon=0.2)[0], (logits,)
    )


def test_fused_loss_is_exact_where_the_target_probability_underflows() -> None:
    """A reference token 200 nats below the best: its probability is 0 in float32, the loss is not."""
    logits = torch.zeros(3, 50)
    logits[:, 7] = 200.0
    target = torch.tensor([1, 7, 30])
    loss, nll = label_smoothed_nll(logits.clone().requires_grad_(), target, epsilon=0.1)
    want = torch.nn.functional.cross_entropy(
        logits.double(), target, label_smoothing=0.1, reduction="sum"
    )
    assert torch.isfinite(loss) and torch.isfinite(nll)
    assert loss.item() == pytest.approx(want.item(), rel=1e-6)
    assert nll.item() == pytest.approx(400.0, rel=1e-6)  # two rows 200 nats off, one exact


def simulate_budget(step_seconds: float, minutes: float = 60.0) -> list[tuple[float, float]]:
    """(progress, lr) of every step of a run that takes ``step_seconds`` a step for ``minutes``."""
    rate = budget_schedule(lr=1e-3, warmup_fraction=0.25, cooldown_fraction=0.2)
    out, step = [], 0
    while (step + 1) * step_seconds <= minutes * 60:
        step += 1
        p = budget_progress(step=step, seconds=step * step_seconds, max_seconds=minutes * 60)
        out.append((p, rate(p)))
    return out


@pytest.mark.parametrize("step_seconds", [0.9, 3.6])  # a fast CPU and one four times slower
def test_budget_schedule_is_complete_on_a_fast_and_a_slow_machine(step_seconds: float) -> None:
    run = simulate_budget(step_seconds)
    lrs = [lr for _, lr in run]
    peak = max(range(len(lrs)), key=lrs.__getitem__)
    assert lrs[peak] == pytest.approx(1e-3, rel=0.01)  # reaches the peak ...
    assert run[peak][0] == pytest.approx(0.25, abs=0.01)  # ... a quarter into the budget
    assert all(a <= b for a, b in itertools.pairwise(lrs[: peak + 1]))  # warmup rises
    assert all(a >= b for a, b in itertools.pairwise(lrs[peak:]))  # then only decays
    assert lrs[-1] < 0.01 * lrs[peak]  # and cools down to (about) zero at the end
    cooldown = [p for p, _ in run if p > 0.8]
    assert len(cooldown) == pytest.approx(0.2 * len(run), abs=2)


def test_budget_schedule_is_the_same_curve_over_fewer_steps() -> None:
    fast, slow = simulate_budget(0.9), simulate_budget(3.6)
    assert len(fast) == pytest.approx(4 * len(slow), abs=4)
    for p, lr in slow[::25]:
        match = min(fast, key=lambda pl: abs(pl[0] - p))
        assert lr == pytest.approx(match[1], rel=0.02, abs=1e-6)


def test_budget_progress_takes_the_binding_limit() -> None:
    assert budget_progress(step=10, seconds=0.0, max_steps=100) == 0.1
    assert budget_progress(step=10, seconds=3000.0, max_steps=100, max_seconds=3600.0) == (
        pytest.approx(3000 / 3600)
    )
    assert budget_progress(step=500, seconds=99999.0, max_seconds=60.0) == 1.0
    with pytest.raises(ValueError, match=r"needs train\.max_minutes"):
        budget_progress(step=1, seconds=1.0)


@pytest.mark.parametrize(
    ("warmup", "cooldown", "message"),
    [(0.0, 0.2, "warmup_fraction"), (1.0, 0.0, "warmup_fraction"), (0.5, 0.6, "cooldown_fraction")],
)
def test_budget_schedule_rejects_bad_fractions(
    warmup: float, cooldown: float, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        budget_schedule(lr=1e-3, warmup_fraction=warmup, cooldown_fraction=cooldown)


@pytest.mark.parametrize(
    ("epoch_end", "due", "start"),
    [(77, [77, 81, 86, 91], 77), (82, [80, 82, 86, 91], 80), (87, [80, 85, 87, 91], 80)],
)
def test_a_validation_past_a_cooldown_point_gives_one_checkpoint_not_two(
    epoch_end: int, due: list[int], start: int
) -> None:
    # A 100-second budget at 1 s a step: the cooldown starts at 80 s, its points at 85, 90, 95 s. An
    # epoch ends at `epoch_end` and its validation takes 4 s, past the next point (past the start for
    # step 77): the epoch's checkpoint stands for it. Seen on an H100 (2026-11-26), where validation
    # outlasts a cooldown slot: the step after each such epoch end wrote a second, near-identical
    # checkpoint, and the final model averaged both.
    def run(with_call: bool) -> tuple[list[int], int | None]:
        budget = Budget(max_steps=None, max_seconds=100.0, cooldown_fraction=0.2, average_last=4)
        written = []
        for step in range(1, 97):
            if budget.cooldown_checkpoint_due(step, step + (4.0 if step > epoch_end else 0.0)):
                written.append(step)
            if step == epoch_end:
                if with_call:
                    budget.cooldown_checkpoint_due(step, step + 4.0)  # the trainer's call
                written.append(step)  # the epoch's own checkpoint
        return sorted(set(written)), budget.cooldown_step

    assert run(with_call=True) == (due, start)
    old, _ = run(with_call=False)
    assert sorted(set(old) - set(due)) == [epoch_end + 1]  # the step after the epoch's end
