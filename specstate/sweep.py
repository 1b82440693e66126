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

__all__ = ["SEED_SWEEP_LEVELS", "SEED_PROMPT_LEN", "SEED_MAX_NEW", "FIRST_ARRIVALS", "accepts", "seed_sweep",
           "seed_benchmark"]

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


#: the seed's benchmark (``seed-benchmark``): one prompt, repeated by every request, and the
#: seed's ``max_new_tokens`` of 32
SEED_PROMPT_LEN = 64
SEED_MAX_NEW = 32
#: how many of a level's requests arrive before the scheduler's first iteration of the level: one
#: request of the cached prompt extends 2 tokens (EAGLE's bigram keys: ``Req.init_next_round_input``
#: matches at most ``input_len - 1`` tokens, which are ``input_len - 2`` bigram keys), so its prefill
#: batch, the running batch the others are merged into, carries ``input_ids`` of 2
FIRST_ARRIVALS = 1


def seed_benchmark(run: Run, rng: random.Random, first_arrivals: int = FIRST_ARRIVALS) -> None:
    """The seed's benchmark as its ``160 vs 2`` implies it (``../shared/reference/every-rank.md``
    §0-1): every request sends the same prompt, so from C=2 on the radix tree holds it and each
    request's prefill extends 2 tokens (the bigram keys' cap, ``FIRST_ARRIVALS``); at each level one
    request arrives first and is prefilled alone (that prefill batch becomes the running batch),
    the other C-1 arrive during it and are prefilled next, then merged into it
    (``ScheduleBatch.merge_batch`` keeps the running batch's ``input_ids``: 2 rows). Accept lengths
    drawn as in the sweep. ``first_arrivals``: how many arrive first (2: the GPU workload's split,
    whose running batch carries 2 x 2 = 4 ids)."""
    for c in SEED_SWEEP_LEVELS:
        run.mark(f"C={c}")
        first = min(c, first_arrivals)
        _arrive_repeated(run, first)
        run.apply(Step(accept=tuple(accepts(rng, run.config)(run.decode_rows()))))
        _arrive_repeated(run, c - first)
        steps_until_idle(run, accepts(rng, run.config))
        run.apply(Step())  # the scheduler idles between levels


def _arrive_repeated(run: Run, n: int) -> None:
    """``n`` requests of the one prompt (request 0's, repeated in full: ``prefix_of=0``)."""
    for _ in range(n):
        if run.state.reqs:
            run.apply(Arrive(SEED_PROMPT_LEN, SEED_MAX_NEW, prefix_of=0, shared_len=SEED_PROMPT_LEN))
        else:
            run.apply(Arrive(SEED_PROMPT_LEN, SEED_MAX_NEW))
