"""A plain seeded generator of random configs and action lists (no Hypothesis).

All randomness comes from one ``random.Random(seed)``, drawn in a fixed order, so a seed
gives one config and one action list on every machine and Python version that keeps
``random``'s documented sequence (``randrange`` / ``random``). The action list is state-free
(aborts name an already-arrived request, accept tuples are sized for the largest decode
batch), so the same list drives the model, a recorded trace or the real worker on a GPU.

``specstate reproduce --seed N --variant V`` (without ``--scenario``) runs
``fuzz_seed(N, V)``.
"""

from __future__ import annotations

import random

from specstate.check import RunResult, run_actions
from specstate.model import Abort, Action, Arrive, SpecConfig, Step, Variant

__all__ = ["random_config", "random_adaptive_config", "random_actions", "generate_case", "fuzz_seed",
           "DEFAULT_LENGTH"]

DEFAULT_LENGTH = 300  #: actions per generated case


def random_config(rng: random.Random) -> SpecConfig:
    """A small valid config (same ranges as ``strategies.configs``)."""
    steps = rng.randint(1, 3)
    topk = rng.randint(1, 3)
    ndt = steps + 1 if topk == 1 else rng.randint(2, min(topk + (steps - 1) * topk * topk + 1, 2 * (steps + 1) + 2))
    running = rng.randint(2, 6)
    reserve = max(steps * topk, ndt)
    pool = rng.randint(reserve * 2, reserve * 6 + 48) if rng.random() < 0.5 else 4096
    return SpecConfig(
        speculative_num_steps=steps, speculative_eagle_topk=topk, speculative_num_draft_tokens=ndt,
        disable_batch_threshold=rng.randint(1, running), cuda_graph_max_bs=rng.randint(1, 8),
        max_running_requests=running, target_kv_pool_size=pool, draft_kv_pool_size=pool,
        chunked_prefill_size=rng.choice((64, 32, 16, 8, 3)),
        cuda_graph_bs_override=rng.choice((None, None, (1, 2, 4), (1, 3), (2, 4, 8))))


def random_adaptive_config(rng: random.Random) -> SpecConfig:
    """A small valid config of the v2 family (``strategies.adaptive_configs``' ranges): slot 1
    drafts, a later slot turns drafting off."""
    import json

    steps, running = rng.randint(1, 3), rng.randint(2, 6)
    off_at = rng.randint(2, running)
    slots = {"1": {"candidate_steps": [rng.choice((1, 2, 3))]}, str(off_at): {"candidate_steps": rng.choice(([0], [0, 1]))}}
    cfg = {"warmup_batches": rng.randint(0, 3), "update_interval": rng.randint(1, 3), **slots}
    slots["1"]["candidate_steps"] = [steps]  # sglang 0.5.17 starts only on its largest candidate (model/sglang_0_5_17/start.py)
    pool = rng.randint(40, 120) if rng.random() < 0.5 else 4096
    return SpecConfig(
        speculative_num_steps=steps, speculative_eagle_topk=1, speculative_num_draft_tokens=steps + 1,
        disable_batch_threshold=None, cuda_graph_max_bs=rng.randint(1, 8), max_running_requests=running,
        target_kv_pool_size=pool, draft_kv_pool_size=pool, chunked_prefill_size=rng.choice((64, 32, 16, 8, 3)),
        cuda_graph_bs_override=rng.choice((None, None, (1, 2, 4), (1, 3), (2, 4, 8))), disable_overlap_schedule=False,
        speculative_adaptive_config=json.dumps(cfg, sort_keys=True))


def _arrive(rng: random.Random) -> Arrive:
    prompt = rng.randint(1, 16) if rng.random() < 0.7 else rng.randint(17, 96)
    return Arrive(prompt, rng.randint(1, 24))


def _step(rng: random.Random, config: SpecConfig, arrived: int, eos: bool) -> Step:
    rows = config.max_running_requests
    accept = tuple(rng.randint(1, config.max_accept_len) for _ in range(rows))
    ends = tuple(sorted({rng.randrange(arrived) for _ in range(rng.randint(1, 2))})) if eos and arrived else ()
    return Step(accept=accept, eos=ends)


def random_actions(config: SpecConfig, rng: random.Random, *, length: int = DEFAULT_LENGTH,
                   threshold: int | None = None) -> list[Action]:
    """``length`` actions: mostly steps, single arrivals, bursts sized around the
    threshold (``threshold``, else the config's), a few aborts and EOS."""
    out: list[Action] = []
    arrived = 0
    thr = threshold or config.disable_batch_threshold or config.max_running_requests
    while len(out) < length:
        x = rng.random()
        if x < 0.2 or arrived == 0:
            out.append(_arrive(rng))
            arrived += 1
        elif x < 0.28:
            n = max(1, thr + rng.randint(-1, 2))
            out.extend(_arrive(rng) for _ in range(n))
            arrived += n
        elif x < 0.32:
            out.append(Abort(rng.randrange(arrived)))
        else:
            out.append(_step(rng, config, arrived, eos=x > 0.9))
    return out[:length]


def generate_case(seed: int, *, config: SpecConfig | None = None, length: int = DEFAULT_LENGTH,
                  family: str | None = None) -> tuple[SpecConfig, list[Action]]:
    """The config (drawn first, unless given; of ``family``, by default the default variant's
    family) and actions for ``seed``; bursts are sized around the family's switch threshold."""
    from specstate.model.families import V1_FAMILY, get_family

    rng = random.Random(seed)
    fam = V1_FAMILY if family is None else get_family(family)
    cfg = config if config is not None else (random_adaptive_config(rng) if fam.adaptive else random_config(rng))
    thr = fam.switch_threshold(fam.prepare(cfg)) if fam.adaptive else None
    return cfg, random_actions(cfg, rng, length=length, threshold=thr)


def fuzz_seed(seed: int, variant: Variant | str, *, config: SpecConfig | None = None,
              length: int = DEFAULT_LENGTH) -> tuple[SpecConfig, RunResult]:
    """Run the generated case for ``seed`` under ``variant`` (stops at the first violation)."""
    from specstate.model import as_variant

    from specstate.fuzz.static import static_config

    v = as_variant(variant)
    cfg, actions = generate_case(seed, config=config, length=length, family=v.family_name)
    if config is None:  # a static variant's drawn config: the same launch without --speculative-adaptive
        cfg = static_config(cfg, v)
    return cfg, run_actions(cfg, v, actions)
