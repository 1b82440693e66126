"""Workloads that put the real scheduler under memory pressure.

Pure Python (no torch, no sglang). The threshold switch exists for high load, and high load
is where the KV pool runs out; these generators make the real sglang 0.5.12 scheduler do what
it does there, on a small pool (``--max-total-tokens`` 2048-8192):

- ``retract``: a few long decoders, then a late burst (admitted boldly once
  ``new_token_ratio`` has decayed) and a second wave, whose KV demand is several times the
  pool, so the decode memory check fails and ``ScheduleBatch.retract_decode`` takes requests
  back (``new_token_ratio`` reset, re-queued requests re-prefilled over their outputs);
- ``chunk``: prompts several times ``chunked_prefill_size`` long, with late joiners while
  the chunked request is in flight (``Scheduler.chunked_req``, ``PrefillAdder.add_chunked_req``);
- ``prefix``: prompts that share a group prefix (full or partial, so radix nodes split),
  in repeated waves so finished requests' KV is reused from the evictable part of the tree;
- ``abort``: aborts at random times while the batch is above the threshold (fallback steps);
- ``mixed``: all of the above at once.

Every workload is deterministic in ``(kind, seed, pool)``; rids have one fixed width so no
rid is a prefix of another (sglang aborts by rid prefix).
"""

from __future__ import annotations

import random
from typing import Callable

from specstate.integration.workloads import Request, Workload

__all__ = ["KINDS", "pressure_workload", "pressure_workloads"]


def _rid(tag: str, wave: int, i: int) -> str:
    return f"{tag}w{wave:02d}r{i:03d}"


def _delay(rng: random.Random, p: float, most: float = 0.3) -> float:
    return round(rng.uniform(0.0, most), 3) if rng.random() < p else 0.0


def _retract(rng: random.Random, tag: str, pool: int) -> list[tuple[Request, ...]]:
    """A few long decoders first (``new_token_ratio`` decays while they run, so admission
    grows bolder), then a late burst that the decayed ratio over-admits: retraction."""
    big = pool >= 4096
    long_n = rng.randint(3, 5)
    late = rng.uniform(0.8, 1.6)
    first = [Request(rid=_rid(tag, 0, i), prompt_len=rng.randint(20, 80), max_new_tokens=rng.randint(400, 700))
             for i in range(long_n)]
    first += [Request(rid=_rid(tag, 0, long_n + i), prompt_len=rng.randint(30, 120),
                      max_new_tokens=rng.randint(60, 160 if big else 120), delay_s=round(late + rng.uniform(0, 0.2), 3))
              for i in range(rng.randint(28, 44) if big else rng.randint(20, 36))]
    waves = [tuple(first)]
    for wi in range(1, 2):
        n = rng.randint(36, 48) if big else rng.randint(24, 40)
        waves.append(tuple(
            Request(rid=_rid(tag, wi, i), prompt_len=rng.randint(40, 150) if big else rng.randint(20, 120),
                    max_new_tokens=rng.randint(50, 160) if big else rng.randint(30, 100), delay_s=_delay(rng, 0.3))
            for i in range(n)))
    return waves


def _chunk(rng: random.Random, tag: str, pool: int) -> list[tuple[Request, ...]]:
    longest = min(pool // 3, 900)
    waves = []
    for wi in range(rng.randint(2, 4)):
        n = rng.randint(2, 10)
        waves.append(tuple(
            Request(rid=_rid(tag, wi, i),
                    prompt_len=rng.randint(longest // 3, longest) if rng.random() < 0.6 else rng.randint(8, 64),
                    max_new_tokens=rng.randint(4, 48), delay_s=_delay(rng, 0.5, 0.2))
            for i in range(n)))
    return waves


def _prefix_req(rng: random.Random, rid: str, groups: dict[str, int]) -> Request:
    mnt = rng.randint(8, 80)
    if rng.random() < 0.2:
        return Request(rid=rid, prompt_len=rng.randint(10, 80), max_new_tokens=mnt, delay_s=_delay(rng, 0.3))
    g = rng.choice(sorted(groups))
    shared = groups[g] if rng.random() < 0.6 else rng.randint(groups[g] // 2, groups[g])
    return Request(rid=rid, prompt_len=shared + rng.randint(2, 60), max_new_tokens=mnt, delay_s=_delay(rng, 0.3),
                   prefix_group=g, shared_len=shared)


def _prefix(rng: random.Random, tag: str, pool: int) -> list[tuple[Request, ...]]:
    most = 200 if pool < 4096 else 260
    groups = {f"{tag}g{k}": rng.randint(80, most) for k in range(rng.randint(2, 3))}
    return [tuple(_prefix_req(rng, _rid(tag, wi, i), groups) for i in range(rng.randint(6, 30)))
            for wi in range(rng.randint(2, 4))]


def _abort(rng: random.Random, tag: str, pool: int) -> list[tuple[Request, ...]]:
    waves = []
    for wi in range(rng.randint(2, 3)):
        waves.append(tuple(
            Request(rid=_rid(tag, wi, i), prompt_len=rng.randint(16, 120), max_new_tokens=rng.randint(20, 120),
                    delay_s=_delay(rng, 0.2),
                    abort_after_s=round(rng.uniform(0.02, 0.5), 3) if rng.random() < 0.3 else None)
            for i in range(rng.randint(8, 30))))
    return waves


def _mixed(rng: random.Random, tag: str, pool: int) -> list[tuple[Request, ...]]:
    makers = [_retract, _chunk, _prefix, _abort]
    waves: list[tuple[Request, ...]] = []
    for k in range(2):
        part = rng.choice(makers)(rng, f"{tag}{k}", pool)
        waves.extend(part[:2])
    return waves


KINDS: dict[str, Callable[[random.Random, str, int], list[tuple[Request, ...]]]] = {
    "retract": _retract, "chunk": _chunk, "prefix": _prefix, "abort": _abort, "mixed": _mixed,
}


def pressure_workload(kind: str, seed: int, pool: int) -> Workload:
    """One workload of ``kind`` for a KV pool of ``pool`` token slots."""
    if kind not in KINDS:
        raise ValueError(f"Expected a pressure kind in {sorted(KINDS)} but got {kind!r}")
    rng = random.Random(f"specstate-pressure:{kind}:{seed}:{pool}")
    tag = f"{kind[0]}{seed:02d}"
    waves = KINDS[kind](rng, tag, pool)
    return Workload(name=f"pressure-{kind}-{seed}", waves=tuple(waves), seed=1000 + seed,
                    meta={"generator": "pressure_workload", "kind": kind, "seed": seed, "pool": pool})


def pressure_workloads(seed: int, pool: int, per_kind: dict[str, int]) -> list[Workload]:
    """``per_kind[k]`` workloads of each kind, seeds ``seed, seed + 1, ...``."""
    return [pressure_workload(kind, seed + i, pool) for kind, n in per_kind.items() for i in range(n)]


def with_prefixes(w: Workload, seed: int, *, share: float = 0.5) -> Workload:
    """``w`` with about ``share`` of its longer prompts moved into two prefix groups (a
    fuzzer-generated workload made to hit the radix cache too)."""
    rng = random.Random(f"specstate-prefixes:{w.name}:{seed}")
    bases = {"g0": rng.randint(24, 120), "g1": rng.randint(24, 120)}
    waves = []
    for wave in w.waves:
        reqs = []
        for r in wave:
            g = rng.choice(sorted(bases))
            if r.prompt_len > 8 and rng.random() < share:
                shared = min(bases[g], r.prompt_len - 2)
                r = Request(rid=r.rid, prompt_len=r.prompt_len, max_new_tokens=r.max_new_tokens,
                            abort_after_s=r.abort_after_s, delay_s=r.delay_s, prefix_group=f"{w.name}{g}",
                            shared_len=shared)
            reqs.append(r)
        waves.append(tuple(reqs))
    return Workload(name=w.name, waves=tuple(waves), seed=w.seed, meta=dict(w.meta, prefixes=True))
