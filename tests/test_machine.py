"""What ``auto`` chooses: bf16 and compile only where the CPU computes bf16 natively.

The capability is faked both ways (a :class:`Machine` given directly, PyTorch's probes patched, and a
real process started with ``ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2``), so these tests pass
on a CPU with native bf16 and on one without.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import pytest
import torch

from csan import machine as machine_mod
from csan.config import load_config
from csan.errors import CsanError
from csan.machine import Machine, choose_runtime, describe_machine, machine_info

NATIVE = Machine("AMD EPYC (Zen 5)", "AVX512", True, 2, 2, {"avx512_bf16": True})
AVX2 = Machine("AMD EPYC (Zen 3)", "AVX2", False, 2, 2, {"avx512_bf16": False})


@pytest.mark.parametrize(("machine", "mode"), [(NATIVE, "bf16 + compile"), (AVX2, "float32 eager")])
def test_auto_follows_native_bf16(machine: Machine, mode: str) -> None:
    choice = choose_runtime("auto", "auto", device="cpu", machine=machine)
    assert choice.mode == mode
    assert all("auto" in reason for reason in choice.reasons)


def test_explicit_settings_are_obeyed() -> None:
    assert choose_runtime(False, False, machine=NATIVE).mode == "float32 eager"
    assert choose_runtime(False, "auto", machine=NATIVE).mode == "float32 eager"
    assert choose_runtime(False, True, machine=AVX2).mode == "float32 + compile"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert choose_runtime(True, "auto", machine=AVX2).mode == "bf16 eager"


def test_forced_bf16_without_native_support_warns_once() -> None:
    machine = Machine("a CPU of this test", "AVX2", False, 2, 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        choose_runtime(True, False, machine=machine)
        choose_runtime(True, False, machine=machine)
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1
    assert "emulated" in messages[0] and "40-60x" in messages[0] and "AVX2" in messages[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        choose_runtime(True, False, machine=NATIVE)
    assert not caught


def test_cuda_keeps_its_own_bf16_switch() -> None:
    choice = choose_runtime("auto", "auto", device="cuda", cuda_bf16=True, machine=AVX2)
    assert choice.bf16 and not choice.compile


@pytest.mark.parametrize(("capability", "mkldnn_bf16", "native"), [
    ("AVX512", True, True),
    ("AVX512", False, False),
    ("AVX2", True, False),  # capped at AVX2: bf16 products are emulated whatever oneDNN reports
    ("DEFAULT", False, False),
])  # fmt: skip
def test_describe_machine_reads_torch(monkeypatch, capability, mkldnn_bf16, native) -> None:
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: mkldnn_bf16)
    machine_mod._describe.cache_clear()
    try:
        m = describe_machine()
        assert (m.capability, m.native_bf16) == (capability, native)
        assert choose_runtime("auto", "auto", machine=m).bf16 is native
    finally:
        machine_mod._describe.cache_clear()


def test_avx2_process_is_seen_without_native_bf16() -> None:
    """The variables the issue names make a process see an AVX2 CPU, whatever this CPU is."""
    code = (
        "import json; from csan.machine import describe_machine, choose_runtime; "
        "m = describe_machine(); "
        "print(json.dumps([m.capability, m.native_bf16, choose_runtime('auto', 'auto').mode]))"
    )
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == ["AVX2", False, "float32 eager"]


def test_machine_record_has_the_cpu_kind() -> None:
    info = machine_info("cpu", command="x")
    for key in ("cpu", "capability", "native_bf16", "avx2", "avx512f", "avx512_bf16", "amx_bf16"):
        assert key in info
    assert info["command"] == "x"
    assert info["ATEN_CPU_CAPABILITY"] == os.environ.get("ATEN_CPU_CAPABILITY", "")


@pytest.mark.parametrize(("isa", "amx"), [
    ("", True), ("AVX512_CORE_AMX", True), ("avx512_core_bf16", False), ("AVX2", False),
])  # fmt: skip
def test_summary_names_amx_only_where_onednn_may_use_it(monkeypatch, isa, amx) -> None:
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", isa)
    xeon_flags = "fpu avx2 avx512f avx512_bf16 amx_bf16 amx_tile"
    cpuinfo = machine_mod._parse_cpuinfo(
        f"vendor_id : GenuineIntel\ncpu family : 6\nflags : {xeon_flags}\n"
    )
    monkeypatch.setattr(machine_mod, "_cpuinfo", lambda: cpuinfo)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: True)
    machine_mod._describe.cache_clear()
    try:
        xeon = describe_machine()
    finally:
        machine_mod._describe.cache_clear()
    assert ("native bf16 (AMX)" in xeon.summary()) is amx
    assert "AMX" not in NATIVE.summary()  # AVX512-BF16 without tiles


def test_config_takes_auto_true_false_and_names_a_bad_value() -> None:
    assert load_config("multi30k-small").train.cpu_bf16 == "auto"
    assert load_config("multi30k-small").train.compile == "auto"
    cfg = load_config("multi30k-small", ["train.cpu_bf16=false", "train.compile=true"])
    assert (cfg.train.cpu_bf16, cfg.train.compile) == (False, True)
    with pytest.raises(CsanError, match=r"train.compile: expected bool or 'auto', got 'sometimes'"):
        load_config("tiny", ["train.compile=sometimes"])


# A process that allocates and frees a 64 MiB tensor, then reports whether glibc kept it mapped
# (mallinfo2's hblkhd: the bytes of blocks served by their own mmap) and what csan says it chose.
_ALLOCATOR_PROBE = """
import ctypes, json, torch
from csan.machine import keep_freed_memory, machine_info
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
mallinfo2 = ctypes.CDLL("libc.so.6").mallinfo2
mallinfo2.restype = Info
said = keep_freed_memory()
x = torch.ones(16 * 2**20)
mapped = mallinfo2().hblkhd
del x
print(json.dumps({"said": said, "own_mapping": mapped >= 64 * 2**20,
                  "recorded": machine_info().get("allocator")}))
"""


def _allocator_probe(**env: str) -> dict:
    clean = {
        k: v for k, v in os.environ.items() if k not in ("MALLOC_MMAP_THRESHOLD_", "LD_PRELOAD")
    }
    out = subprocess.run(
        [sys.executable, "-c", _ALLOCATOR_PROBE], env={**clean, **env},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(out.stdout)


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.confstr("CS_GNU_LIBC_VERSION") is None,
    reason="glibc only",
)
def test_freed_memory_is_kept_unless_the_user_chose_otherwise() -> None:
    kept = _allocator_probe()
    assert kept["said"].startswith("glibc keeps freed memory")
    assert kept["own_mapping"] is False  # a 64 MiB tensor came from the heap, reused after free
    assert kept["recorded"] == kept["said"]
    default = _allocator_probe(CSAN_ALLOCATOR="default")
    assert default == {"said": "default (CSAN_ALLOCATOR=default)", "own_mapping": True,
                       "recorded": default["said"]}  # fmt: skip
    users = _allocator_probe(MALLOC_MMAP_THRESHOLD_="1048576")
    assert users["said"] == "as set by MALLOC_MMAP_THRESHOLD_" and users["own_mapping"] is True


def test_training_batches_are_exact_on_cpu(tiny_overrides: list[str], tmp_path) -> None:
    from csan.training.trainer import Trainer

    with Trainer(load_config("tiny", [*tiny_overrides, "data.train_subset=64"]), tmp_path) as t:
        trainer = t  # the lock is released at once: only the batches are looked at
    assert trainer.data.pad_to_multiple == 1
    for indices in trainer.data.sampler.batches(1):
        batch = trainer.data.batch(indices)
        longest = max(len(trainer.data.train.tgt[i]) for i in indices) + 1  # + EOS
        assert batch.tgt_out.shape[1] == longest


def test_empty_compiled_kernels_are_dropped(monkeypatch, tmp_path) -> None:
    """A 0-byte .so (a compile killed midway) is deleted, so the next run compiles it again instead of
    failing with "file too short"; real kernels and other files stay."""
    from csan.machine import drop_empty_compiled_kernels

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    (tmp_path / "cm").mkdir()
    empty = tmp_path / "cm" / "killed.main.so"
    empty.write_bytes(b"")
    kernel = tmp_path / "cm" / "good.main.so"
    kernel.write_bytes(b"\x7fELF" + bytes(60))
    source = tmp_path / "cm" / "good.main.cpp"
    source.write_text("")  # an empty non-library file is not inductor's problem here
    with pytest.warns(RuntimeWarning, match="1 empty compiled kernel"):
        assert drop_empty_compiled_kernels() == [empty]
    assert not empty.exists() and kernel.exists() and source.exists()
    assert drop_empty_compiled_kernels() == []


ZEN4_CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC
flags\t\t: fpu avx2 avx512f avx512_bf16 avx512_vnni

processor\t: 1
vendor_id\t: GenuineIntel
model name\t: not the first CPU
"""


def test_cpuinfo_reads_the_first_cpu_and_its_core_generation() -> None:
    info = machine_mod._parse_cpuinfo(ZEN4_CPUINFO)
    assert (info.name, info.vendor, info.family, info.model) == ("AMD EPYC", "AuthenticAMD", 25, 17)
    assert {"avx512f", "avx512_bf16"} <= info.flags
    assert machine_mod.cpu_core(info.vendor, info.family, info.flags) == "Zen 4"
    # the same family without AVX512 is Zen 3; 0x1A is Zen 5; Intel and unknown stay unnamed
    assert machine_mod.cpu_core("AuthenticAMD", 25, {"avx2"}) == "Zen 3"
    assert machine_mod.cpu_core("AuthenticAMD", 26, {"avx512f"}) == "Zen 5"
    assert machine_mod.cpu_core("GenuineIntel", 6, {"avx512f"}) == ""
    assert machine_mod.cpu_core("AuthenticAMD", None, set()) == ""
    empty = machine_mod._parse_cpuinfo("")
    assert empty.family is None and empty.flags == set() and empty.name


def test_records_carry_the_cpu_identity() -> None:
    info = machine_info("cpu")
    assert {"cpu_core", "cpu_vendor", "cpu_family", "cpu_model"} <= set(info)
    assert info["cpu_core"] == describe_machine().core
    label = machine_mod.machine_label({**info, "cpu_core": "Zen 4"})
    assert "(Zen 4, " in label


def _python_with_csan(tmp_path, code: str, **env: str) -> str:
    """stdout of ``python -c code`` with TMPDIR in ``tmp_path``, no capability or kernel cache inherited."""
    drop = ("ATEN_CPU_CAPABILITY", "TORCHINDUCTOR_CACHE_DIR")
    base = {k: v for k, v in os.environ.items() if k not in drop}
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**base, "TMPDIR": str(tmp_path), **env},
        capture_output=True,
        text=True,
        check=True,
    ).stdout


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, "None"),  # no capability forced: inductor's own default, untouched
        ({"ATEN_CPU_CAPABILITY": "default"}, "None"),
        ({"ATEN_CPU_CAPABILITY": "avx2"}, "{tmp}/torchinductor_{user}-avx2"),
        ({"ATEN_CPU_CAPABILITY": "AVX512"}, "{tmp}/torchinductor_{user}-avx512"),
        ({"ATEN_CPU_CAPABILITY": "avx2", "TORCHINDUCTOR_CACHE_DIR": "{tmp}/mine"}, "{tmp}/mine"),
    ],
)
def test_a_forced_capability_gets_its_own_kernel_cache(tmp_path, env, expected) -> None:
    """Importing csan points inductor at a cache of the forced capability's own, unless the user named one."""
    import getpass

    env = {k: v.format(tmp=tmp_path) for k, v in env.items()}
    code = "import os, csan; print(os.environ.get('TORCHINDUCTOR_CACHE_DIR'))"
    out = _python_with_csan(tmp_path, code, **env).strip()
    assert out == expected.format(tmp=tmp_path, user=getpass.getuser())


def test_compiled_code_is_right_after_a_run_with_another_capability(tmp_path) -> None:
    """A kernel compiled in a plain process is not reused where ATEN_CPU_CAPABILITY=avx2 forces 8-float
    vectors (inductor's cache keys leave the variable out; on an AVX512 CPU the reuse gave garbage)."""
    code = (
        "import csan, torch\n"
        "f = lambda x: torch.relu(x) * 2 + 1\n"
        "x = torch.randn(64, 37, 48)\n"
        "print(torch.backends.cpu.get_cpu_capability(), torch.equal(torch.compile(f)(x), f(x)))\n"
    )
    envs = ({}, {"ATEN_CPU_CAPABILITY": "avx2"})
    outs = [_python_with_csan(tmp_path, code, **env).split()[-2:] for env in envs]
    assert outs[1][0] == "AVX2"
    assert [right for _, right in outs] == ["True", "True"], outs
