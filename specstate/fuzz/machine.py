"""The Hypothesis state machine: a thin shell over :meth:`specstate.check.Run.apply`.

Every rule turns into one or more model actions and hands them to ``Run.apply``; the
invariants live in ``Run`` (checked after every step), so the machine itself asserts
nothing. A violation raises :class:`FuzzViolation` - one subclass per invariant, so that
Hypothesis's shrinker keeps "the same invariant" when it shrinks (it tells failures apart
by exception type and raising line).

Steering:

- *swarm testing*: ``initialize`` draws which optional rules this test case may use
  (bursts, aborts, EOS, oscillation, finishing everything while speculation is off);
  Hypothesis shrinks towards none of them;
- ``target()`` maximises the number of threshold crossings (switch flips) per test case;
- ``oscillate`` walks the decode batch to just above / just below the threshold;
- ``saturate`` fills the running batch to ``max_running_requests``, decodes, then queues
  one more request beside the full batch (a prefill that cannot be admitted);
- ``finish_all_while_off`` ends every running request with EOS while speculation is off;
- ``squeeze_kv`` (always on) adds a request whose prompt leaves about one decode reserve
  free (retraction while speculating, or while falling back); ``squeeze_kv_while_off``
  first grows the decode batch past the threshold (retraction while falling back);
- ``abort_running`` (with ``abort``) aborts a row of the speculating batch other than its
  last, then decodes (a request finishing between verify and ``filter_batch``);
- ``queue_beside`` (with ``oscillate``) walks the decode batch to exactly the threshold and
  queues a request admission cannot take yet, then decodes twice over the same rows (a switch
  decision that counts queued rows flips there).

A user's variant whose own code fails (it raises, or returns a value of the wrong type: a
``VariantFailure``) is not a model violation to shrink: the machine raises
:class:`UserCodeFailed`, a ``BaseException`` that Hypothesis does not catch, so the run ends at
that first occurrence and ``runner.fuzz_variant`` reports it with the actions up to it.

``DrainingMachine`` is ``SpecMachine`` plus one rule, ``drain`` (issue 41): once per test case,
every live request but a few aborted at once (the running rows only, or the queue too), no step
between, so the batch drops to or below the threshold, or empties, while the last switch decision
and the last forward stand: reachable states ``explore`` reaches by its per-request aborts that
one abort at a time missed. A machine of its own, not a rule of ``SpecMachine``: a new rule there
changes every derandomized sequence of ``pytest -m fuzz`` (tried: ``fixed-threshold`` then missed
a witness within the ``ci`` budget).

``machine_for(variant, configs=...)`` makes a subclass bound to one variant and config
strategy; ``reached`` on that class collects the witnesses of every test case it ran.
"""

from __future__ import annotations

import sys
import time
from typing import ClassVar

from hypothesis import strategies as st
from hypothesis import assume, target
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from specstate.check import Run, RunResult, StopRun
from specstate.errors import VariantFailure
from specstate.fuzz.strategies import accept_lengths, arrivals, bursts, configs, configs_for, eos_sets
from specstate.model import Abort, Action, Arrive, SpecConfig, Step, Variant, as_variant

__all__ = ["FuzzViolation", "UserCodeFailed", "violation_error", "SpecMachine", "DrainingMachine", "machine_for",
           "SWARM_KINDS", "crossings"]

#: the witnesses ``squeeze_kv`` is after
_RETRACTIONS = frozenset({"retract-during-spec", "retract-while-off"})

#: optional rules that swarm testing switches on and off per test case
SWARM_KINDS = ("burst", "abort", "eos", "oscillate", "finish-off", "saturate")


class FuzzViolation(AssertionError):
    """A step violated an invariant; ``result`` is the run up to and including that step,
    ``config`` the config before the variant's changes (what a replay starts from)."""

    def __init__(self, result: RunResult, config: SpecConfig) -> None:
        first = result.first
        super().__init__(first.describe() if first else "violation")
        self.result = result
        self.config = config


class UserCodeFailed(BaseException):
    """A user's variant failed in its own code (``error``) at the last of ``actions`` (under
    ``config``, the config before the variant's changes). A ``BaseException``, so Hypothesis
    neither catches nor shrinks it (module doc)."""

    def __init__(self, error: VariantFailure, actions: list[Action], config: SpecConfig) -> None:
        super().__init__(str(error))
        self.error, self.actions, self.config = error, actions, config


_ERRORS: dict[str, type[FuzzViolation]] = {}


def violation_error(invariant: str) -> type[FuzzViolation]:
    """The ``FuzzViolation`` subclass for one invariant (one per name, cached)."""
    if invariant not in _ERRORS:
        name = "Violation_" + invariant.replace("-", "_")
        _ERRORS[invariant] = type(name, (FuzzViolation,), {"__module__": __name__})
    return _ERRORS[invariant]


def crossings(result_decisions: list[bool]) -> int:
    """Threshold crossings: flips between consecutive decode decisions."""
    return sum(1 for a, b in zip(result_decisions, result_decisions[1:]) if a != b)


class SpecMachine(RuleBasedStateMachine):
    """One test case: a ``Run`` of ``variant`` under a drawn config, driven by rules."""

    variant: ClassVar[Variant | str] = "fixed-threshold"  #: ``machine_for`` binds the resolved object
    config_strategy: ClassVar[st.SearchStrategy[SpecConfig]] = configs()
    swarm: ClassVar[tuple[str, ...]] = SWARM_KINDS
    reached: ClassVar[set[str]] = set()
    max_crossings: ClassVar[int] = 0
    paths: ClassVar[dict[str, int]] = {}  #: how often each scheduler path ran, over every case (``check.PATHS``)
    first_violation_at: ClassVar[float | None] = None  #: ``time.perf_counter()`` of the first violation
    #: the shortest failing run seen so far, with its base config: what an interrupted run saves
    best: ClassVar[tuple[RunResult, SpecConfig] | None] = None
    #: say on stderr when the first counterexample is found (the CLI; not under pytest)
    announce: ClassVar[bool] = False
    #: report only violations of this invariant (others discard the test case); ``None``: all
    only_invariant: ClassVar[str | None] = None

    def __init__(self) -> None:
        super().__init__()
        self.run: Run | None = None
        self.base_config: SpecConfig | None = None
        self.kinds: frozenset[str] = frozenset()
        self.switches: list[bool] = []

    # -- plumbing -------------------------------------------------------------------
    @property
    def r(self) -> Run:
        assert self.run is not None, "initialize has not run"
        return self.run

    def _apply(self, action: Action) -> None:
        try:
            outcome = self.r.apply(action)
        except VariantFailure as e:
            raise UserCodeFailed(e, [*self.r.actions, action], self.base_config or self.r.config) from None
        except StopRun:
            result = self.r.result()
            assert result.first is not None
            cls = type(self)
            if cls.only_invariant is not None:
                assume(cls.only_invariant in {v.invariant for v in result.violations})
            if cls.first_violation_at is None:
                cls.first_violation_at = time.perf_counter()
                if cls.announce:
                    print(f"specstate: fuzz {self.r.variant.name}: found a counterexample ({result.first.invariant}, "
                          f"{len(result.actions)} actions); shrinking it (SIGINT / SIGTERM keeps what is found so far)",
                          file=sys.stderr, flush=True)
            if cls.best is None or len(result.actions) < len(cls.best[0].actions):
                cls.best = (result, self.base_config or self.r.config)
            raise violation_error(result.first.invariant)(result, self.base_config or self.r.config) from None
        d = outcome.state.decisions
        if outcome.batch_kind == "decode" and d and d[-1].step_index == outcome.state.step_index:
            self.switches.append(d[-1].speculate)

    def _threshold(self) -> int:
        """The decode batch size above which speculation is off (the variant's family decides)."""
        from specstate.model.families import get_family

        cfg = self.r.config
        return get_family(self.r.variant.family_name).switch_threshold(cfg) or cfg.max_running_requests

    def _speculating(self) -> bool | None:
        return self.switches[-1] if self.switches else None

    def _step(self, data: st.DataObject, eos: tuple[int, ...] = ()) -> None:
        cfg = self.r.config
        accept = data.draw(accept_lengths(max_accept=cfg.max_accept_len, max_rows=max(self.r.decode_rows(), 1)),
                           label="accept")
        self._apply(Step(accept=accept, eos=eos))

    def _running_rids(self) -> list[int]:
        s = self.r.state
        return [r for r in s.running.rids if s.req(r).live]

    # -- rules ----------------------------------------------------------------------
    @initialize(data=st.data())
    def start(self, data: st.DataObject) -> None:
        cls = type(self)
        self.base_config = data.draw(cls.config_strategy, label="config")
        self.kinds = frozenset(k for k in cls.swarm if data.draw(st.booleans(), label=f"swarm {k}"))
        self.run = Run(self.base_config, cls.variant)

    @rule(arrival=arrivals())
    def arrive(self, arrival: Arrive) -> None:
        self._apply(arrival)

    @precondition(lambda self: self.run is not None and bool(self.run.state.reqs))
    @rule(data=st.data())
    def arrive_sharing(self, data: st.DataObject) -> None:
        """A prompt that starts with an earlier request's prompt prefix: a radix-cache hit
        (or a node split) when that prefix is still in the tree."""
        s = self.r.state
        of = data.draw(st.integers(0, len(s.reqs) - 1), label="prefix_of")
        shared = data.draw(st.integers(1, s.req(of).prompt_len), label="shared_len")
        self._apply(Arrive(shared + data.draw(st.integers(0, 8), label="suffix"),
                           data.draw(st.integers(1, 16), label="max_new"), of, shared))

    @precondition(lambda self: "burst" in self.kinds)
    @rule(burst=bursts())
    def arrive_burst(self, burst: list[Arrive]) -> None:
        for a in burst:
            self._apply(a)

    @precondition(lambda self: "abort" in self.kinds and self.run is not None and bool(self.run.state.reqs))
    @rule(which=st.integers(0, 63))
    def abort(self, which: int) -> None:
        s = self.r.state
        live = [r.rid for r in s.live_reqs()] or list(range(len(s.reqs)))
        self._apply(Abort(live[which % len(live)]))

    @precondition(lambda self: "abort" in self.kinds and self._speculating() is True and len(self._running_rids()) >= 2)
    @rule(data=st.data(), which=st.integers(0, 63))
    def abort_running(self, data: st.DataObject, which: int) -> None:
        """Abort a row of the speculating batch other than its last (the ``abort`` rule mostly
        hits queued requests), then decode: the request finishes between the last verify and the
        next ``filter_batch``, whose rows must follow it (``spec-info-rows``; dropping the last
        row is the one case a filter that truncates gets right)."""
        running = self._running_rids()[:-1]
        self._apply(Abort(running[which % len(running)]))
        self._step(data)

    @precondition(lambda self: "oscillate" in self.kinds and self.run is not None
                  and self.r.decode_rows() <= self._threshold())
    @rule(data=st.data())
    def queue_beside(self, data: st.DataObject) -> None:
        """Walk the decode batch to exactly the threshold and decode (speculation on), then queue
        a request admission cannot take yet (its prompt just over the free and evictable slots,
        within what one request may hold) and decode twice over the same rows: the switch
        decision must not count the queued row (``stable-switch-decision``)."""
        thr = self._threshold()
        for _ in range(max(thr - self.r.decode_rows(), 0)):
            self._apply(Arrive(data.draw(st.integers(1, 4), label="prompt"), data.draw(st.integers(6, 16), label="max_new")))
        self._step(data)
        self._step(data)
        s, cfg = self.r.state, self.r.config
        prompt = int(s.kv_available + s.tree.evictable) + 1 + data.draw(st.integers(0, 3), label="over")
        if prompt < cfg.max_req_input_len:  # longer ones are cut to one token at arrival (validate_input_length)
            self._apply(Arrive(prompt, 2))
        self._step(data)
        self._step(data)

    @rule(data=st.data())
    def step(self, data: st.DataObject) -> None:
        eos = data.draw(eos_sets(self._running_rids()), label="eos") if "eos" in self.kinds else ()
        self._step(data, eos)

    @precondition(lambda self: "oscillate" in self.kinds)
    @rule(data=st.data(), over=st.integers(0, 2))
    def oscillate(self, data: st.DataObject, over: int) -> None:
        """Walk the decode batch to just above the threshold, or back to just within it."""
        rows, thr = self.r.decode_rows(), self._threshold()
        if rows <= thr:
            for _ in range(thr + 1 + over - rows):
                self._apply(Arrive(data.draw(st.integers(1, 12), label="prompt"),
                                   data.draw(st.integers(2, 10), label="max_new")))
            self._step(data)
        else:
            self._step(data, tuple(self._running_rids()[thr - over:]) if thr > over else ())

    @precondition(lambda self: "saturate" in self.kinds)
    @rule(data=st.data())
    def saturate(self, data: st.DataObject) -> None:
        cap = self.r.config.max_running_requests
        for _ in range(max(cap - len(self.r.state.live_reqs()), 0)):
            self._apply(Arrive(data.draw(st.integers(1, 8), label="prompt"), data.draw(st.integers(4, 16), label="max_new")))
        self._step(data)
        self._step(data)
        self._apply(Arrive(data.draw(st.integers(1, 8), label="prompt"), data.draw(st.integers(1, 16), label="max_new")))
        self._step(data)

    @precondition(lambda self: "finish-off" in self.kinds and self.run is not None and self.switches[-1:] == [False])
    @rule(data=st.data())
    def finish_all_while_off(self, data: st.DataObject) -> None:
        """EOS for every live request (queued ones too, so no prefill joins the decode batch)."""
        self._step(data, tuple(r.rid for r in self.r.state.live_reqs()))

    @precondition(lambda self: self.run is not None and bool(self.switches))
    @rule(data=st.data())
    def squeeze_kv(self, data: st.DataObject) -> None:
        """Retraction in whichever mode the batch is in (see :meth:`_squeeze`)."""
        self._squeeze(data)

    @precondition(lambda self: self.run is not None and self._threshold() < self.r.config.max_running_requests)
    @rule(data=st.data())
    def squeeze_kv_while_off(self, data: st.DataObject) -> None:
        """Grow the decode batch past the threshold (short prompts, long outputs), decode
        with speculation off, then squeeze: retraction while falling back."""
        for _ in range(max(self._threshold() + 1 - self.r.decode_rows(), 0)):
            self._apply(Arrive(data.draw(st.integers(1, 4), label="prompt"), data.draw(st.integers(8, 24), label="max_new")))
        self._step(data)
        self._step(data)
        self._squeeze(data)

    def _squeeze(self, data: st.DataObject) -> None:
        """An arrival that admission just lets in (``PrefillAdder``'s ``rem_total_tokens``:
        free + evictable slots minus ``new_token_ratio`` x the running rows' remaining tokens),
        leaving less than the next decode's reserve of ``max(steps * topk, draft tokens)``
        slots per request: ``check_decode_mem`` fails and ``retract_decode`` runs."""
        s = self.r.state
        before = len(self.r.witnesses.reached & _RETRACTIONS)
        offset = sum(min(s.req(r).max_new_tokens - s.req(r).output_len, 4096) * s.new_token_ratio for r in s.running.rids)
        room = int(s.kv_available + s.tree.evictable - offset) - 4
        slack = data.draw(st.integers(0, 3), label="slack")
        self._apply(Arrive(min(max(1, room - slack), 512), 2))
        for _ in range(3):  # its prefill, then decodes until the memory check fails
            self._step(data)
            if len(self.r.witnesses.reached & _RETRACTIONS) > before:
                break

    def teardown(self) -> None:
        if self.run is None:
            return
        n = crossings(self.switches)
        target(float(n), label="threshold crossings")
        cls = type(self)
        cls.reached |= self.run.witnesses.reached
        cls.max_crossings = max(cls.max_crossings, n)
        for path, count in self.run.result().paths.items():  # the scheduler paths this case ran (check.PATHS)
            cls.paths[path] = cls.paths.get(path, 0) + count


class DrainingMachine(SpecMachine):
    """``SpecMachine`` with the ``drain`` rule (a swarm kind of its own; see the module doc)."""

    swarm: ClassVar[tuple[str, ...]] = SWARM_KINDS + ("drain",)

    def __init__(self) -> None:
        super().__init__()
        self.drained = False  #: ``drain`` ran (once per test case)

    @precondition(lambda self: "drain" in self.kinds and not self.drained and self.run is not None
                  and bool(self.run.state.live_reqs()))
    @rule(data=st.data())
    def drain(self, data: st.DataObject) -> None:
        """Abort every live request but the first ``keep`` (the running rows only, or the queued
        ones too), one ``Abort`` after the other with no step between: clients disconnecting at once."""
        self.drained = True
        queue_too = data.draw(st.booleans(), label="queue too")
        rids = [r.rid for r in self.r.state.live_reqs()] if queue_too else self._running_rids()
        keep = data.draw(st.integers(0, self._threshold() + 1), label="keep")
        for rid in rids[keep:]:
            self._apply(Abort(rid))


def machine_for(variant: Variant | str, *, config_strategy: st.SearchStrategy[SpecConfig] | None = None,
                swarm: tuple[str, ...] | None = None, seed: int | None = None,
                only_invariant: str | None = None, announce: bool = False,
                base: type[SpecMachine] = SpecMachine) -> type[SpecMachine]:
    """A ``base`` subclass bound to ``variant`` (and a Hypothesis seed, if given); ``swarm``:
    the optional rules it draws from (default: ``base.swarm``)."""
    variant = as_variant(variant)
    attrs: dict[str, object] = {"variant": variant, "swarm": swarm if swarm is not None else base.swarm, "reached": set(),
                                "max_crossings": 0, "paths": {},
                                "first_violation_at": None, "only_invariant": only_invariant, "best": None, "announce": announce,
                                "config_strategy": config_strategy if config_strategy is not None else configs_for(variant)}
    cls = type(f"{base.__name__}_{variant.name.replace('-', '_').replace(':', '_').replace('.', '_')}", (base,), attrs)
    if seed is not None:
        cls._hypothesis_internal_use_seed = seed  # type: ignore[attr-defined]  # honoured by run_state_machine_as_test
    return cls
