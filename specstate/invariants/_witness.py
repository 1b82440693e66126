"""``sometimes`` properties: witnesses that a run reached the interesting states.

A fuzz run that reaches none of the witnesses it was asked for failed to explore the
switch and says which ones it missed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specstate.model.step import StepOutcome

__all__ = ["WITNESSES", "WitnessTracker", "outcome_witnesses"]

WITNESSES: dict[str, str] = {
    "crossed-up": "a decode batch grew past the threshold: speculate, then not",
    "crossed-down": "a decode batch shrank back within the threshold: not, then speculate",
    "spec-resumed": "a request that decoded with speculation off later drafted again",
    "idle-then-arrivals": "the scheduler idled, then prefilled new arrivals",
    "retract-during-spec": "a retraction while speculation was on",
    "retract-while-off": "a retraction while speculation was off (the fallback decoding)",
    "padded-graph-batch": "a graph replay padded the batch to a larger captured size",
    "padded-after-larger": "a padded graph replay after a larger one under the same captured size (its padding rows held that one's rows)",
    "all-finished-while-off": "every request of a decode batch finished while speculation was off",
}


@dataclass
class WitnessTracker:
    """Feeds on step outcomes; ``reached`` is the set of witnesses seen so far."""

    reached: set[str] = field(default_factory=set)
    _off_rids: set[int] = field(default_factory=set)
    _last_speculate: bool | None = None
    _idled: bool = False

    def observe(self, o: StepOutcome) -> None:
        before = self._last_speculate  # the decision in force when this step's retraction ran
        d = o.state.decisions
        if o.batch_kind == "decode" and d and d[-1].step_index == o.state.step_index:
            on = d[-1].speculate
            if self._last_speculate is True and not on:
                self.reached.add("crossed-up")
            if self._last_speculate is False and on:
                self.reached.add("crossed-down")
            if on and self._off_rids & set(d[-1].rids) and any(f.phase == "draft" for f in o.forwards):
                self.reached.add("spec-resumed")
            if not on:
                self._off_rids |= set(d[-1].rids)
                if all(o.state.req(r).done for r in d[-1].rids):
                    self.reached.add("all-finished-while-off")
            self._last_speculate = on
        if any(e.kind == "retract" for e in o.events):
            if self._last_speculate is not False:
                self.reached.add("retract-during-spec")
            if False in (before, self._last_speculate):
                self.reached.add("retract-while-off")
        if any(f.graph is not None and f.graph.padding_dirty for f in o.forwards):
            self.reached.add("padded-after-larger")
        if any(f.graph is not None and f.graph.padded_bs != f.graph.raw_bs for f in o.forwards):
            self.reached.add("padded-graph-batch")
        if o.batch_kind == "idle":
            self._idled = True
        elif o.batch_kind == "prefill" and self._idled:
            self.reached.add("idle-then-arrivals")

    def missing(self, wanted: set[str] | None = None) -> set[str]:
        return (set(WITNESSES) if wanted is None else wanted) - self.reached


def outcome_witnesses(o: StepOutcome) -> set[str]:
    """The witnesses one step shows on its own (for breadth-first exploration, where there
    is no single run to track): padded replays, and retractions by the decision in force
    (the last decision of ``o.before``, or this step's)."""
    out: set[str] = set()
    graphs = [f.graph for f in o.forwards if f.graph is not None]
    if any(g.padded_bs != g.raw_bs for g in graphs):
        out.add("padded-graph-batch")
    if any(g.padding_dirty for g in graphs):
        out.add("padded-after-larger")
    if any(e.kind == "retract" for e in o.events):
        decided = [d.speculate for d in (o.before.decisions[-1:] + o.state.decisions[-1:])]
        out.add("retract-while-off" if False in decided else "retract-during-spec")
    return out
