"""Attention kernels: plain functions on (batch, heads, time, d_h) tensors, no ``torch.nn`` modules.

- :mod:`csan.kernels.reference`: slow, obviously correct, straight from the definitions in SPEC.md;
  every fast path is tested against it.
- :mod:`csan.kernels.dense`: band-masked ``scaled_dot_product_attention`` (O(T^2) memory, fast for
  sentence-length inputs).
- :mod:`csan.kernels.blocked`: O(T*M) time and memory (query blocks against their key halo, a
  recomputing backward); :func:`csan.functional.local_attention` picks it for long sequences.
- :mod:`csan.kernels.native`: the same O(T*M) maths as one native loop per query (CPU; float32/64,
  one head window, no padding or dropout), built on first use with the machine's C++ compiler;
  ``auto`` takes it for the long calls it can do.
- :mod:`csan.kernels.checks`: the argument checks every entry point shares.
- :mod:`csan.kernels.masks`: the per-shape band masks and head indices, cached (read only).
- :mod:`csan.kernels.cache`: a bounded key/value cache (the last M-1 positions) for causal windows.
- :mod:`csan.kernels.flex`: FlexAttention block masks on CUDA.

Pick a kernel through :func:`csan.functional.local_attention` (it validates the options); call a kernel
directly only when the options are known to be valid.
"""

from csan.kernels.blocked import blocked_local_attention
from csan.kernels.cache import append_window
from csan.kernels.dense import dense_local_attention, masked_attention
from csan.kernels.reference import reference_local_attention

__all__ = [
    "append_window",
    "blocked_local_attention",
    "dense_local_attention",
    "masked_attention",
    "reference_local_attention",
]
