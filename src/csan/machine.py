"""What machine this is, and what ``auto`` chooses on it.

Two questions decide how fast a CPU trains: does it compute bf16 matrix products natively
(AVX512-BF16 or AMX; elsewhere oneDNN emulates them, 40-60x slower than float32), and does
``torch.compile`` pay for its compilation on it. :func:`describe_machine` answers the first from what
PyTorch itself will use (its CPU capability and oneDNN's bf16 support, so that
``ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2`` is seen as a CPU without native bf16), and
:func:`choose_runtime` turns ``train.cpu_bf16`` / ``train.compile`` (``"auto"``, ``true``, ``false``) into
what a run does, with the reason. :func:`machine_info` is the one record kept with every result.

Example:
    >>> m = describe_machine()
    >>> m.capability in ("DEFAULT", "AVX2", "AVX512", "ZVECTOR", "VSX", "NEON", "SVE256")
    True
    >>> choice = choose_runtime("auto", "auto", device="cpu", machine=m)
    >>> choice.bf16 == m.native_bf16
    True
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import platform
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch

from csan.errors import CsanError

__all__ = [
    "Machine",
    "RuntimeChoice",
    "Switch",
    "choose_output_vocab",
    "choose_runtime",
    "compile_dynamic",
    "cpu_core",
    "describe_machine",
    "drop_empty_compiled_kernels",
    "keep_freed_memory",
    "machine_info",
    "machine_label",
    "pick_device",
]

Switch = bool | Literal["auto"]  # the type of train.cpu_bf16 and train.compile

# /proc/cpuinfo flags recorded with every result: they tell the CPU kinds apart
CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
# environment variables that change what PyTorch computes with, or how fast
ENV_KEYS = (
    "ATEN_CPU_CAPABILITY",
    "ONEDNN_MAX_CPU_ISA",
    "OMP_NUM_THREADS",
    "OMP_WAIT_POLICY",
    "THP_MEM_ALLOC_ENABLE",
)
# glibc's mallopt parameters, and the threshold csan sets both to (2 GiB - 1, the largest an int holds)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_KEEP_BYTES = 2**31 - 1
# settings by which a user has chosen an allocator already (csan leaves it alone then)
_ALLOCATOR_ENV = (
    "MALLOC_MMAP_THRESHOLD_",
    "MALLOC_TRIM_THRESHOLD_",
    "GLIBC_TUNABLES",
    "LD_PRELOAD",
)
# bf16 matrix products without hardware support, against float32 (PEERS.md: 4096x256 @ 256x1024 took
# 2,646 ms in bf16 and 45 ms in float32 on an AVX2 EPYC; 2,676 against 64 ms on another)
EMULATED_BF16_SLOWDOWN = "40-60x"


@dataclass(frozen=True)
class Machine:
    """The hardware a process computes on, as PyTorch sees it.

    ``capability`` is ``torch.backends.cpu.get_cpu_capability()`` (the vector ISA ATen dispatches to);
    ``native_bf16`` is True when oneDNN computes bf16 matrix products in hardware, ``amx`` when it may
    compute them on AMX tiles; ``flags`` are the /proc/cpuinfo flags of :data:`CPU_FLAGS` (what the
    chip has, whatever PyTorch was told to use).

    Example:
        >>> m = describe_machine()
        >>> m.cores >= 1, m.threads == torch.get_num_threads(), sorted(m.flags) == sorted(CPU_FLAGS)
        (True, True, True)
    """

    cpu: str
    capability: str
    native_bf16: bool
    cores: int
    threads: int
    flags: dict[str, bool] = field(default_factory=dict)
    # the core generation, where /proc/cpuinfo tells it (:func:`cpu_core`), e.g. "Zen 4"
    core: str = ""
    amx: bool = False

    def summary(self) -> str:
        """One line: model (and core generation, where known), capability, bf16 (and AMX where
        oneDNN may use it), threads.

        Example:
            >>> Machine("AMD EPYC", "AVX2", False, 2, 2, {"avx2": True}).summary()
            'AMD EPYC, 2 cores; ATen capability AVX2, bf16 emulated (no AVX512-BF16/AMX); 2 threads'
            >>> Machine("AMD EPYC", "AVX512", True, 2, 2, core="Zen 4").summary()[:32]
            'AMD EPYC (Zen 4), 2 cores; ATen '
            >>> Machine("Intel(R) Xeon(R) Processor", "AVX512", True, 2, 2, amx=True).summary()[-47:]
            'capability AVX512, native bf16 (AMX); 2 threads'
        """
        bf16 = "native bf16" if self.native_bf16 else "bf16 emulated (no AVX512-BF16/AMX)"
        if self.amx:
            bf16 += " (AMX)"
        cpu = f"{self.cpu} ({self.core})" if self.core else self.cpu
        return (
            f"{cpu}, {self.cores} cores; ATen capability {self.capability}, {bf16}; "
            f"{self.threads} thread{'s' if self.threads != 1 else ''}"
        )


def _onednn_may_use_amx() -> bool:
    """``ONEDNN_MAX_CPU_ISA`` is unset or names an AMX level (``AVX512_CORE_BF16`` caps oneDNN below
    AMX on a chip that has it, as ``AVX2`` caps it below AVX512)."""
    isa = os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper()
    return isa in ("", "ALL", "DEFAULT") or "AMX" in isa


def cpu_core(vendor: str, family: int | None, flags: set[str]) -> str:
    """The core generation of an AMD CPU from its CPUID family (and flags); "" where not known.

    Cloud machines often name their CPU only "AMD EPYC", and two generations with native bf16 differ
    a lot in its speed (Zen 4 splits each 512-bit operation in two, Zen 5 does not), so results
    record the generation. Family 0x19 is Zen 3 without AVX512 and Zen 4 with it; 0x1A is Zen 5.
    Intel CPUs name themselves in "model name"; they get "".

    Example:
        >>> cpu_core("AuthenticAMD", 25, {"avx2", "avx512f"}), cpu_core("AuthenticAMD", 26, set())
        ('Zen 4', 'Zen 5')
        >>> cpu_core("AuthenticAMD", 25, {"avx2"}), cpu_core("GenuineIntel", 6, {"avx512f"})
        ('Zen 3', '')
    """
    if vendor != "AuthenticAMD" or family is None:
        return ""
    if family == 0x17:
        return "Zen 2" if "rdpid" in flags else "Zen/Zen+"
    if family == 0x19:
        return "Zen 4" if "avx512f" in flags else "Zen 3"
    if family == 0x1A:
        return "Zen 5"
    return ""


@dataclass(frozen=True)
class _CpuInfo:
    name: str
    flags: set[str]
    vendor: str
    family: int | None
    model: int | None


@functools.lru_cache(maxsize=1)
def _cpuinfo() -> _CpuInfo:
    """The first CPU of /proc/cpuinfo (Linux); elsewhere the platform's name, no flags."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    return _parse_cpuinfo(text)


def _parse_cpuinfo(text: str) -> _CpuInfo:
    """The first processor block of a /proc/cpuinfo text."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if not key:  # a blank line ends the first CPU's block (leading ones are skipped)
            if fields:
                break
            continue
        fields.setdefault(key, value)
    family, model = fields.get("cpu family", ""), fields.get("model", "")
    return _CpuInfo(
        name=fields.get("model name") or platform.processor() or platform.machine(),
        flags=set(fields.get("flags", "").split()),
        vendor=fields.get("vendor_id", ""),
        family=int(family) if family.isdigit() else None,
        model=int(model) if model.isdigit() else None,
    )


def _native_bf16(capability: str) -> bool:
    """oneDNN computes bf16 GEMMs natively (AVX512-BF16, AMX) and ATen may use them."""
    if capability in ("DEFAULT", "AVX2"):
        return False  # capped below AVX512 (or emulated there): bf16 products are emulated
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a build without oneDNN
        return False


@functools.lru_cache(maxsize=1)
def _describe(threads: int) -> Machine:
    cpu = _cpuinfo()
    capability = torch.backends.cpu.get_cpu_capability()
    native_bf16 = _native_bf16(capability)
    return Machine(
        cpu=cpu.name,
        capability=capability,
        native_bf16=native_bf16,
        cores=os.cpu_count() or 1,
        threads=threads,
        flags={name: name in cpu.flags for name in CPU_FLAGS},
        core=cpu_core(cpu.vendor, cpu.family, cpu.flags),
        amx=native_bf16 and "amx_bf16" in cpu.flags and _onednn_may_use_amx(),
    )


def describe_machine() -> Machine:
    """The CPU of this process (cached; ``threads`` is read at each call).

    Example:
        >>> describe_machine().cores >= 1
        True
    """
    return _describe(torch.get_num_threads())


@dataclass(frozen=True)
class RuntimeChoice:
    """What a run computes with: bf16 autocast or float32, compiled or eager, and why.

    Example:
        >>> choice = choose_runtime(False, False, machine=Machine("AMD EPYC", "AVX2", False, 2, 2))
        >>> choice.bf16, choice.compile, choice.reasons
        (False, False, ('float32 (train.cpu_bf16=false)', 'compile off (train.compile=false)'))
    """

    bf16: bool
    compile: bool
    reasons: tuple[str, ...]

    @property
    def mode(self) -> str:
        """``"bf16 + compile"``, ``"float32 eager"``, ...

        Example:
            >>> RuntimeChoice(bf16=False, compile=True, reasons=()).mode
            'float32 + compile'
        """
        return f"{'bf16' if self.bf16 else 'float32'} {'+ compile' if self.compile else 'eager'}"


def choose_runtime(
    cpu_bf16: Switch,
    compile: Switch,
    *,
    device: str | torch.device = "cpu",
    cuda_bf16: bool = True,
    machine: Machine | None = None,
    warn: bool = True,
) -> RuntimeChoice:
    """Resolve ``train.cpu_bf16`` and ``train.compile`` for ``device`` on ``machine``.

    On the CPU, ``"auto"`` means bf16 autocast and ``torch.compile`` where the CPU computes bf16
    natively (there compile fuses the casts and element-wise work around the bf16 products: 1.6x in
    ``csan bench train``), and float32 eager elsewhere (where inductor's float32 code was slower than
    eager in the same bench: see benchmarks/results/train-*). An explicit ``True`` for bf16 on a CPU
    without native bf16 is obeyed with a warning naming the expected slowdown. On CUDA, bf16 follows
    ``train.bf16`` (``cuda_bf16``) and ``"auto"`` compile stays off (not measured on a GPU yet).

    Example:
        >>> slow = Machine("AMD EPYC", "AVX2", False, 2, 2)
        >>> choose_runtime("auto", "auto", machine=slow).mode
        'float32 eager'
        >>> fast = Machine("AMD EPYC", "AVX512", True, 2, 2)
        >>> choose_runtime("auto", "auto", machine=fast).mode
        'bf16 + compile'
        >>> choose_runtime(False, "auto", machine=fast).mode
        'float32 eager'
    """
    device = torch.device(device)
    machine = machine or describe_machine()
    reasons: list[str] = []
    if device.type == "cuda":
        bf16 = cuda_bf16
        reasons.append(f"bf16 autocast {'on' if bf16 else 'off'} on CUDA (train.bf16)")
        use_compile = compile is True
        reasons.append(
            "compile on (train.compile=true)"
            if use_compile
            else "compile off ("
            + ("auto: not measured on a GPU yet" if compile == "auto" else "train.compile=false")
            + ")"
        )
        return RuntimeChoice(bf16=bf16, compile=use_compile, reasons=tuple(reasons))
    native = machine.native_bf16
    if cpu_bf16 == "auto":
        bf16 = native
        reasons.append(
            "bf16 autocast (auto: the CPU computes bf16 natively)"
            if native
            else f"float32 (auto: capability {machine.capability} has no native bf16; "
            f"emulated bf16 products are {EMULATED_BF16_SLOWDOWN} slower)"
        )
    else:
        bf16 = bool(cpu_bf16)
        reasons.append(
            f"{'bf16 autocast' if bf16 else 'float32'} (train.cpu_bf16={str(bf16).lower()})"
        )
        if bf16 and not native and warn:
            _warn_emulated_bf16(machine.cpu, machine.capability)
    if compile == "auto":
        use_compile = bf16 and native
        reasons.append(
            "compile on (auto: fuses the work around native bf16 products)"
            if use_compile
            else "compile off (auto: inductor's float32 CPU code is slower than eager here)"
        )
    else:
        use_compile = bool(compile)
        reasons.append(
            f"compile {'on' if use_compile else 'off'} (train.compile={str(use_compile).lower()})"
        )
    return RuntimeChoice(bf16=bf16, compile=use_compile, reasons=tuple(reasons))


def choose_output_vocab(
    output_vocab: str,
    runtime: RuntimeChoice,
    *,
    arch: str = "transformer",
    bpe_dropout: float = 0.0,
) -> tuple[str, str]:
    """Resolve ``model.output_vocab`` (``"auto"``, ``"full"``, ``"target"``) for a run computing as
    ``runtime`` does: the softmax it trains, and why.

    ``"auto"`` takes the target side's pieces where the products are float32: there the output product
    and the loss are a quarter of a step, and the smaller softmax takes 5-8% off it (real AVX2 Zen 3,
    benchmarks/results/output-vocab-avx2-zen3-2026-11-29/), which the main job's margin over fairseq
    needs. Under bf16 autocast it takes the whole vocabulary: there the main job's hour scored
    higher with it (native bf16 Zen 4, the same day: test2016 40.07 against 39.21, p = 0.03), and the
    smaller product's 3-5% a step did not show in the hour's tokens/s
    (benchmarks/results/output-vocab-native-bf16-zen4-2026-11-30/). Only the Transformer has a
    target-side softmax, and BPE-dropout samples pieces the targets' usual segmentation does not use,
    so either of those means the whole vocabulary.

    Example:
        >>> fp32 = choose_runtime("auto", "auto", machine=Machine("AMD EPYC", "AVX2", False, 2, 2))
        >>> choose_output_vocab("auto", fp32)
        ('target', 'auto: float32, where the output product is a quarter of the step')
        >>> bf16 = choose_runtime("auto", "auto", machine=Machine("AMD EPYC", "AVX512", True, 2, 2))
        >>> choose_output_vocab("auto", bf16)[0], choose_output_vocab("target", bf16)[0]
        ('full', 'target')
        >>> choose_output_vocab("auto", fp32, bpe_dropout=0.1)[0]
        'full'
    """
    if output_vocab != "auto":
        return output_vocab, f"model.output_vocab={output_vocab}"
    if arch != "transformer":
        return "full", f"auto: only the transformer has a target-side softmax ({arch})"
    if bpe_dropout > 0:
        return (
            "full",
            "auto: BPE-dropout samples pieces the usual segmentation of the targets leaves out",
        )
    if runtime.bf16:
        return (
            "full",
            "auto: bf16, where the whole vocabulary scored higher in the hour",
        )
    return "target", "auto: float32, where the output product is a quarter of the step"


@functools.cache
def _warn_emulated_bf16(cpu: str, capability: str) -> None:
    """Once per process and machine."""
    warnings.warn(
        f"train.cpu_bf16=true on a CPU without native bf16 ({cpu}, ATen capability "
        f"{capability}): bf16 matrix products are emulated there, {EMULATED_BF16_SLOWDOWN} "
        "slower than float32; training will crawl. Use train.cpu_bf16=auto (float32 here).",
        RuntimeWarning,
        stacklevel=3,
    )


@functools.cache
def keep_freed_memory() -> str:
    """Let glibc keep freed memory for reuse instead of handing it back to the OS; says what it did.

    glibc serves every block above its mmap threshold (dynamic, 32 MiB at most) with a fresh mapping
    and unmaps it on ``free``; a training step frees and allocates dozens of such blocks (logits,
    feed-forward activations and their gradients), and the first touch of each fresh 4 KiB page is a
    page fault. Measured on AVX2 (2 threads): ``log_softmax`` of a 2,400 x 8,000 float32 tensor
    32 ms -> 7 ms; a ``multi30k-small`` training step 1,094 -> 945 ms
    (``benchmarks/profile_train_step.py``). Raising the mmap and trim thresholds to 2 GiB keeps the
    pages mapped: the process's peak memory stays its footprint. Once per process; nothing is
    changed where the user chose an allocator (``MALLOC_*`` / ``GLIBC_TUNABLES`` / ``LD_PRELOAD``),
    where ``CSAN_ALLOCATOR=default``, or off glibc. The answer is recorded by :func:`machine_info`.

    Example:
        >>> keep_freed_memory() == keep_freed_memory()  # once per process, the same answer
        True
    """
    chosen = [name for name in _ALLOCATOR_ENV if os.environ.get(name)]
    if chosen:
        return f"as set by {', '.join(chosen)}"
    if os.environ.get("CSAN_ALLOCATOR", "") == "default":
        return "default (CSAN_ALLOCATOR=default)"
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return "default (not glibc)"
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        done = [libc.mallopt(opt, _KEEP_BYTES) for opt in (_M_MMAP_THRESHOLD, _M_TRIM_THRESHOLD)]
    except (OSError, AttributeError):
        return "default (mallopt unavailable)"
    if not all(done):
        return "default (mallopt refused)"
    return "glibc keeps freed memory (mmap and trim thresholds 2 GiB)"


def drop_empty_compiled_kernels() -> list[Path]:
    """Delete empty shared libraries from inductor's kernel cache; returns what it deleted.

    A process killed while inductor compiles a kernel (a session's time limit, Ctrl-C, an OOM kill)
    can leave that kernel's ``.so`` in the cache at 0 bytes. The next process that needs the same
    kernel finds the file, loads it and fails with ``ImportError: ... file too short`` (pytorch
    issue #102539): a resumed run dies before its first step. An empty ``.so`` is never a valid
    kernel, so it is removed and inductor builds it again (:func:`compile_dynamic` calls it).

    Example:
        >>> isinstance(drop_empty_compiled_kernels(), list)
        True
    """
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    root = Path(cache_dir())
    dropped = []
    for path in root.rglob("*.so"):
        try:
            if path.is_file() and path.stat().st_size == 0:
                path.unlink()
                dropped.append(path)
        except OSError:  # another process removed or replaced it: nothing to mend
            continue
    if dropped:
        warnings.warn(
            f"removed {len(dropped)} empty compiled kernel(s) from {root} (left by a process that "
            f"was killed while compiling); they are compiled again",
            RuntimeWarning,
            stacklevel=2,
        )
    return dropped


def compile_dynamic(fn: Any) -> Any:
    """``torch.compile(fn, dynamic=True)`` (every batch has new lengths), after
    :func:`drop_empty_compiled_kernels`: how the trainer and ``csan bench train`` compile.

    Example:
        >>> import torch
        >>> compiled = compile_dynamic(torch.nn.Linear(2, 2))
        >>> callable(compiled)
        True
    """
    drop_empty_compiled_kernels()
    return torch.compile(fn, dynamic=True)


def machine_info(device: str | torch.device = "cpu", **extra: Any) -> dict[str, Any]:
    """The record kept with every result: CPU and its kind, threads, versions, settings, GPU.

    ``extra`` is added as is (a run's ``mode``, the command, ...).

    Example:
        >>> info = machine_info("cpu", command="csan bench train")
        >>> {"cpu", "capability", "native_bf16", "avx512_bf16", "threads", "command"} <= set(info)
        True
    """
    device = torch.device(device)
    m = describe_machine()
    cpu = _cpuinfo()
    info: dict[str, Any] = {
        "cpu": m.cpu,
        "cpu_core": m.core,
        "cpu_vendor": cpu.vendor,
        "cpu_family": cpu.family,
        "cpu_model": cpu.model,
        "capability": m.capability,
        "native_bf16": m.native_bf16,
        **m.flags,
        "cores": m.cores,
        "threads": m.threads,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "device": str(device),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
    }
    for name in ENV_KEYS:
        info[name] = os.environ.get(name, "")
    if keep_freed_memory.cache_info().currsize:  # what the process runs with, if it chose
        info["allocator"] = keep_freed_memory()
    try:
        thp = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text().strip()
        info["transparent_hugepage"] = thp
    except OSError:
        pass
    info.update(extra)
    return info


def machine_label(info: dict[str, Any]) -> str:
    """One short line naming the machine of a :func:`machine_info` record: the GPU on a GPU run,
    else the CPU model, its kind (capability, native bf16, AMX) and the threads ("" for an empty
    record).

    Two results compare in speed only when their labels are equal.

    Example:
        >>> machine_label({"cpu": "AMD EPYC 9B45", "capability": "AVX512", "native_bf16": True,
        ...                "amx_bf16": False, "threads": 2, "device": "cpu"})
        'AMD EPYC 9B45 (AVX512, native bf16), 2 threads'
        >>> machine_label({"cpu": "AMD EPYC", "cpu_core": "Zen 4", "capability": "AVX512",
        ...                "native_bf16": True, "threads": 2})
        'AMD EPYC (Zen 4, AVX512, native bf16), 2 threads'
        >>> machine_label({"cpu": "AMD EPYC", "capability": "AVX2", "native_bf16": False,
        ...                "threads": 2})
        'AMD EPYC (AVX2, bf16 emulated), 2 threads'
        >>> machine_label({"device": "cuda:0", "gpu": "NVIDIA H100 80GB HBM3"})
        'NVIDIA H100 80GB HBM3'
        >>> machine_label({})
        ''
    """
    if info.get("gpu"):
        return str(info["gpu"])
    if not info.get("cpu"):
        return ""
    kind = [str(info["cpu_core"])] if info.get("cpu_core") else []
    kind.append(str(info.get("capability") or "?"))
    kind.append("native bf16" if info.get("native_bf16") else "bf16 emulated")
    if info.get("amx_bf16"):
        kind.append("AMX")
    threads = info.get("threads")
    tail = f", {threads} thread{'s' if threads != 1 else ''}" if threads else ""
    return f"{info['cpu']} ({', '.join(kind)}){tail}"


def pick_device(name: str, *, setting: str = "train.device") -> torch.device:
    """A device name (``train.device``, ``--device``) -> a torch device; ``"auto"`` is CUDA when
    available, else the CPU. A bad name is a CsanError naming ``setting``.

    Example:
        >>> pick_device("cpu")
        device(type='cpu')
    """
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise CsanError(f"{setting}: unknown device {name!r}") from None
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if (device.index or 0) >= count:
            raise CsanError(f"{setting}={name}: no such device here ({count} CUDA devices)")
    return device
