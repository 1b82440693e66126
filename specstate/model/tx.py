"""``Tx``: one step in progress, as a value.

Operations take a ``Tx`` and return a new one: the state so far, the forwards run and the
events logged during this step, and the step's worker outcomes (accept lengths, EOS).
Nothing is mutated; a step is the fold of its operations over the starting ``Tx``.
"""

from __future__ import annotations

from dataclasses import dataclass
from specstate.model.values import evolve

from specstate.model.batch import ScheduleBatch
from specstate.model.config import SpecConfig
from specstate.model.records import Event, ForwardRecord
from specstate.model.request import Req
from specstate.model.state import ModelState

__all__ = ["Tx"]


@dataclass(frozen=True)
class Tx:
    state: ModelState
    accept: tuple[int, ...] = ()  #: accept length per decode row (``Step.accept``)
    forwards: tuple[ForwardRecord, ...] = ()
    events: tuple[Event, ...] = ()
    #: v2: the rows of last iteration's batch whose result this iteration processed
    processed: tuple[int, ...] = ()

    def with_state(self, state: ModelState) -> "Tx":
        return evolve(self, state=state)

    def with_running(self, running: ScheduleBatch) -> "Tx":
        return evolve(self, state=self.state.evolve(running=running))

    def with_reqs(self, *reqs: Req) -> "Tx":
        return evolve(self, state=self.state.with_reqs(reqs))

    def record(self, fr: ForwardRecord) -> "Tx":
        """Log a forward; a graph replay's writes land in the static buffers' state."""
        state = self.state
        if fr.graph is not None and fr.graph.writes:
            state = state.evolve(graphs=state.graphs.written(fr.graph.writes))
        return evolve(self, forwards=self.forwards + (fr,), state=state)

    def with_processed(self, rids: tuple[int, ...]) -> "Tx":
        return evolve(self, processed=rids)

    def log(self, kind: str, detail: str, rid: int | None = None) -> "Tx":
        return evolve(self, events=self.events + (Event(kind, detail, rid),))

    @property
    def config(self) -> SpecConfig:
        return self.state.config

    def accept_len(self, row: int) -> int:
        """Accept length for decode row ``row``, clipped to ``1 .. num_steps + 1``."""
        a = self.accept[row] if row < len(self.accept) else 1
        return max(1, min(a, self.state.config.max_accept_len))
