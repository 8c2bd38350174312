"""csan.bench: the attention benchmark runs, measures, and writes its results with the machine."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from csan.bench import attention as bench
from csan.bench import timing
from csan.functional import local_attention


def test_rows_cover_backends_and_cases():
    rows = bench.run_attention_bench(
        [32, 64], head_windows=(1, 3), heads=4, head_dim=8, repeats=1, warmup=0, log=None
    )
    ok = [r for r in rows if r["status"] == "ok"]
    assert {r["backend"] for r in ok} >= {"dense", "blocked"}
    assert {r["case"] for r in ok} == {"long", "sentence"}
    assert {r["status"] for r in rows if r["backend"] == "flex"} == {"unavailable"}
    for r in ok:
        assert r["forward_ms"] > 0 and r["train_ms"] > 0
        assert r["peak_mib"] >= r["workspace_mib"] >= 0


def test_peak_memory_sees_a_large_temporary():
    def make_temporary():
        x = torch.ones(2**20)  # 4 MiB, freed at once
        del x

    assert 4.0 <= timing.peak_bytes(make_temporary, torch.device("cpu")) / 2**20 < 4.5


def test_dense_is_skipped_when_it_would_need_too_much_memory():
    rows = bench.run_attention_bench(
        [32, 64], head_windows=(1,), heads=2, head_dim=8, repeats=1, warmup=0,
        backends=("dense",), sentence=False, max_dense_bytes=2**10, log=None,
    )  # fmt: skip
    assert [r["status"] for r in rows] == ["ok", "oom-skipped"]


def test_main_writes_json_and_markdown(tmp_path, capsys):
    argv = ["--lengths", "32", "--head-windows", "1", "--heads", "2", "--head-dim", "8",
            "--repeats", "1", "--warmup", "0", "--no-sentence", "--out", str(tmp_path)]  # fmt: skip
    assert bench.main(argv) == 0
    [json_path] = tmp_path.glob("attention-cpu-*.json")
    [md_path] = tmp_path.glob("attention-cpu-*.md")
    data = json.loads(json_path.read_text())
    assert data["machine"]["torch"] == torch.__version__
    assert data["machine"]["device"] == "cpu"
    assert {r["backend"] for r in data["rows"]} >= {"dense", "blocked"}
    text = md_path.read_text()
    assert "| long | 1 x 32 | 1 | blocked |" in text
    assert data["machine"]["cpu"] in text
    assert "sdpa/this" in capsys.readouterr().out


def test_interleaved_timing_rotates_the_order():
    order: list[str] = []
    fns = {name: (lambda name=name: order.append(name)) for name in "abc"}
    ms = timing.interleaved_ms(fns, repeats=3, warmup=1, device=torch.device("cpu"))
    assert sorted(ms) == ["a", "b", "c"] and all(t >= 0 for t in ms.values())
    assert order == list("abcabcbcacab")  # warm-up, then one rotation per round
    assert timing.interleaved_ms({}, repeats=3, warmup=1, device=torch.device("cpu")) == {}


def _plain_script():
    """benchmarks/plain_attention.py, loaded as a module (it is a script, not part of the package)."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "plain_attention.py"
    spec = importlib.util.spec_from_file_location("plain_attention", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("head_window", [1, 3])
def test_bench_and_plain_script_time_the_same_sdpa_reference(head_window):
    """Both harnesses divide by the same maths: one masked SDPA call equal to csan's local attention."""
    plain = _plain_script()
    q, k, v = (torch.randn(2, 8, 40, 16) for _ in range(3))
    ours = local_attention(q, k, v, window=plain.WINDOW, head_window=head_window)
    bench_ref = bench.sdpa_reference(q, k, v, window=plain.WINDOW, head_window=head_window)
    plain_ref = plain.sdpa_call(q, k, v, head_window)()
    torch.testing.assert_close(bench_ref, ours, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(plain_ref, ours, atol=1e-5, rtol=1e-5)


def test_results_state_the_harness(tmp_path):
    argv = ["--lengths", "32", "--head-windows", "3", "--heads", "4", "--head-dim", "8",
            "--repeats", "1", "--warmup", "0", "--no-sentence", "--out", str(tmp_path)]  # fmt: skip
    assert bench.main(argv) == 0
    [md_path] = tmp_path.glob("attention-cpu-*.md")
    text = md_path.read_text()
    assert "## Harness" in text and "out.sum().backward()" in text
    assert "THP_MEM_ALLOC_ENABLE" in text and "PyTorch default" in text
    assert "| long | 1 x 32 | 3 | sdpa |" in text and "What is measured, per" in text
    data = json.loads(next(tmp_path.glob("attention-cpu-*.json")).read_text())
    assert data["harness"]["gradients"].startswith("out.sum().backward()")
    assert data["machine"]["capability"] == data["machine"]["capability"].upper()


def test_a_kernel_that_keeps_no_output_still_has_a_workspace():
    """The workspace is the peak less the three gradients. The blocked kernel keeps no output for its
    backward, so its peak is below output + gradients: subtracting the output as well gave it 0 and
    the plain script a workspace ratio of 7e10."""
    rows = bench.run_attention_bench(
        [1024], head_windows=(1,), heads=8, head_dim=64, repeats=1, warmup=0,
        backends=("sdpa", "blocked", "auto"), sentence=False, log=None,
    )  # fmt: skip
    row = {r["backend"]: r for r in rows}
    gradients_mib = 3 * 8 * 1024 * 64 * 4 / 2**20
    for name in ("blocked", "auto"):  # auto: the native kernel where it builds
        assert row[name]["peak_mib"] < gradients_mib + 2.0  # the output (2 MiB) is not kept
        assert 0 < row[name]["workspace_mib"] < row["sdpa"]["workspace_mib"] / 10
    # the plain script (auto, as a user calls it) agrees with the bench's auto row
    plain = _plain_script()
    q, k, v = (torch.randn(1, 8, 1024, 64, requires_grad=True) for _ in range(3))
    step = plain.train_step(plain.csan_call(q, k, v, 1), (q, k, v))
    workspace = plain.workspace_mib(plain.peak_mib(step), q)
    assert workspace == pytest.approx(row["auto"]["workspace_mib"], rel=0.2, abs=0.05)
