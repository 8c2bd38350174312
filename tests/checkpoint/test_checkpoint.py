"""Checkpoints: safetensors round trips, pickle refusal, corrupted files, run-folder resolution, atomicity."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest
import torch

from csan import checkpoint as ckpt
from csan.config import load_config
from csan.decoding import load_model
from csan.errors import CsanError
from csan.models import build_model

SPM_BYTES = b"stand-in for a SentencePiece model"


def tiny_cfg(*overrides: str):
    return load_config(
        "tiny",
        ["model.d_model=16", "model.heads=4", "model.ffn_dim=24", "model.encoder_layers=1",
         "model.decoder_layers=1", *overrides],
    )  # fmt: skip


def saved_model(folder: Path, *overrides: str, seed: int = 0) -> torch.nn.Module:
    cfg = tiny_cfg(*overrides)
    torch.manual_seed(seed)
    model = build_model(cfg.model, 50)
    folder.mkdir(parents=True, exist_ok=True)
    ckpt.save_model_dir(folder, model, cfg, SPM_BYTES, step=7)
    return model


class Payload:
    """Unpickling this creates ``path``: proof that the pickle ran code."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (str(self.path), "w"))


def pickle_file(path: Path, marker: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        pickle.dump({"model": Payload(marker), "state_dict": {}}, f)
    return path


# -- round trip -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "overrides",
    [
        (),
        ("model.share_embeddings=false",),
        ("model.encoder_attention=csan2d", "model.attention_options.csan2d.window=3"),
    ],
)
def test_model_folder_round_trip(tmp_path: Path, overrides: tuple[str, ...]) -> None:
    model = saved_model(tmp_path / "m", *overrides)
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == [
        "config.json",
        "model.safetensors",
        "spm.model",
    ]
    loaded = load_model(tmp_path / "m")
    assert loaded.config == tiny_cfg(*overrides)
    assert loaded.spm_bytes == SPM_BYTES
    assert loaded.meta["step"] == 7 and loaded.meta["vocab_size"] == 50
    assert loaded.folder == tmp_path / "m"
    assert not loaded.model.training
    want, got = model.state_dict(), loaded.model.state_dict()
    assert want.keys() == got.keys()
    for name in want:
        assert torch.equal(want[name], got[name]), name
    src = torch.tensor([[5, 6, 7, 3]])
    tgt = torch.tensor([[2, 8, 9]])
    model.eval()
    assert torch.equal(model(src, tgt), loaded.model(src, tgt))


def test_tied_embeddings_stay_tied_after_loading(tmp_path: Path) -> None:
    saved_model(tmp_path / "m")
    model = load_model(tmp_path / "m").model
    assert model.src_embed.weight is model.tgt_embed.weight


# -- pickle is never loaded -----------------------------------------------------------------------
def test_the_payload_is_live(tmp_path: Path) -> None:
    """Control: unpickling the crafted file does run code, so the refusal tests below mean something."""
    marker = tmp_path / "control-marker"
    path = pickle_file(tmp_path / "control.pt", marker)
    with open(path, "rb") as f:
        pickle.load(f)  # deliberately, on our own file
    assert marker.exists()


@pytest.mark.parametrize(
    "name", ["model.pt", "checkpoint_best.pt", "pytorch_model.bin", "model.ckpt"]
)
def test_pickle_checkpoint_is_refused_and_never_executed(tmp_path: Path, name: str) -> None:
    marker = tmp_path / "pwned"
    folder = tmp_path / "old-model"
    pickle_file(folder / name, marker)
    for call in (ckpt.find_model_dir, load_model):
        with pytest.raises(CsanError) as info:
            call(folder)
        message = str(info.value)
        assert str(folder / name) in message
        assert "pickle" in message and "never loaded" in message and "model.safetensors" in message
    assert not marker.exists()


def test_pickle_renamed_to_safetensors_is_refused_and_never_executed(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    folder = tmp_path / "m"
    saved_model(folder)
    pickle_file(folder / "model.safetensors", marker)
    with pytest.raises(CsanError, match=r"model\.safetensors: cannot read weights"):
        load_model(folder)
    assert not marker.exists()


def test_pickle_trainer_state_is_never_executed(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    pickle_file(tmp_path / "trainer.safetensors", marker)
    (tmp_path / "trainer.json").write_text("{}", encoding="utf-8")
    with pytest.raises(CsanError, match=r"trainer\.safetensors: cannot read trainer state"):
        ckpt.load_trainer_state(tmp_path)
    assert not marker.exists()


# -- damaged folders ------------------------------------------------------------------------------
@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty", "header"])
def test_corrupted_weights_are_a_csan_error_naming_the_file(tmp_path: Path, damage: str) -> None:
    folder = tmp_path / "m"
    saved_model(folder)
    path = folder / "model.safetensors"
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        path.write_bytes(os.urandom(len(data)))
    elif damage == "empty":
        path.write_bytes(b"")
    else:  # header length says more than the file holds
        path.write_bytes((10**12).to_bytes(8, "little") + data[8:])
    with pytest.raises(CsanError) as info:
        load_model(folder)
    message = str(info.value)
    assert message.startswith(f"{path}: cannot read weights"), message
    assert "\n" not in message


def test_weights_of_another_shape_do_not_fit(tmp_path: Path) -> None:
    saved_model(tmp_path / "small")
    saved_model(tmp_path / "wide", "model.ffn_dim=40")
    os.replace(tmp_path / "wide" / "model.safetensors", tmp_path / "small" / "model.safetensors")
    with pytest.raises(CsanError, match=r"small/model\.safetensors: "):
        load_model(tmp_path / "small")


@pytest.mark.parametrize(("weights_from", "expected"), [(1, "missing"), (3, "unexpected")])
def test_weights_with_other_tensors_do_not_fit(
    tmp_path: Path, weights_from: int, expected: str
) -> None:
    saved_model(tmp_path / "two", "model.encoder_layers=2")
    saved_model(tmp_path / "other", f"model.encoder_layers={weights_from}")
    os.replace(tmp_path / "other" / "model.safetensors", tmp_path / "two" / "model.safetensors")
    with pytest.raises(CsanError) as info:
        load_model(tmp_path / "two")
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'two' / 'model.safetensors'}: weights do not fit")
    assert (
        f"({expected} ['encoder_layers.1." in message
        or f"({expected} ['encoder_layers.2." in message
    )


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        ("missing", r"config\.json: missing"),
        ("not-json", r"config\.json: corrupted"),
        ("not-csan", r"config\.json: not a csan model config"),
        ("unknown-key", r"unknown config key 'model\.d_modle'"),
    ],
)
def test_bad_config_json(tmp_path: Path, damage: str, expected: str) -> None:
    folder = tmp_path / "m"
    saved_model(folder)
    path = folder / "config.json"
    if damage == "missing":
        path.unlink()
    elif damage == "not-json":
        path.write_text("{not json", encoding="utf-8")
    elif damage == "not-csan":
        path.write_text('{"hello": 1}', encoding="utf-8")
    else:
        meta = json.loads(path.read_text(encoding="utf-8"))
        meta["config"]["model"]["d_modle"] = 3
        path.write_text(json.dumps(meta), encoding="utf-8")
    with pytest.raises(CsanError, match=expected):
        load_model(folder)


def test_missing_subword_model(tmp_path: Path) -> None:
    saved_model(tmp_path / "m")
    (tmp_path / "m" / "spm.model").unlink()
    with pytest.raises(CsanError, match=r"spm\.model: missing"):
        load_model(tmp_path / "m")


# -- resolving --model ----------------------------------------------------------------------------
def fake_run(root: Path, steps: list[int], *, last: int | None, best: int | None) -> Path:
    (root / "checkpoints").mkdir(parents=True)
    for step in steps:
        folder = root / "checkpoints" / f"step_{step:08d}"
        folder.mkdir(parents=True)
        (folder / "model.safetensors").write_bytes(b"")
    if last is not None:
        (root / "checkpoints" / "LAST").write_text(f"step_{last:08d}\n")
    if best is not None:
        (root / "checkpoints" / "BEST").write_text(f"step_{best:08d}\n")
    return root


def test_find_model_dir_resolution_order(tmp_path: Path) -> None:
    run = fake_run(tmp_path / "run", [10, 20, 30], last=30, best=20)
    step = run / "checkpoints"
    assert ckpt.find_model_dir(run) == step / "step_00000020"  # BEST before LAST
    assert ckpt.latest_checkpoint(run) == step / "step_00000030"
    (run / "model").mkdir()
    (run / "model" / "model.safetensors").write_bytes(b"")
    assert ckpt.find_model_dir(run) == run / "model"  # the final model first
    assert ckpt.find_model_dir(run / "model") == run / "model"  # a model folder is itself
    assert ckpt.find_model_dir(step / "step_00000010") == step / "step_00000010"


def test_find_model_dir_falls_back_to_last_when_best_is_gone(tmp_path: Path) -> None:
    run = fake_run(tmp_path / "run", [10, 30], last=30, best=20)  # step 20 was pruned
    assert ckpt.find_model_dir(run) == run / "checkpoints" / "step_00000030"


def test_find_model_dir_errors(tmp_path: Path) -> None:
    with pytest.raises(CsanError, match="no such model folder"):
        ckpt.find_model_dir(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CsanError, match=r"no model\.safetensors here, nor a csan run folder"):
        ckpt.find_model_dir(tmp_path / "empty")
    run = fake_run(tmp_path / "run", [], last=5, best=None)  # pointer to nothing
    with pytest.raises(CsanError, match="nor a csan run folder"):
        ckpt.find_model_dir(run)
    assert ckpt.latest_checkpoint(run) is None


def test_a_real_run_folder_resolves_and_loads(tiny_run: Path) -> None:
    assert ckpt.find_model_dir(tiny_run) == tiny_run / "model"
    loaded = load_model(tiny_run)
    assert loaded.config.model.d_model == load_config("tiny").model.d_model
    last = ckpt.latest_checkpoint(tiny_run)
    assert last is not None and last.name == "step_00000050"


# -- atomic writes --------------------------------------------------------------------------------
def test_atomic_folder_write_leaves_nothing_when_fill_raises(tmp_path: Path) -> None:
    def fill(tmp: Path) -> None:
        (tmp / "half.bin").write_bytes(b"x" * 100)
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        ckpt.write_folder_atomically(tmp_path / "out", fill)
    assert list(tmp_path.iterdir()) == []


def test_atomic_folder_write_keeps_the_old_folder_when_fill_raises(tmp_path: Path) -> None:
    ckpt.write_folder_atomically(tmp_path / "out", lambda tmp: (tmp / "a").write_text("old"))

    def failing(tmp: Path) -> None:
        (tmp / "a").write_text("new")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ckpt.write_folder_atomically(tmp_path / "out", failing)
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    assert (tmp_path / "out" / "a").read_text() == "old"


def test_atomic_folder_write_replaces_whole_folder(tmp_path: Path) -> None:
    ckpt.write_folder_atomically(tmp_path / "out", lambda tmp: (tmp / "a").write_text("old"))
    ckpt.write_folder_atomically(tmp_path / "out", lambda tmp: (tmp / "b").write_text("new"))
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["b"]


def test_atomic_write_text(tmp_path: Path) -> None:
    path = tmp_path / "LAST"
    ckpt.atomic_write_text(path, "step_1\n")
    ckpt.atomic_write_text(path, "step_2\n")
    assert path.read_text() == "step_2\n"
    assert [p.name for p in tmp_path.iterdir()] == ["LAST"]


# -- optimizer state and averaging ----------------------------------------------------------------
def test_optimizer_state_round_trips_without_pickle(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    opt = torch.optim.Adam(model.parameters(), lr=0.1, betas=(0.9, 0.98))
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(5, 4)).square().sum().backward()
        opt.step()
    tensors, meta = ckpt.optimizer_to_files(opt)
    ckpt.save_trainer_state(tmp_path, tensors, {"optimizer": meta})
    tensors2, meta2 = ckpt.load_trainer_state(tmp_path)
    fresh = torch.optim.Adam(model.parameters(), lr=0.5)
    ckpt.optimizer_from_files(fresh, tensors2, meta2["optimizer"])
    want, got = opt.state_dict(), fresh.state_dict()
    assert got["param_groups"] == want["param_groups"]
    for idx, state in want["state"].items():
        for key, value in state.items():
            assert torch.equal(torch.as_tensor(got["state"][idx][key]), torch.as_tensor(value))


def test_average_checkpoints_is_the_elementwise_mean(tmp_path: Path) -> None:
    models = [saved_model(tmp_path / f"m{i}", seed=i) for i in range(3)]
    ckpt.average_model_dirs([tmp_path / f"m{i}" for i in range(3)], tmp_path / "avg", made_from="t")
    loaded = load_model(tmp_path / "avg")
    assert loaded.meta["made_from"] == "t"
    for name, value in loaded.model.state_dict().items():
        mean = sum(m.state_dict()[name].double() for m in models) / 3
        torch.testing.assert_close(value, mean.float(), rtol=0, atol=1e-7)
    with pytest.raises(CsanError, match="no checkpoints to average"):
        ckpt.average_model_dirs([], tmp_path / "none", made_from="t")
    assert not (tmp_path / "none").exists()
