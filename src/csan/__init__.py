"""csan: convolutional self-attention networks and the translation toolkit around them.

Example:
    >>> import torch, csan
    >>> q = k = v = torch.randn(1, 2, 5, 4)
    >>> csan.local_attention(q, k, v, window=3).shape
    torch.Size([1, 2, 5, 4])
    >>> csan.SpatialTransformer(in_channels=3)(torch.rand(2, 3, 8, 8)).shape
    torch.Size([2, 3, 8, 8])
"""

__version__ = "0.1.0"

import os as _os

from csan.errors import CsanError


def _separate_kernel_cache() -> None:
    """Give inductor a kernel cache of its own when ``ATEN_CPU_CAPABILITY`` forces an ISA.

    Inductor picks its vector ISA from ``ATEN_CPU_CAPABILITY`` (``avx2``: 8 floats a vector), but
    its cache keys leave the variable out: a process with AVX2 forced on an AVX512 CPU reuses the
    kernels a plain process compiled there, and the other way round, and gets wrong numbers back
    (garbage and NaN, seen with torch 2.13 on a Zen 4). So where the variable is set and the user
    chose no cache (``TORCHINDUCTOR_CACHE_DIR``), this points inductor at
    ``<tmp>/torchinductor_<user>-<capability>``. Runs when csan is imported, before anything is
    compiled.
    """
    forced = _os.environ.get("ATEN_CPU_CAPABILITY", "").strip().lower()
    if not forced or forced == "default" or _os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
        return
    # torch's own default folder (only imported here: a plain ``import csan`` stays light)
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    _os.environ["TORCHINDUCTOR_CACHE_DIR"] = f"{default_cache_dir()}-{forced}"


_separate_kernel_cache()

__all__ = [
    "CsanError",
    "SpatialTransformer",
    "__version__",
    "affine_grid",
    "bilinear_sample",
    "local_attention",
    "projective_grid",
    "tps_grid",
]

_SPATIAL = ("SpatialTransformer", "affine_grid", "bilinear_sample", "projective_grid", "tps_grid")


def __getattr__(name: str):
    if name == "local_attention":
        from csan.functional import local_attention

        return local_attention
    if name in _SPATIAL:
        import csan.spatial

        return getattr(csan.spatial, name)
    raise AttributeError(f"module 'csan' has no attribute {name!r}")
