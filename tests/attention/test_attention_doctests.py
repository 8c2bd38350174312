"""The runnable examples in the attention docstrings stay correct."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "csan.functional",
    "csan.kernels.dense",
    "csan.kernels.reference",
    "csan.attention",
    "csan.attention.base",
    "csan.attention.registry",
    "csan.attention.vanilla",
    "csan.attention.csan",
    "csan.attention.rel_pos",
    "csan.attention.localness",
    "csan.attention.block",
    "csan.attention.cnn",
    "csan.attention.bi_direct",
    "csan.attention.context",
    "csan.attention.conv_qkv",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} failing example(s) in {name}"
