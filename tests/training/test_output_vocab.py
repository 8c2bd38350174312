"""``model.output_vocab=target``: the softmax over the pieces the training targets use.

The loss is the full vocabulary's with the left-out columns dropped, gradients never reach a
left-out output row, decoding never emits a left-out piece, and a run saves the output vocabulary
with its weights: the final (averaged) model, a resumed run and ``load_model`` all see the same one.
``model.output_vocab=auto`` picks it where a run computes in float32 and the whole vocabulary under
bf16 autocast (the capability faked both ways), and a run saves and keeps what it picked.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from csan.config import ModelConfig, load_config
from csan.decoding import load_model
from csan.decoding.beam import beam_search
from csan.errors import CsanError
from csan.experiments.grid import config_difference
from csan.machine import Machine, choose_output_vocab, choose_runtime
from csan.models import build_model
from csan.training.data import load_training_data
from csan.training.loss import TranslationLoss, label_smoothed_nll
from csan.training.prepare import settle_output_vocab
from csan.training.trainer import train
from csan.training.validation import teacher_forced_metrics

VOCAB, PAD, UNK, BOS, EOS = 50, 0, 1, 2, 3
KEPT = [5, 6, 7, 11, 12, 20, 21, 22, 30, 31, 40, 49]  # the training targets' pieces


def models(**fields: object) -> tuple[torch.nn.Module, torch.nn.Module]:
    """The same weights twice: over the whole vocabulary, and over ``KEPT`` (+ </s>, <unk>)."""
    cfg = dict(d_model=16, heads=2, ffn_dim=32, encoder_layers=1, decoder_layers=1, dropout=0.0)
    cfg.update(fields)
    torch.manual_seed(0)
    full = build_model(ModelConfig(**cfg), VOCAB)  # type: ignore[arg-type]
    target = build_model(ModelConfig(**cfg, output_vocab="target"), VOCAB)  # type: ignore[arg-type]
    target.load_state_dict(full.state_dict(), strict=False)  # all but the output mask
    target.set_output_vocab(KEPT)
    return full, target


def batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    src = torch.randint(4, VOCAB, (3, 6), generator=gen)
    rows = [[*KEPT[:5], EOS], [*KEPT[5:10], EOS], [*KEPT[10:12], 40, EOS, PAD, PAD]]
    tgt_out = torch.tensor(rows)
    tgt_in = torch.cat([torch.full((3, 1), BOS), tgt_out[:, :-1].clamp(min=BOS)], dim=1)
    return src, tgt_in, tgt_out


def test_the_output_vocabulary_is_the_kept_pieces_with_eos_unk_in_rows_of_8() -> None:
    _, target = models()
    ids = target.output_ids.tolist()
    assert len(ids) % 8 == 0 and set(KEPT) | {UNK, EOS} <= set(ids)
    assert len(ids) - len(KEPT) - 2 < 8  # filled up with the lowest left-out ids, no more
    assert target.output_index[ids].tolist() == list(range(len(ids)))
    left_out = sorted(set(range(VOCAB)) - set(ids))
    assert target.output_index[left_out].eq(ids.index(UNK)).all()


def test_the_loss_is_the_full_vocabularys_without_the_left_out_columns() -> None:
    full, target = models(share_embeddings=False)
    src, tgt_in, tgt_out = batch()
    loss, nll, _ = TranslationLoss(target, epsilon=0.1)(src, tgt_in, tgt_out)
    logits = full(src, tgt_in)[tgt_out.ne(PAD)][:, target.output_ids]
    ref, ref_nll = label_smoothed_nll(
        logits, target.output_index[tgt_out[tgt_out.ne(PAD)]], epsilon=0.1
    )
    torch.testing.assert_close((loss, nll), (ref, ref_nll))
    loss.backward()
    grad = target.output_proj.weight.grad
    rows = torch.zeros(VOCAB, dtype=torch.bool)
    rows[target.output_ids] = True
    assert grad[~rows].abs().max() == 0 and grad[rows].abs().max() > 0


def test_decoding_gives_the_full_vocabularys_scores_and_never_a_left_out_piece() -> None:
    full, target = models()
    full.eval(), target.eval()
    src, tgt_in, _ = batch()
    lf, lt = full(src, tgt_in), target(src, tgt_in)
    kept = target.output_ids
    torch.testing.assert_close(lt[..., kept], lf[..., kept])
    others = torch.ones(VOCAB, dtype=torch.bool)
    others[kept] = False
    assert lt[..., others].isneginf().all()
    hyps = beam_search(target, src, beam=3, max_len_a=0.0, max_len_b=12)
    emitted = {t for row in hyps for t in row}
    assert emitted and emitted <= set(kept.tolist()) - {PAD, BOS}


def test_validation_scores_a_piece_the_targets_never_used_as_unk() -> None:
    from csan.data import EncodedSplit

    _, target = models()
    target.eval()
    unseen = next(i for i in range(4, VOCAB) if i not in target.output_ids.tolist())
    split = EncodedSplit([[5, 6, 7]], [[5, unseen, 6]], [""], [""])
    metrics = teacher_forced_metrics(target, split, device="cpu")
    assert 0 < metrics["loss"] < float("inf")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["model.output_vocab=some"],
            r"model.output_vocab='some': choose 'full', 'target' or 'auto'",
        ),
        (
            ["model.output_vocab=target", "model.arch=convs2s"],
            r"only the transformer has it \(model.arch='convs2s'\)",
        ),
        (
            ["model.output_vocab=target", "data.bpe_dropout=0.1"],
            r"with data.bpe_dropout=0.1: sampled segmentations",
        ),
    ],
)
def test_an_output_vocabulary_that_cannot_work_is_refused_before_any_data(
    tmp_path: Path, overrides: list[str], message: str
) -> None:
    cfg = load_config("tiny", [f"data.data_dir={tmp_path / 'absent'}", *overrides])
    with pytest.raises(CsanError, match=message):
        train(cfg, tmp_path / "run", progress=False)


def test_a_run_keeps_its_output_vocabulary_through_averaging_resume_and_loading(
    tmp_path: Path, tiny_overrides: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    overrides = [*tiny_overrides, "model.output_vocab=target", "data.valid_subset=20",
                 "train.average_last=2", "train.checkpoint_every=2", "train.validate_every=2",
                 "train.evaluate_test=false"]  # fmt: skip
    cfg = load_config("tiny", [*overrides, "train.max_steps=4"])
    train(cfg, tmp_path / "run", progress=False)
    data = load_training_data(cfg)
    used = {i for t in data.train.tgt for i in t} | {UNK, EOS}
    loaded = load_model(tmp_path / "run")
    ids = set(loaded.model.output_ids.tolist())
    assert used <= ids and len(ids) - len(used) < 8 and len(ids) < len(data.spm)
    assert f"softmax over {len(ids):,} of {len(data.spm):,} pieces" in capsys.readouterr().out
    saved = load_file(str(tmp_path / "run" / "model" / "model.safetensors"))
    assert saved["output_mask"].sum() == len(ids)
    # a resumed run starts from its checkpoint's output vocabulary and trains on
    train(load_config("tiny", [*overrides, "train.max_steps=6"]), tmp_path / "run", progress=False)
    again = load_model(tmp_path / "run")
    assert (
        "step_00000006" in again.meta["made_from"] and set(again.model.output_ids.tolist()) == ids
    )
    hyps = beam_search(again.model, torch.tensor([data.train.src[0] + [EOS]]), beam=2, max_len_b=10)
    assert set(hyps[0]) <= ids


NATIVE = Machine("AMD EPYC (Zen 4)", "AVX512", True, 2, 2)
AVX2 = Machine("AMD EPYC (Zen 3)", "AVX2", False, 2, 2)


@pytest.mark.parametrize(
    ("machine", "cpu_bf16", "setting", "arch", "bpe_dropout", "want"),
    [
        (AVX2, "auto", "auto", "transformer", 0.0, "target"),  # float32: the smaller product
        (NATIVE, "auto", "auto", "transformer", 0.0, "full"),  # bf16 autocast
        (NATIVE, False, "auto", "transformer", 0.0, "target"),  # float32 asked for
        (AVX2, "auto", "auto", "convs2s", 0.0, "full"),  # only the transformer has it
        (AVX2, "auto", "auto", "transformer", 0.1, "full"),  # BPE-dropout
        (NATIVE, "auto", "target", "transformer", 0.0, "target"),  # an explicit choice holds
        (AVX2, "auto", "full", "transformer", 0.0, "full"),
    ],
)
def test_auto_takes_the_target_side_in_float32_and_the_whole_vocabulary_under_bf16(
    machine: Machine, cpu_bf16: object, setting: str, arch: str, bpe_dropout: float, want: str
) -> None:
    runtime = choose_runtime(cpu_bf16, "auto", machine=machine, warn=False)  # type: ignore[arg-type]
    choice, why = choose_output_vocab(setting, runtime, arch=arch, bpe_dropout=bpe_dropout)
    assert choice == want
    assert why.startswith("auto: ") if setting == "auto" else why == f"model.output_vocab={setting}"


def test_a_run_with_auto_saves_its_choice_and_keeps_it_on_resume_anywhere(
    tmp_path: Path, resumable_overrides: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    overrides = [*resumable_overrides, "model.output_vocab=auto"]
    run = tmp_path / "run"
    train(load_config("tiny", [*overrides, "train.max_steps=2"]), run, progress=False)  # float32
    assert "(auto: float32, where the output product" in capsys.readouterr().out
    assert "output_vocab: target" in (run / "config.yaml").read_text()
    assert load_model(run).config.model.output_vocab == "target"
    # resumed where auto would take the whole vocabulary, it keeps the softmax it was trained with
    cfg = load_config("tiny", [*overrides, "train.max_steps=4"])
    bf16 = choose_runtime("auto", "auto", machine=NATIVE, warn=False)
    settled, why = settle_output_vocab(cfg, bf16, run)
    assert settled.model.output_vocab == "target" and "trained with target" in why
    assert cfg.model.output_vocab == "auto"  # the caller's config is left as it was
    assert settle_output_vocab(cfg, bf16, tmp_path / "new")[0].model.output_vocab == "full"
    train(cfg, run, progress=False)  # resumes: auto is not a changed setting
    assert "step_00000004" in load_model(run).meta["made_from"]
    # an experiment grid reuses the finished run for auto, not for another explicit softmax
    assert config_difference(run, cfg) is None
    assert config_difference(
        run, load_config("tiny", [*overrides, "train.max_steps=4", "model.output_vocab=full"])
    ) == ("model.output_vocab: 'target' != 'full'")
