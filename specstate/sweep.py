"""The seed's concurrency sweep, shared by both families' scenario lists.

``seed_sweep`` plays concurrency levels C = 1, 2, 5, 10, 30, 70, 100, 250: each level's C
requests (prompts of 56-72 tokens, ``max_new_tokens`` 16-48) arrive together and run until all
finish, then the scheduler idles one step. Accept lengths are drawn from 1 .. steps + 1. All
randomness comes from the one ``random.Random`` given. ``specstate.scenarios`` (the v1 list and
the registry) and ``specstate.scenarios_v2`` (``adaptive-sweep``) both play it; it lives here,
below both, so that neither imports the other for it.
"""

from __future__ import annotations

import random
from typing import Callable

from specstate.check import Run, steps_until_idle
from specstate.model import Arrive, SpecConfig, Step

__all__ = ["SEED_SWEEP_LEVELS", "accepts", "seed_sweep"]

SEED_SWEEP_LEVELS = (1, 2, 5, 10, 30, 70, 100, 250)


def accepts(rng: random.Random, cfg: SpecConfig) -> Callable[[int], list[int]]:
    """Per-row accept lengths, each drawn from 1 .. ``cfg.max_accept_len``."""
    return lambda rows: [rng.randint(1, cfg.max_accept_len) for _ in range(rows)]


def seed_sweep(run: Run, rng: random.Random) -> None:
    """The seed's sweep over ``SEED_SWEEP_LEVELS`` (see the module docstring)."""
    for c in SEED_SWEEP_LEVELS:
        run.mark(f"C={c}")
        for _ in range(c):
            run.apply(Arrive(rng.randint(56, 72), rng.randint(16, 48)))
        steps_until_idle(run, accepts(rng, run.config))
        run.apply(Step())  # the scheduler idles between levels
