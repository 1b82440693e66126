"""Named cross-rank invariants, checked after every multi-rank iteration.

- ``rank-collectives-agree``: every rank enters the same collectives in the same order, with the
  same padding mode and the same per-rank sizes (``MLPSyncBatchInfo.all_gather``; each target
  forward's DP gather, ``layers/dp_attention.py::dp_gather_partial``: mismatched
  ``all_gather_into_tensor`` sizes hang NCCL or return garbage). All-to-all collectives
  (``target:a2a``) are compared by count only.
- ``rank-path-agrees``: every rank, idle ones included, takes the same speculative / plain /
  extend path in an iteration (every-rank.md §5: a rank that speculates and one that falls back
  enter different graphs and different collectives).
- ``rank-graph-rows``: a CUDA-graph replay's source has exactly the slice's rows on every rank
  (``cuda_graph_runner.py::DecodeInputBuffers.populate_from_forward_batch`` (0.5.12):
  ``input_ids[:raw_bs * num_tokens_per_bs].copy_(source)``; a 1-row source broadcasts silently).
- ``rank-model``: every single-rank invariant of ``specstate.invariants`` on each rank's own
  iteration (a worker crash on one rank among them).

Each violation names the invariant, the field, what was expected and what came, the step, and
the rank.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from specstate.invariants import check_outcome
from specstate.multirank._records import Collective, RankIteration

__all__ = ["RankViolation", "check_multi", "MULTI_INVARIANTS"]


@dataclass(frozen=True)
class RankViolation:
    invariant: str
    step: int  #: 1-based index of the action
    rank: int  #: the DP rank that disagrees (or that broke a single-rank invariant)
    field: str
    expected: Any
    actual: Any
    detail: str = ""
    rid: int | None = None  #: the global request concerned, if one is

    def describe(self) -> str:
        who = f" request {self.rid}" if self.rid is not None else ""
        text = f"[{self.invariant}] step {self.step} rank {self.rank}{who}: {self.field}: expected {self.expected}, got {self.actual}"
        return text + (f" ({self.detail})" if self.detail else "")

    def to_json(self) -> dict[str, Any]:
        return {"invariant": self.invariant, "step": self.step, "rank": self.rank, "rid": self.rid,
                "field": self.field, "expected": str(self.expected), "actual": str(self.actual), "detail": self.detail}


def _agreed(c: Collective) -> tuple[Any, ...]:
    return (c.kind,) if c.kind == "target:a2a" else c.signature()


def _ranks(rs: list[int]) -> str:
    return f"rank {rs[0]}" if len(rs) == 1 else (f"ranks {rs[0]}-{rs[-1]}" if rs == list(range(rs[0], rs[-1] + 1))
                                                 else "ranks " + ",".join(map(str, rs)))


def grouped(texts: list[str]) -> str:
    """``ranks 0-5: X; ranks 6-7: Y``: equal texts of consecutive ranks grouped."""
    groups: dict[str, list[int]] = {}
    for r, t in enumerate(texts):
        groups.setdefault(t, []).append(r)
    return "; ".join(f"{_ranks(rs)}: {t}" for t, rs in groups.items())


def _by_rank(it: RankIteration, i: int) -> str:
    return grouped([cs[i].describe() if i < len(cs) else "none" for cs in it.collectives])


def collectives_agree(it: RankIteration) -> list[RankViolation]:
    ref = it.collectives[0]
    for r, cs in enumerate(it.collectives[1:], start=1):
        for i in range(max(len(ref), len(cs))):
            a = ref[i] if i < len(ref) else None
            b = cs[i] if i < len(cs) else None
            if a is None or b is None or _agreed(a) != _agreed(b):
                exp = a.describe() if a else "no collective"
                got = b.describe() if b else "no collective"
                return [RankViolation("rank-collectives-agree", it.step, r, f"collectives[{i}]", exp + " (as rank 0)", got,
                                      _by_rank(it, i))]
    return []


def paths_agree(it: RankIteration) -> list[RankViolation]:
    ref = it.paths[0]
    for r, p in enumerate(it.paths[1:], start=1):
        if p.path != ref.path:
            detail = grouped([f"{q.path} ({q.batch}, {q.rows} rows)" for q in it.paths])
            return [RankViolation("rank-path-agrees", it.step, r, "path", f"{ref.path} (as rank 0)", p.path, detail)]
    return []


def graph_rows(it: RankIteration, ndt: int) -> list[RankViolation]:
    out = []
    for r, (p, cs) in enumerate(zip(it.paths, it.collectives)):
        replay = [c for c in cs if c.graph is not None]
        if replay and p.source_rows != p.rows * ndt:
            how = "broadcast silently" if p.source_rows == 1 else "raises"
            out.append(RankViolation("rank-graph-rows", it.step, r, "input_ids rows", f"{p.rows * ndt} (raw_bs {p.rows} x "
                                     f"num_tokens_per_bs {ndt})", p.source_rows,
                                     f"{replay[0].graph}: the copy {how}"))
    return out


def rank_model(mo: Any, model: Any = None) -> list[RankViolation]:  # noqa: ANN401
    """``model``: a ``MultiModel`` whose remembered checks are used (the same verdicts)."""
    out = []
    check = model.violations if model is not None else check_outcome
    for r, o in enumerate(mo.outcomes):
        if o is None:
            continue
        for v in check(o):
            rid = mo.state.global_rid(r, v.rid) if v.rid is not None else None
            out.append(RankViolation("rank-model", mo.state.step_index, r, f"{v.invariant}: {v.field}", v.expected,
                                     v.actual, v.detail, rid))
    return out


MULTI_INVARIANTS: dict[str, Callable[..., list[RankViolation]]] = {
    "rank-collectives-agree": collectives_agree,
    "rank-path-agrees": paths_agree,
    "rank-graph-rows": graph_rows,
    "rank-model": rank_model,
}


def check_multi(mo: Any, ndt: int, model: Any = None) -> list[RankViolation]:  # noqa: ANN401
    """Every violation of this multi-rank step: the cross-rank ones first, then each rank's own
    (``model``: the ``MultiModel`` that stepped, whose single-rank checks are remembered)."""
    out: list[RankViolation] = []
    it = mo.iteration
    if it is not None:
        out += collectives_agree(it) + paths_agree(it) + graph_rows(it, ndt)
    return out + rank_model(mo, model)
