"""Attention kernels: plain functions on (batch, heads, time, d_h) tensors, no ``torch.nn`` modules.

- :mod:`csan.kernels.reference`: slow, obviously correct, straight from the definitions in SPEC.md;
  every fast path is tested against it.
- :mod:`csan.kernels.dense`: band-masked ``scaled_dot_product_attention`` (O(T^2) memory, fast for
  sentence-length inputs).
- ``csan.kernels.blocked`` (optional, O(T*M)): used by :func:`csan.functional.local_attention` when it exists.

Pick a kernel through :func:`csan.functional.local_attention` (it validates the options); call a kernel
directly only when the options are known to be valid.
"""

from csan.kernels.dense import dense_local_attention, masked_attention
from csan.kernels.reference import reference_local_attention

__all__ = ["dense_local_attention", "masked_attention", "reference_local_attention"]
