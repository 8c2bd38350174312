"""Attention tests: a fast default tier; ``@pytest.mark.slow`` sweeps run only with CSAN_SLOW=1 or -m slow."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("CSAN_SLOW") == "1" or "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow sweep: set CSAN_SLOW=1 to run")
    for item in items:
        if "slow" in item.keywords and HERE in Path(item.path).parents:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)
