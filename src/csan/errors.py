"""User-facing errors.

A :class:`CsanError` is a mistake of the user (a bad file, a bad option): the command line prints its
message on one line and exits with status 2, without a traceback. Anything else is a bug.
"""

from __future__ import annotations

__all__ = ["CsanError"]


class CsanError(Exception):
    """An error caused by user input; its message says what is wrong and where.

    Example:
        >>> raise CsanError("train.de:12: invalid UTF-8")
        Traceback (most recent call last):
        ...
        csan.errors.CsanError: train.de:12: invalid UTF-8
    """
