"""1D- and 2D-CSAN attention in native code on the CPU: :file:`native.cpp`, built on first use.

The blocked kernel (:mod:`csan.kernels.blocked`) runs a few hundred PyTorch operations a call; at
4,096 positions on a 2-core CPU they wait on memory more than they compute. For calls without
padding or dropout (CPU, float32 or float64, any window and head window) this module runs the whole
band in one loop over the queries instead: per query the logits of its ``N * M`` slots (M positions
of each of the N heads it reads, :func:`csan.kernels.masks.head_neighbours`), one softmax, the sum
of those value rows, with the weights (``batch * heads * time * N * M`` numbers, O(T*M) like the
rest) kept for the backward. That makes two passes, over queries (dP, dS, the query gradient) and
then over keys (each key and value gradient row summed from the queries that read it), so no two
threads ever write the same row.

Building. The source is compiled once per machine with the C++ compiler on the ``PATH`` (``$CXX``,
else ``c++``, ``g++`` or ``clang++``), ``-O3 -march=native``, into
``$CSAN_CACHE/native/`` (default ``~/.cache/csan/native``), named by a hash of the source, the
compiler, the flags and the CPU (so a home folder shared by different machines gets one build per
kind), written to a temporary name and renamed, so an interrupted build leaves nothing half
written. No PyTorch headers are involved: the library takes addresses and element strides through
:mod:`ctypes`, which releases the GIL during the call, so the units of a call run on
``torch.get_num_threads()`` threads of a pool of this module's. Where no compiler works, or with
``CSAN_NATIVE=0``, :func:`available` is False (one warning says why, when a build was tried and
failed) and csan keeps the PyTorch kernel.

Example:
    >>> q = torch.randn(1, 2, 50, 8)
    >>> out = native_local_attention(q, q, q, window=5) if available() else None
    >>> out is None or out.shape == q.shape
    True
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
import warnings
from pathlib import Path

import torch
from torch import Tensor

from csan.kernels import masks

__all__ = [
    "available",
    "describe",
    "head_tables",
    "library_path",
    "native_local_attention",
    "supports",
]

SOURCE = Path(__file__).with_name("native.cpp")
_COMMON = ("-O3", "-fPIC", "-shared", "-std=c++17")
# tried in order: the CPU's own instructions, then portable ones; OpenMP (PyTorch's own threads in
# a PyTorch process), else only its simd pragmas (then a thread pool of this module's)
_FLAG_SETS = (
    ("-march=native", "-fopenmp", *_COMMON),
    ("-fopenmp", *_COMMON),
    ("-fopenmp-simd", *_COMMON),
)
_MAX_SLOTS = 1024  # native.cpp's kMaxWindow: slots (head window * window) a query
_MAX_HEAD = 1024  # native.cpp's kMaxHead: d_h a head
_DTYPES = {torch.float32: "f32", torch.float64: "f64"}
_lock = threading.Lock()


def supports(q: Tensor, *, head_window: int, padded: bool, dropout_p: float, window: int) -> bool:
    """Whether a call with these arguments can run natively (the library aside): CPU, float32 or
    float64, no padding, no dropout, ``window * head_window <= 1024`` slots a query and
    ``d_h <= 1024`` (the library's buffers are on the stack).

    Example:
        >>> supports(torch.zeros(1, 3, 4, 8), head_window=3, padded=False, dropout_p=0.0, window=3)
        True
        >>> supports(torch.zeros(1, 3, 4, 8), head_window=1, padded=True, dropout_p=0.0, window=3)
        False
        >>> supports(torch.zeros(1, 1, 4, 2048), head_window=1, padded=False, dropout_p=0.0, window=3)
        False
    """
    return (
        q.device.type == "cpu"
        and q.dtype in _DTYPES
        and not padded
        and dropout_p == 0
        and window * head_window <= _MAX_SLOTS
        and q.size(-1) <= _MAX_HEAD
    )


def _compiler() -> str | None:
    for name in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _cpu_identity() -> str:
    """What ``-march=native`` depends on: the CPU's model and flags (Linux), else the platform."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() + platform.machine()
    wanted = ("model name", "flags", "Features", "CPU part")
    lines = {line.split(":")[0].strip(): line for line in text.splitlines() if ":" in line}
    return "\n".join(lines.get(key, "") for key in wanted)


def library_path(compiler: str, flags: tuple[str, ...]) -> Path:
    """Where the build for this source, compiler, flags and CPU lives (it may not exist yet).

    Example:
        >>> library_path("/usr/bin/c++", ("-O3",)).name.startswith("csan_native_")
        True
    """
    from csan.training.data import cache_root

    key = hashlib.sha256()
    for part in (SOURCE.read_bytes(), compiler.encode(), " ".join(flags).encode()):
        key.update(part)
    key.update(_cpu_identity().encode())
    return cache_root() / "native" / f"csan_native_{key.hexdigest()[:16]}.so"


def _build(compiler: str, flags: tuple[str, ...]) -> Path:
    """Compile :data:`SOURCE` into :func:`library_path` (atomically); return the path."""
    target = library_path(compiler, flags)
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=target.stem + ".", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        subprocess.run(
            [compiler, *flags, str(SOURCE), "-o", tmp],
            check=True,
            capture_output=True,
            text=True,
            timeout=300,
        )
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


@functools.cache
def _library() -> ctypes.CDLL | None:
    if os.environ.get("CSAN_NATIVE", "1") == "0":
        return None
    compiler = _compiler()
    if compiler is None:
        return None  # no compiler at all: the PyTorch kernel, silently
    errors = []
    for flags in _FLAG_SETS:
        try:
            lib = ctypes.CDLL(str(_build(compiler, flags)))
        except (OSError, subprocess.SubprocessError) as exc:
            detail = getattr(exc, "stderr", None) or exc
            errors.append(f"{' '.join(flags)}: {str(detail).strip()[:300]}")
            continue
        _declare(lib)
        return lib
    warnings.warn(
        f"csan: could not build its native attention kernel with {compiler} "
        f"({'; '.join(errors)}); using the PyTorch kernel (set CSAN_NATIVE=0 to skip the build)",
        RuntimeWarning,
        stacklevel=3,
    )
    return None


def _declare(lib: ctypes.CDLL) -> None:
    ptr, i64p, dbl = ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64), ctypes.c_double
    # arrays, then shape, sources, readers, strides, (scale,) units and their count
    tail = [i64p] * 4
    units = [i64p, ctypes.c_int64]
    signatures = {
        "forward": [ptr] * 5 + tail + [dbl, *units],
        "backward_queries": [ptr] * 6 + tail + [dbl, *units],
        "backward_keys": [ptr] * 6 + tail + units,
        "backward_fused": [ptr] * 8 + tail + [dbl, *units],
    }
    for suffix in _DTYPES.values():
        for name, argtypes in signatures.items():
            function = getattr(lib, f"csan_{name}_{suffix}")
            function.argtypes, function.restype = argtypes, None
    lib.csan_openmp.restype = ctypes.c_int
    lib.openmp = bool(lib.csan_openmp())


def available() -> bool:
    """Whether the native library is built and loaded (building it on the first call).

    Example:
        >>> isinstance(available(), bool)
        True
    """
    with _lock:
        return _library() is not None


def describe() -> str:
    """One line on the native kernel here: built (where, on which threads) or why not (building it
    if it was not yet). ``csan info`` prints it.

    Example:
        >>> describe().startswith("native attention kernel: ")
        True
    """
    if not available():
        why = "CSAN_NATIVE=0" if os.environ.get("CSAN_NATIVE") == "0" else "no working C++ compiler"
        return f"native attention kernel: off ({why}); local attention uses the PyTorch kernels"
    lib = _library()
    threads = "OpenMP, PyTorch's threads" if lib.openmp else "csan's thread pool"
    return f"native attention kernel: {lib._name} ({threads})"


@functools.cache
def _pool(threads: int) -> concurrent.futures.ThreadPoolExecutor:
    return concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="csan-native")


def _units(rows: int, time: int) -> list[tuple[int, int, int, int]]:
    """(first row, end row, first position, end position) of each unit of work: rows split over
    ``torch.get_num_threads()`` threads, or each row's positions where there are fewer rows."""
    threads = max(1, torch.get_num_threads())
    if rows >= threads:
        bounds = [rows * u // threads for u in range(threads + 1)]
        return [(bounds[u], bounds[u + 1], 0, time) for u in range(threads)]
    per = -(-threads // rows)
    cuts = [time * u // per for u in range(per + 1)]
    return [(r, r + 1, cuts[u], cuts[u + 1]) for r in range(rows) for u in range(per)]


def _group_units(rows: int, group: int, time: int) -> list[tuple[int, int, int, int]] | None:
    """Units of whole groups of ``group`` rows (those whose queries write each other's key rows:
    one row when N = 1, a batch's heads otherwise) over ``torch.get_num_threads()`` threads, for the
    one-pass backward; None when there are fewer groups than threads (then the two passes).

    Example:
        >>> torch.get_num_threads() > 8 or _group_units(8, 1, 100) is not None
        True
    """
    threads = max(1, torch.get_num_threads())
    groups = rows // group
    if groups < threads:
        return None
    bounds = [groups * u // threads * group for u in range(threads + 1)]
    return [(bounds[u], bounds[u + 1], 0, time) for u in range(threads)]


def _run(function, args: list, units: list[tuple[int, int, int, int]]) -> None:
    """Run ``function`` over the units: in one call on the library's OpenMP threads where it has
    them, else one call a unit on this module's pool (one call inline when there is one unit)."""
    units = [unit for unit in units if unit[0] < unit[1] and unit[2] < unit[3]]
    if _library().openmp or len(units) == 1:
        flat = (ctypes.c_int64 * (4 * len(units)))(*(x for unit in units for x in unit))
        function(*args, flat, len(units))
        return
    pool = _pool(max(1, torch.get_num_threads()))
    arrays = [(ctypes.c_int64 * 4)(*unit) for unit in units]
    for future in [pool.submit(function, *args, unit, 1) for unit in arrays]:
        future.result()


def _strides(*tensors: Tensor) -> ctypes.Array:
    values = [s for t in tensors for s in t.stride()[:3]]
    return (ctypes.c_int64 * len(values))(*values)


@functools.lru_cache(maxsize=64)
def head_tables(
    heads: int, head_window: int, head_boundary: str
) -> tuple[ctypes.Array, ctypes.Array]:
    """The heads each head reads and the readers of each head, as the library takes them:
    ``sources[h][s]`` is the head of slot ``s`` of head ``h`` (-1: past the edge, ``"clip"``), and
    ``readers[h']`` the ``(h, s)`` pairs whose slot ``s`` is head ``h'`` (-1 padded), from
    :func:`csan.kernels.masks.head_neighbours` (cached; read only).

    Example:
        >>> sources, readers = head_tables(4, 3, "clip")
        >>> list(sources)[:3], list(readers)[:6]
        ([-1, 0, 1], [0, 1, 1, 0, -1, -1])
    """
    index, exists = masks.head_neighbours(heads, head_window, head_boundary, torch.device("cpu"))
    sources = torch.where(exists, index, -1).tolist()
    readers = [
        [(h, s) for h in range(heads) for s in range(head_window) if sources[h][s] == key]
        for key in range(heads)
    ]
    assert all(len(r) <= head_window for r in readers), readers  # each head in <= N slots
    flat_readers = [
        x for r in readers for pair in r + [(-1, -1)] * (head_window - len(r)) for x in pair
    ]
    flat_sources = [x for row in sources for x in row]
    return (
        (ctypes.c_int64 * len(flat_sources))(*flat_sources),
        (ctypes.c_int64 * len(flat_readers))(*flat_readers),
    )


class _NativeAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, left, right, tables):  # type: ignore[override]
        lib = _library()
        batch, heads, time, d = q.shape
        sources, readers = tables
        head_window = len(sources) // heads
        out = q.new_empty(q.shape)
        weights = q.new_empty(batch, heads, time, head_window * (left + right + 1))
        shape = (ctypes.c_int64 * 6)(heads, time, d, left, right, head_window)
        suffix = _DTYPES[q.dtype]
        args = [q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), weights.data_ptr()]
        args += [shape, sources, readers, _strides(q, k, v), d**-0.5]
        _run(getattr(lib, f"csan_forward_{suffix}"), args, _units(batch * heads, time))
        ctx.save_for_backward(q, k, v, weights)
        ctx.shape, ctx.tables = shape, tables
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):  # type: ignore[override]
        lib = _library()
        q, k, v, weights = ctx.saved_tensors
        shape, (sources, readers) = ctx.shape, ctx.tables
        batch, heads, time, d = q.shape
        if grad_out.stride(-1) != 1:  # one dense row where it is constant in time (out.sum())
            row = grad_out.stride(2) == 0
            grad_out = (
                grad_out[:, :, :1].contiguous().expand_as(grad_out)
                if row
                else grad_out.contiguous()
            )
        dq, dk, dv = (torch.empty(q.shape, dtype=q.dtype) for _ in range(3))
        strides = _strides(q, k, v, grad_out)
        suffix = _DTYPES[q.dtype]
        groups = _group_units(batch * heads, 1 if len(sources) == heads else heads, time)
        if groups is not None:  # one pass, no dS buffer
            args = [q.data_ptr(), k.data_ptr(), v.data_ptr(), grad_out.data_ptr()]
            args += [weights.data_ptr(), dq.data_ptr(), dk.data_ptr(), dv.data_ptr()]
            args += [shape, sources, readers, strides, d**-0.5]
            _run(getattr(lib, f"csan_backward_fused_{suffix}"), args, groups)
            return dq, dk, dv, None, None, None
        dlogits = torch.empty_like(weights)
        units = _units(batch * heads, time)
        args = [k.data_ptr(), v.data_ptr(), grad_out.data_ptr(), weights.data_ptr()]
        args += [dlogits.data_ptr(), dq.data_ptr(), shape, sources, readers, strides, d**-0.5]
        _run(getattr(lib, f"csan_backward_queries_{suffix}"), args, units)
        args = [q.data_ptr(), grad_out.data_ptr(), weights.data_ptr(), dlogits.data_ptr()]
        args += [dk.data_ptr(), dv.data_ptr(), shape, sources, readers, strides]
        _run(getattr(lib, f"csan_backward_keys_{suffix}"), args, units)
        return dq, dk, dv, None, None, None


@torch.compiler.disable  # ctypes calls: torch.compile runs this part eagerly, as one graph break
def native_local_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    window: int,
    head_window: int = 1,
    causal: bool = False,
    head_boundary: str = "wrap",
) -> Tensor:
    """1D- and 2D-CSAN attention (no padding, no dropout) by the native library; the arguments as
    :func:`csan.functional.local_attention`'s, already checked, and :func:`supports` and
    :func:`available` true.

    Example:
        >>> from csan.kernels.reference import reference_local_attention
        >>> q = torch.randn(2, 3, 40, 8)
        >>> if available():
        ...     ref = reference_local_attention(q, q, q, window=7, head_window=3)
        ...     out = native_local_attention(q, q, q, window=7, head_window=3)
        ...     print(torch.allclose(out, ref, atol=1e-5))
        ... else:
        ...     print(True)
        True
    """
    left, right = (window - 1, 0) if causal else (window // 2, window // 2)
    left, right = min(left, q.size(2) - 1), min(right, q.size(2) - 1)
    q, k, v = (x if x.stride(-1) == 1 else x.contiguous() for x in (q, k, v))
    tables = head_tables(q.size(1), head_window, head_boundary)
    return _NativeAttention.apply(q, k, v, left, right, tables)
