"""csan: convolutional self-attention networks and the translation toolkit around them.

Example:
    >>> import torch, csan
    >>> q = k = v = torch.randn(1, 2, 5, 4)
    >>> csan.local_attention(q, k, v, window=3).shape
    torch.Size([1, 2, 5, 4])
"""

__version__ = "0.1.0"

from csan.errors import CsanError

__all__ = ["CsanError", "__version__", "local_attention"]


def __getattr__(name: str):
    if name == "local_attention":
        from csan.functional import local_attention

        return local_attention
    raise AttributeError(f"module 'csan' has no attribute {name!r}")
