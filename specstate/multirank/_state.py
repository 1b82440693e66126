"""The state of every rank, composed of the single-rank model's states.

Owns: one ``ModelState`` per DP rank (each the whole single-rank model: queue, running batch,
``spec_info``, KV pool, radix tree, graph buffers; untouched by this package), which rank holds
each request (global request id -> rank and the rank's own request id), and the round-robin
counter of the data-parallel controller.

Identity kept: every global request id names exactly one request of exactly one rank, and the
ranks' request ids are dense (``ranks[r].reqs[local].rid == local``), so
``sum(len(rank.reqs)) == len(owner)``.

Mirrors sglang 0.5.12 ``managers/data_parallel_controller.py::DataParallelController.round_robin_scheduler``
(every worker alive: request ``i`` goes to rank ``(counter + i) % dp_size``, the counter kept
across requests), ``DPBudget`` (the per-rank request counts of ``--load-balance-method
total_requests``; ``_routing.py``) and the per-rank ``Scheduler`` each DP rank runs (``scheduler.py::Scheduler``).
"""

from __future__ import annotations

from dataclasses import dataclass

from specstate.model.config import SpecConfig
from specstate.model.state import ModelState
from specstate.model.step import initial_state

__all__ = ["MultiState", "initial_multi_state"]


@dataclass(frozen=True)
class MultiState:
    ranks: tuple[ModelState, ...]  #: per DP rank, the single-rank model's state
    owner: tuple[tuple[int, int], ...] = ()  #: global rid -> (rank, the rank's rid)
    round_robin_counter: int = 0  #: ``DataParallelController.round_robin_counter``
    step_index: int = 0  #: actions applied so far
    #: ``DPBudget.total_requests`` per rank (``--load-balance-method total_requests``; empty otherwise)
    budget: tuple[int, ...] = ()

    def local(self, rid: int) -> tuple[int, int]:
        return self.owner[rid]

    def global_rid(self, rank: int, local: int) -> int:
        return self._index()[(rank, local)]

    def _index(self) -> dict[tuple[int, int], int]:
        d = self.__dict__
        got = d.get("_idx")
        if got is None or got[0] is not self.owner:
            got = d["_idx"] = (self.owner, {o: g for g, o in enumerate(self.owner)})
        return got[1]

    def is_quiet(self) -> bool:
        return all(r.is_idle() for r in self.ranks)


def initial_multi_state(config: SpecConfig, dp_size: int) -> MultiState:
    return MultiState(tuple(initial_state(config) for _ in range(dp_size)))
