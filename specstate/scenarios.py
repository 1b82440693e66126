"""Built-in scenarios: scripted workloads driven through a :class:`~specstate.check.Run`.

A scenario is a function ``(run, rng)`` that applies actions; all randomness comes from the
one ``random.Random`` it is given, so a scenario, a seed and a variant give one trace.

- ``seed-sweep``: the seed's benchmark. Config: 3 steps, topk 4, 16 draft tokens, threshold
  5, ``cuda_graph_max_bs`` 16, ``max_running_requests`` 48. Concurrency C = 1, 2, 5, 10, 30,
  70, 100, 250; each level's C requests (prompts of 56-72 tokens) arrive together and run
  until all finish. ``max_new_tokens`` is drawn from 16-48 per request (the seed used 32 for
  all) so that batches also shrink back through the threshold *within* a level, while
  requests that decoded with speculation off are still running: both directions of every
  crossing. Accept lengths are drawn from 1 .. steps + 1.
- ``seed-benchmark``: the seed's benchmark as its ``160 vs 2`` implies it (``sweep.seed_benchmark``):
  one prompt of 64 tokens repeated by every request (cached from C=2 on: 2 extend tokens per
  request, EAGLE's bigram keys), ``max_new_tokens`` 32, the same levels; at each level one request
  is prefilled first and becomes the running batch, the rest are prefilled next and merged into it.
  ``seed-benchmark-split2``: the same with 2 first (the GPU workload ``seed-repeated``'s split).
- ``oscillate``: arrivals and finishes keep the decode batch hovering around the threshold;
  ``paged-oscillate`` the same at ``--page-size 16`` (the KV page invariants' story).
- one scripted scenario per known bug (``bug:<variant>``), the shortest story that makes it
  visible; used by the tests that assert which invariant catches each bug.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable

from specstate.check import Run, RunResult, StopRun, steps_until_idle
from specstate.errors import UnknownName
from specstate.model import Abort, Arrive, SpecConfig, Step, StepOutcome, Variant
from specstate.scenarios_v2 import V2_SCENARIOS  # the v2 family's scenarios
from specstate.sweep import SEED_SWEEP_LEVELS
from specstate.sweep import accepts as _accepts
from specstate.sweep import seed_benchmark as _seed_benchmark
from specstate.sweep import seed_sweep as _seed_sweep

__all__ = ["Scenario", "SCENARIOS", "get_scenario", "play_scenario", "run_scenario", "SEED_SWEEP_LEVELS", "SEED_CONFIG"]

SEED_CONFIG = SpecConfig(speculative_num_steps=3, speculative_eagle_topk=4, speculative_num_draft_tokens=16,
                         disable_batch_threshold=5, cuda_graph_max_bs=16, max_running_requests=48)


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    config: SpecConfig
    play: Callable[[Run, random.Random], None]


def _oscillate(run: Run, rng: random.Random) -> None:
    thr = run.config.disable_batch_threshold or 4
    for wave in range(12):
        n = thr + (1 if wave % 2 == 0 else -1) + rng.randint(0, 1)
        for _ in range(max(n, 1)):
            run.apply(Arrive(rng.randint(4, 24), rng.randint(2, 12)))
        for _ in range(rng.randint(2, 6)):
            run.apply(Step(accept=tuple(_accepts(rng, run.config)(run.decode_rows()))))
    steps_until_idle(run, _accepts(rng, run.config))


SMALL = SpecConfig(speculative_num_steps=2, speculative_eagle_topk=2, speculative_num_draft_tokens=4,
                   disable_batch_threshold=2, cuda_graph_max_bs=4, max_running_requests=8,
                   target_kv_pool_size=512, draft_kv_pool_size=512, chunked_prefill_size=64)


def _bug_finish_before_filter(run: Run, rng: random.Random) -> None:
    for _ in range(2):
        run.apply(Arrive(8, 20))
    run.apply(Step())  # prefill both
    run.apply(Step())  # decode with speculation (bs 2 <= threshold 2)
    run.apply(Abort(0))  # row 0 finishes outside verify
    run.apply(Step())


def _bug_mixed(run: Run, rng: random.Random) -> None:
    run.apply(Arrive(8, 20))
    run.apply(Step())
    run.apply(Step(accept=(3,)))  # verify leaves out_cache_loc with 3 accepted slots
    run.apply(Arrive(8, 20))
    run.apply(Step())  # the new prefill mixes with the running request


def _bug_kv_leak(run: Run, rng: random.Random) -> None:
    run.apply(Arrive(8, 3))
    run.apply(Step())  # prefill: 1 output token
    run.apply(Step(accept=(3,)))  # 2 more tokens finish it inside verify; rejected tail must be freed
    run.apply(Step())


def _bug_draft_kv_stale(run: Run, rng: random.Random) -> None:
    run.apply(Arrive(8, 4))
    run.apply(Arrive(8, 20))
    run.apply(Arrive(8, 20))
    run.apply(Step())  # prefill all three
    for _ in range(4):  # bs 3 > threshold 2: speculation off until request 0 finishes
        run.apply(Step())


def _bug_switch_thrash(run: Run, rng: random.Random) -> None:
    for _ in range(2):
        run.apply(Arrive(8, 30))
    run.apply(Step())
    run.apply(Step())  # decode rows {0, 1}: speculate
    run.apply(Arrive(8, 30))  # queued prefill row cannot be admitted (max_running_requests 2)
    run.apply(Step())  # same decode rows, now counted as 3 > threshold


#: a capture list with a gap (3 requests replay at 4) and a threshold above it
GAPS = SMALL.with_(cuda_graph_bs_override=(1, 4), disable_batch_threshold=4)


def _bug_stale_padding(run: Run, rng: random.Random) -> None:
    run.apply(Arrive(8, 2))
    for _ in range(3):
        run.apply(Arrive(8, 20))
    run.apply(Step())  # prefill all four
    run.apply(Step())  # draft/verify at bs 4 (unpadded); request 0 finishes; draft-extend pads 3 -> 4 (first time)
    run.apply(Step())  # draft at bs 3 under captured size 4: row 3 still holds request 3... of the bs-4 replay


def _bug_unfiltered_accept_length(run: Run, rng: random.Random) -> None:
    run.apply(Arrive(8, 20))
    run.apply(Arrive(100, 20))  # chunked: 56 of its 100 tokens fit next to the first prompt
    run.apply(Step())  # prefill [0, 1(chunk)]: a draft input with two rows
    run.apply(Step())  # the chunked request is filtered out of the merged batch (select, not truncate)


SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario("seed-sweep", "the seed's concurrency sweep C = 1..250 around threshold 5", SEED_CONFIG, _seed_sweep),
    Scenario("seed-benchmark", "the seed's benchmark: one repeated prompt, 1 request prefilled first at each level, "
             "C = 1..250 around threshold 5", SEED_CONFIG, _seed_benchmark),
    Scenario("seed-benchmark-split2", "the seed's benchmark with 2 requests prefilled first at each level (the GPU "
             "workload's split): the running batch carries 2 x 2 = 4 input ids", SEED_CONFIG,
             lambda run, rng: _seed_benchmark(run, rng, 2)),
    Scenario("oscillate", "decode batch hovering around the threshold", SMALL, _oscillate),
    Scenario("paged-oscillate", "oscillate at --page-size 16: verifies and decodes crossing page boundaries",
             SMALL.with_(page_size=16), _oscillate),
    Scenario("bug:finish-before-filter", "a running request finishes outside verify", SMALL, _bug_finish_before_filter),
    Scenario("bug:stale-graph-padding", "a batch shrinks under the same captured graph size", GAPS, _bug_stale_padding),
    Scenario("bug:unfiltered-accept-length", "a chunked request is filtered out of a prefill batch", SMALL,
             _bug_unfiltered_accept_length),
    Scenario("bug:mixed-reuses-spec-loc", "a prefill mixed into a speculative decode batch", SMALL, _bug_mixed),
    Scenario("bug:kv-leak-spec-tail", "a request finishes inside verify with rejected drafts", SMALL, _bug_kv_leak),
    Scenario("bug:draft-kv-stale-on-resume", "speculation off for some steps, then back on", SMALL, _bug_draft_kv_stale),
    Scenario("bug:switch-thrash", "a queued prefill row next to an unchanged decode batch",
             SMALL.with_(max_running_requests=2), _bug_switch_thrash),
)}
SCENARIOS.update((name, Scenario(name, summary, config, play)) for name, summary, config, play in V2_SCENARIOS)


def get_scenario(name: str) -> Scenario:
    if name not in SCENARIOS:
        raise UnknownName(f"Expected a scenario from {sorted(SCENARIOS)} but got {name!r}")
    return SCENARIOS[name]


def play_scenario(name: str, variant: Variant | str, seed: int, *,
                  on_step: Callable[[StepOutcome], None] | None = None) -> RunResult:
    """Play scenario ``name`` under ``variant`` with ``seed`` (stops at the first violation)."""
    scenario = get_scenario(name)
    run = Run(scenario.config, variant, on_step=on_step)
    try:
        scenario.play(run, random.Random(seed))
    except StopRun:
        pass
    return run.result()


def run_scenario(name: str, variant: str, seed: int, *, progress: bool = False) -> RunResult:
    """Play scenario ``name`` under ``variant`` with ``seed``; returns the ``RunResult``
    (``progress``: a step counter on an interactive stderr). ``specstate run`` and ``specstate
    reproduce --scenario`` use it (``specstate.cli.run_scenario`` is this function)."""
    from specstate.progress import progress_bar

    with progress_bar(f"{name} / {variant}", unit="step", quiet=not progress) as bar:
        return play_scenario(name, variant, seed, on_step=lambda o: bar.update(1))
