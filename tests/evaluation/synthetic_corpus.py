"""A synthetic test set for the evaluation tests: references from a small vocabulary, and systems that
replace a share of their words (a worse system for a higher share)."""

from __future__ import annotations

import random

WORDS = [
    "the",
    "a",
    "cat",
    "dog",
    "sat",
    "ran",
    "on",
    "under",
    "mat",
    "house",
    "red",
    ";",
    ".",
    ",",
]


def corpus(n: int = 120, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 15))) for _ in range(n)]


def corrupt(lines: list[str], rate: float, seed: int) -> list[str]:
    """Replace each word with probability ``rate`` (a worse system for a higher rate)."""
    rng = random.Random(seed)
    return [
        " ".join(rng.choice(WORDS) if rng.random() < rate else w for w in line.split())
        for line in lines
    ]


REFS = corpus()
GOOD = corrupt(REFS, 0.15, seed=1)
BAD = corrupt(REFS, 0.45, seed=2)
