"""Which DP rank a request reaches: the data-parallel controller's dispatch, as a launch flag
(``--load-balance-method``) and, per request, an explicit rank.

Owns ``RoutedArrive`` (an arrival that names its rank, the request's ``routed_dp_rank``; the
deprecated ``data_parallel_rank`` is the same field), ``LOAD_BALANCE_METHODS`` (the methods the
multi-rank model runs) and the two pure functions the multi-rank step calls: ``dispatch`` (which
rank takes an arrival, and the controller's counters after it) and ``report_loads`` (the
controller's per-rank request counts after an iteration).

Mirrors sglang 0.5.12 ``managers/data_parallel_controller.py``:

- ``DataParallelController.maybe_external_dp_rank_routing``: a request with ``routed_dp_rank``
  goes to that rank, whatever the method, before the method is asked (so it moves neither the
  round-robin counter nor the budget);
- ``DataParallelController.round_robin_scheduler`` (every worker alive): the rank under
  ``round_robin_counter``, then the counter + 1 mod N;
- ``DataParallelController.total_requests_scheduler`` -> ``DPBudget.dispatch(TOTAL_REQUESTS)``:
  ``total_requests.index(min(total_requests))`` (the lowest rank among the least loaded), then
  that rank's count + 1 "as a heuristic"; ``DPBudget.update_budget``: a rank's count becomes its
  ``num_running_reqs + num_waiting_reqs`` when its load report arrives. The report rides on the
  rank's streamed output (``scheduler_output_processor_mixin.py::SchedulerOutputProcessorMixin.stream_output_generation``:
  ``get_loads``, ``len(running_batch.reqs)`` + ``len(waiting_queue)``), forwarded by the tokenizer
  manager (``tokenizer_manager.py::TokenizerManager._handle_batch_output``: ``WatchLoadUpdateReq``).
  The model takes it as arriving before the next dispatch, from every rank that ran a prefill or
  decode this iteration (an IDLE batch streams nothing), counted after the iteration: the running
  batch (a prefill's new requests are merged into it only at the next iteration, so they are not
  counted until then, as upstream's report does not count them) and the waiting queue.

``server_args.py::ServerArgs._handle_load_balance_method``: ``auto`` is ``round_robin`` outside PD
disaggregation. ``--load-balance-method`` is the shortest-queue dispatch this project's issue
names: 0.5.12 has no ``shortest_queue_scheduler``; ``total_requests`` is its shortest-queue method.
``follow_bootstrap_room`` (PD prefill only) and ``total_tokens`` are not modelled (refused, exit 2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from specstate.model import Arrive

if TYPE_CHECKING:
    from specstate.model.state import ModelState

__all__ = ["RoutedArrive", "LOAD_BALANCE_METHODS", "dispatch", "report_loads"]

#: the ``--load-balance-method`` values the model runs (``auto`` is read as ``round_robin``)
LOAD_BALANCE_METHODS = ("round_robin", "total_requests")


@dataclass(frozen=True)
class RoutedArrive:
    """An arrival with ``routed_dp_rank`` set (``io_struct.py::GenerateReqInput``: ``routed_dp_rank``)."""

    arrive: Arrive
    rank: int  #: the DP rank the request names


def dispatch(method: str, n: int, counter: int, budget: tuple[int, ...]) -> tuple[int, int, tuple[int, ...]]:
    """The rank that takes the next (unrouted) arrival, the round-robin counter and the budget after it."""
    if method == "total_requests":
        b = list(budget) if budget else [0] * n
        r = b.index(min(b))
        b[r] += 1
        return r, counter, tuple(b)
    return counter % n, (counter + 1) % n, budget


def report_loads(method: str, budget: tuple[int, ...], ranks: "tuple[ModelState, ...]",
                 streamed: tuple[bool, ...]) -> tuple[int, ...]:
    """``DPBudget.update_budget`` with the loads of the ranks that streamed output this iteration."""
    if method != "total_requests":
        return budget
    b = list(budget) if budget else [0] * len(ranks)
    for r, (s, out) in enumerate(zip(ranks, streamed)):
        if out:
            b[r] = len(s.running.rids) + len(s.waiting)
    return tuple(b)


def multi_action_to_json(a: object) -> dict[str, object]:
    """An action as a multi-rank trace holds it: a ``RoutedArrive`` is its arrival with
    ``routed_dp_rank`` (the request field's name) beside."""
    from specstate.model import action_to_json

    if isinstance(a, RoutedArrive):
        return action_to_json(a.arrive) | {"routed_dp_rank": a.rank}
    return action_to_json(a)


def multi_action_from_data(d: object) -> object:
    """``multi_action_to_json`` read back (the deprecated ``data_parallel_rank`` is the same field,
    ``io_struct.py::GenerateReqInput.normalize_batch_and_arguments`` copies it into ``routed_dp_rank``)."""
    from specstate.errors import FileFormatError
    from specstate.schema import action_from_data

    if isinstance(d, dict) and ("routed_dp_rank" in d or "data_parallel_rank" in d):
        rest = {k: v for k, v in d.items() if k not in ("routed_dp_rank", "data_parallel_rank")}
        rank = d.get("routed_dp_rank", d.get("data_parallel_rank"))
        a = action_from_data(rest)
        if not isinstance(a, Arrive) or type(rank) is not int or rank < 0:
            raise FileFormatError(f"routed_dp_rank: expected a rank (an integer >= 0) on an arrival but got {rank!r}")
        return RoutedArrive(a, rank)
    return action_from_data(d)
