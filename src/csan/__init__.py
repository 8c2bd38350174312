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

from csan.errors import CsanError

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
