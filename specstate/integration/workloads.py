"""Workloads for the real-engine replay: waves of requests, as JSON.

Pure Python (no torch, no sglang): the CPU tests and the GPU driver share it.

A workload file::

    {"name": "...", "waves": [[{"rid": "w0r0", "prompt_len": 64, "max_new_tokens": 32,
                                "abort_after_s": null}, ...], ...]}

Each wave is sent concurrently; the next wave starts when every request of the previous one
has returned. Optional per-request fields (extensions, all defaulted):

- ``delay_s``: send this request that many seconds after the wave started (a request that
  joins a running decode batch: the batch size crosses the threshold upwards mid-decode);
- ``ignore_eos`` (default true), ``temperature`` (default 0.0, greedy);
- ``input_ids``: explicit prompt; otherwise ``prompt_ids(seed, rid, prompt_len)`` makes one;
- ``prefix_group`` / ``shared_len``: the first ``shared_len`` prompt tokens are the group's
  (``prompt_ids(seed, "group:" + prefix_group, shared_len)``), so requests of one group share
  a prompt prefix (the radix cache's prefix hits); the rest is the request's own.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

__all__ = [
    "Request",
    "Workload",
    "SEED_SWEEP_CONCURRENCY",
    "VOCAB_SIZE",
    "prompt_ids",
    "prefix_collisions",
    "seed_sweep",
    "random_workload",
    "random_workloads",
    "timing_workload",
    "seed_repeated",
    "load_workload",
    "dump_workload",
]

VOCAB_SIZE = 32000
#: the seed's sweep (1..250), then down again, then up across the threshold once more
SEED_SWEEP_CONCURRENCY: tuple[int, ...] = (1, 2, 5, 10, 30, 70, 100, 250, 100, 30, 10, 5, 2, 1, 10, 30)
#: first token id used in generated prompts (0, 1, 2 are pad/bos/eos in the tiny configs)
FIRST_TOKEN = 3


@dataclass(frozen=True)
class Request:
    rid: str
    prompt_len: int
    #: ``None``: sent without a cap, so the tokenizer's total-token check (which counts the
    #: speculative reserve, ``managers/utils.py::compute_num_reserved_tokens``) is skipped and the
    #: scheduler's own clamp applies (``Scheduler.handle_generate_request``:
    #: ``max_req_len - input_len - 1``): the only way a request runs to the context cap
    max_new_tokens: int | None
    abort_after_s: float | None = None
    delay_s: float = 0.0
    ignore_eos: bool = True
    temperature: float = 0.0
    input_ids: tuple[int, ...] | None = None
    prefix_group: str | None = None
    shared_len: int = 0
    #: rid of an earlier request of the workload whose prompt's first ``shared_len`` tokens
    #: this one starts with (a model trace's ``Arrive.prefix_of``)
    prefix_of: str | None = None

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        if self.prefix_of is None:
            d.pop("prefix_of")
        if self.prefix_group is None:
            d.pop("prefix_group")
        if self.prefix_group is None and self.prefix_of is None:
            d.pop("shared_len")
        if self.input_ids is None:
            d.pop("input_ids")
        else:
            d["input_ids"] = list(self.input_ids)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Request":
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown request fields {sorted(unknown)} in {d}")
        kw = dict(d)
        if kw.get("input_ids") is not None:
            kw["input_ids"] = tuple(int(x) for x in kw["input_ids"])
            kw.setdefault("prompt_len", len(kw["input_ids"]))
        if kw.get("delay_s") is None:
            kw["delay_s"] = 0.0
        req = cls(**kw)
        if req.prompt_len < 1 or (req.max_new_tokens is not None and req.max_new_tokens < 1):
            raise ValueError(f"prompt_len and max_new_tokens must be >= 1: {d}")
        if req.input_ids is not None and len(req.input_ids) != req.prompt_len:
            raise ValueError(f"prompt_len {req.prompt_len} != len(input_ids) {len(req.input_ids)}")
        if req.prefix_group is not None and not 0 < req.shared_len < req.prompt_len:
            raise ValueError(f"shared_len must be in (0, prompt_len) for a prefix group: {d}")
        if req.prefix_of is not None and not 0 < req.shared_len <= req.prompt_len:
            raise ValueError(f"shared_len must be in (0, prompt_len] with prefix_of: {d}")
        if req.prefix_of is not None and req.prefix_group is not None:
            raise ValueError(f"a request has prefix_group or prefix_of, not both: {d}")
        return req

    def sampling_params(self) -> dict[str, Any]:
        return {
            "max_new_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "ignore_eos": self.ignore_eos,
        }


@dataclass(frozen=True)
class Workload:
    name: str
    waves: tuple[tuple[Request, ...], ...]
    seed: int = 0
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        rids = [r.rid for w in self.waves for r in w]
        if len(rids) != len(set(rids)):
            raise ValueError(f"workload {self.name}: duplicate rids")
        if any(r.abort_after_s is not None for w in self.waves for r in w):
            # sglang 0.5.12 aborts every request whose rid STARTS WITH the aborted rid
            # (Scheduler.abort_request: req.rid.startswith(recv_req.rid))
            bad = prefix_collisions(rids)
            if bad:
                raise ValueError(f"workload {self.name}: rid {bad[0][0]!r} is a prefix of {bad[0][1]!r}; an abort would hit both")

    @property
    def num_requests(self) -> int:
        return sum(len(w) for w in self.waves)

    def prompt(self, req: Request) -> list[int]:
        if req.input_ids is not None:
            return list(req.input_ids)
        if req.prefix_group is not None:
            shared = prompt_ids(self.seed, "group:" + req.prefix_group, req.shared_len)
            return shared + prompt_ids(self.seed, req.rid, req.prompt_len - req.shared_len)
        if req.prefix_of is not None:
            other = next((r for w in self.waves for r in w if r.rid == req.prefix_of), None)
            if other is None:
                raise ValueError(f"workload {self.name}: {req.rid} has prefix_of {req.prefix_of!r}, no such request")
            head = self.prompt(other)[: req.shared_len]
            return head + prompt_ids(self.seed, req.rid, req.prompt_len - len(head))
        return prompt_ids(self.seed, req.rid, req.prompt_len)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "seed": self.seed,
            "meta": self.meta,
            "waves": [[r.to_json() for r in w] for w in self.waves],
        }

    @classmethod
    def from_json(cls, d: dict[str, Any], name: str | None = None) -> "Workload":
        waves = d.get("waves")
        if not isinstance(waves, list) or not all(isinstance(w, list) for w in waves):
            raise ValueError("workload JSON needs 'waves': a list of lists of requests")
        return cls(
            name=str(d.get("name") or name or "workload"),
            waves=tuple(tuple(Request.from_json(r) for r in w) for w in waves),
            seed=int(d.get("seed", 0)),
            meta=dict(d.get("meta", {})),
        )


def prefix_collisions(rids: Iterable[str]) -> list[tuple[str, str]]:
    """Pairs (a, b) of distinct rids where ``b.startswith(a)`` (sorted order finds them all)."""
    srt = sorted(set(rids))
    return [(a, b) for a, b in zip(srt, srt[1:]) if b.startswith(a)]


def prompt_ids(seed: int, rid: str, prompt_len: int, vocab_size: int = VOCAB_SIZE) -> list[int]:
    """Deterministic prompt token ids for (seed, rid): the same on every host and Python."""
    h = hashlib.sha256(f"{seed}:{rid}".encode()).digest()
    rng = random.Random(int.from_bytes(h[:8], "little"))
    return [rng.randrange(FIRST_TOKEN, vocab_size) for _ in range(prompt_len)]


def seed_sweep(
    concurrency: Iterable[int] = SEED_SWEEP_CONCURRENCY,
    *,
    max_new_tokens: int = 32,
    prompt_len_range: tuple[int, int] = (56, 72),
    seed: int = 0,
    name: str = "seed-sweep",
) -> Workload:
    """The seed's sweep: one wave per concurrency C, C requests sent in one call,
    prompts of 56-72 tokens, max_new_tokens 32, greedy, ignore_eos."""
    rng = random.Random(seed)
    waves = []
    for wi, c in enumerate(concurrency):
        waves.append(
            tuple(
                Request(
                    rid=f"s{wi:02d}c{c:03d}r{i:03d}",
                    prompt_len=rng.randint(*prompt_len_range),
                    max_new_tokens=max_new_tokens,
                )
                for i in range(c)
            )
        )
    return Workload(name=name, waves=tuple(waves), seed=seed, meta={"concurrency": list(concurrency)})


#: the seed's benchmark up to and past the crash: one wave per concurrency, every request the same prompt
SEED_REPEATED_CONCURRENCY: tuple[int, ...] = (1, 2, 5, 10, 30, 10, 5, 2, 1)
#: at each C above the threshold, the first ``SEED_SPLIT_FIRST`` requests are sent at once and the rest
#: ``SEED_SPLIT_DELAY_S`` later: the running batch is the first ones' (a 1-token prefill of the cached
#: prompt, then speculative decodes whose draft extend leaves ``input_ids`` at sum(accept)), and the others
#: are merged into it (``ScheduleBatch.merge_batch`` keeps the running batch's ``input_ids``)
SEED_SPLIT_FIRST = 2
SEED_SPLIT_DELAY_S = 0.2


def seed_repeated(
    concurrency: Iterable[int] = SEED_REPEATED_CONCURRENCY,
    *,
    threshold: int = 5,
    prompt_len: int = 64,
    max_new_tokens: int = 32,
    seed: int = 0,
    name: str = "seed-repeated",
) -> Workload:
    """The seed's benchmark shape: one prompt repeated by every request (so after C=1 the radix
    cache holds it and each later request extends only its last tokens), waves of C requests; a
    wave above ``threshold`` arrives split, ``SEED_SPLIT_FIRST`` requests first
    (``max_new_tokens`` 4x, so they still run when the rest arrive ``SEED_SPLIT_DELAY_S`` later).
    On the seed's patch the first decode above the threshold carries the first requests'
    ``input_ids`` (2 rows: their last draft extend's accepted tokens).

    The prompts share all but their last token, which is the request's own: with one identical
    prompt, greedy decoding gives every request the same output and the radix cache keeps one
    copy of it (``RadixCache.insert`` finds the key present and frees the duplicate's slots),
    which the model cannot know (it treats every generated token as the request's own: docs/model.md,
    "What the model leaves out"). The extend is the same either way: the EAGLE bigram key of the
    63 shared tokens matches 62 of them (sglang logs ``#cached-token: 62``)."""
    shared = prompt_ids(seed, "seed-repeated-prompt", prompt_len - 1)
    waves = []
    n = 0
    for wi, c in enumerate(concurrency):
        split = c > threshold
        rids = [f"p{wi:02d}c{c:03d}r{i:03d}" for i in range(c)]
        last, n = [FIRST_TOKEN + n + i for i in range(c)], n + c  # distinct by construction
        waves.append(tuple(
            Request(rid=rid, prompt_len=prompt_len, input_ids=tuple(shared + [last[i]]),
                    max_new_tokens=max_new_tokens * (4 if split and i < SEED_SPLIT_FIRST else 1),
                    delay_s=SEED_SPLIT_DELAY_S if split and i >= SEED_SPLIT_FIRST else 0.0)
            for i, rid in enumerate(rids)))
    return Workload(name=name, waves=tuple(waves), seed=seed,
                    meta={"concurrency": list(concurrency), "repeated_prompt": True,
                          "split_first": SEED_SPLIT_FIRST, "split_delay_s": SEED_SPLIT_DELAY_S})


def random_workload(seed: int, threshold: int = 5, *, index: int = 0, max_running: int = 48) -> Workload:
    """One random workload: 2-6 waves whose sizes alternate below and above the threshold
    (so the batch crosses it both ways between waves), mixed prompt lengths and
    max_new_tokens (requests finish at different steps: the batch shrinks across the
    threshold inside a wave), some late joiners (``delay_s``) and some aborts."""
    rng = random.Random(f"specstate-random:{seed}:{index}")
    n_waves = rng.randint(2, 6)
    above = rng.random() < 0.5
    waves = []
    for wi in range(n_waves):
        if above:
            size = rng.choice(
                [rng.randint(threshold + 1, 3 * threshold), rng.randint(threshold + 1, max_running + 12)]
            )
        else:
            size = rng.randint(1, threshold)
        above = not above if rng.random() < 0.8 else above
        reqs = []
        for ri in range(size):
            r = rng.random()
            if r < 0.05:
                mnt = 1  # finishes at prefill
            elif r < 0.25:
                mnt = rng.randint(2, 8)
            else:
                mnt = rng.randint(9, 64)
            plen = rng.choice([rng.randint(1, 16), rng.randint(16, 128), rng.randint(128, 300)])
            delay = round(rng.uniform(0.0, 0.25), 3) if rng.random() < 0.3 else 0.0
            abort = round(rng.uniform(0.02, 0.4), 3) if rng.random() < 0.08 else None
            reqs.append(
                Request(
                    rid=f"x{index:03d}w{wi:02d}r{ri:03d}",
                    prompt_len=plen,
                    max_new_tokens=mnt,
                    abort_after_s=abort,
                    delay_s=delay,
                )
            )
        waves.append(tuple(reqs))
    return Workload(
        name=f"random-{seed}-{index}",
        waves=tuple(waves),
        seed=seed * 1000 + index,
        meta={"generator": "random_workload", "seed": seed, "index": index, "threshold": threshold},
    )


def random_workloads(seed: int, n: int, threshold: int = 5) -> list[Workload]:
    return [random_workload(seed, threshold, index=i) for i in range(n)]


def timing_workload(concurrency: int, *, max_new_tokens: int = 64, prompt_len: int = 64, tag: str = "") -> Workload:
    """A single wave of identical-length requests (all start and finish together), used to
    time decode steps with and without the recorder."""
    reqs = tuple(
        Request(rid=f"t{tag}c{concurrency:03d}r{i:03d}", prompt_len=prompt_len, max_new_tokens=max_new_tokens)
        for i in range(concurrency)
    )
    return Workload(name=f"timing{tag}-c{concurrency}", waves=(reqs,), seed=7, meta={"timing": True})


def load_workload(path: str) -> Workload:
    """Read and validate a workload file (``specstate.schema.parse_workload``); every problem
    is one ``WorkloadFormatError`` naming the file."""
    import os

    from specstate.errors import WorkloadFormatError
    from specstate.schema import parse_workload, read_text

    data = parse_workload(read_text(path, what="workload file", error=WorkloadFormatError), str(path))
    try:
        return Workload.from_json(data, name=os.path.splitext(os.path.basename(path))[0])
    except (ValueError, TypeError) as e:
        raise WorkloadFormatError(f"{path}: {e}") from None


def dump_workload(w: Workload, path: str) -> None:
    with open(path, "w") as f:
        json.dump(w.to_json(), f, indent=1)
