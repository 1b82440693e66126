"""The one route from a recording to a comparison, for every release: ``conform``, ``graph
--from-recording`` and the oracle's differential runs all walk it.

    loaded records (``compare.load_records``, validated once by the release's record models)
    -> ``read``: the header's config and the release's typed :class:`Replay` (the model actions
       the records replay as, and which of them the recorder logged), its recorded side read once
       (``Conformance.recorded``); records that do not fit together are the file's problem
    -> ``ModelBackend.observe``: the actions step by step on the model (``check.checked_step``),
       every invariant after every step, one ``Observation`` per logged step (the release's
       observer, ``ModelBackend.observation``)
    -> ``compare.compare`` (less what the release's crash hook excuses) -> one report (``check``).

``workload`` stops after ``read`` (``graph --from-recording``); ``observe_actions`` starts at
``ModelBackend`` with actions that are not a recording's (the oracle's differential).

What a release supplies is one :class:`Conformance` (``CONFORMANCE`` of its
``integration/sglang_X_Y_Z/conformance.py``, its adapter's ``conformance`` part): its replay type
and how records become one (``read_replay``), its config from the header, its recorded observer,
its ``ModelBackend`` (the model-side observer and the state the recording starts from) and its
verdict fields (invariants on recorded states, crash verdicts). Nothing here names a release
or imports sglang; the one record it reads is the arrival, which every recorder writes alike
(``arrival``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Container, Protocol, Sequence

from specstate.integration.backend import Observation
from specstate.integration.compare import Mismatch, compare

__all__ = ["Replay", "Conformance", "ModelBackend", "Walk", "read", "walk", "check", "workload", "observe_actions",
           "arrival"]


class Replay(Protocol):
    """A recording as the model replays it (each release's typed record: ``RecordedWorkload``,
    ``Recording17``), or a list of actions standing for one (``Conformance.from_actions``)."""

    actions: list[Any]  #: the model actions, in the order the recorder saw their causes
    rid_index: dict[str, int]  #: the recording's request ids -> the model's (arrival order)

    def tentative_idles(self) -> Container[int]:
        """Action indices before which an idle ``Step`` is tried, kept only if the model idles too."""
        ...

    def inserted_idles(self) -> int:
        """How many idle ``Step`` the replay itself put among ``actions``."""
        ...

    def logged(self) -> Callable[[int, Any, Any], bool]:
        """Whether the recorder logged the model step ``actions[index]`` (one ``Observation`` each):
        ``logged()(index, action, outcome)``."""
        ...

    def describe(self) -> str:
        """What the replay was read from, in a few words (``graph --from-recording``'s notes)."""
        ...


class ModelBackend:
    """Observations from replaying a :class:`Replay` on a variant: every action through
    ``check.checked_step``, every invariant after every step (``violations``), one
    ``Observation`` per logged step; the walk ends at the model's crash (or, ``stop_at_first``,
    at its first violation). A release subclasses it with its observer (``observation``) and the
    state its recordings start from (``initial``)."""

    name = "model"
    #: the variant when none is named (``None``: one must be)
    default_variant: str | None = None

    def __init__(self, config: Any, variant: Any = None) -> None:
        from specstate.model import as_variant

        self.config = config
        self.variant = as_variant(variant if variant is not None else self.default_variant)
        self.violations: list[Any] = []
        self.idle_steps = 0  #: tentative idle steps kept (``Replay.tentative_idles``)

    def observation(self, outcome: Any, replay: Any) -> Observation:
        """A logged model step as the release's recorder would have written it."""
        raise NotImplementedError

    def initial(self, state: Any, replay: Any) -> Any:
        """The model's state where the recording starts (by default: the fresh one)."""
        return state

    def observe(self, replay: Any, *, stop_at_first: bool = False) -> list[Observation]:
        from specstate.check import checked_step
        from specstate.invariants import check_outcome
        from specstate.model import Step, initial_state

        v = self.variant
        ops = v.ops()
        state = self.initial(initial_state(v.configure(self.config)), replay)
        tentative, logged = replay.tentative_idles(), replay.logged()
        out: list[Observation] = []
        for i, a in enumerate(replay.actions):
            if i in tentative:
                o = checked_step(state, Step(), ops, v, i)
                if o.batch_kind == "idle":
                    state = o.state
                    self.idle_steps += 1
                    self.violations.extend(check_outcome(o))
            o = checked_step(state, a, ops, v, i)
            state = o.state
            self.violations.extend(check_outcome(o))
            if logged(i, a, o):
                out.append(self.observation(o, replay))
                if o.crash is not None or (stop_at_first and self.violations):
                    break
        return out


@dataclass(frozen=True)
class Walk:
    """One recording walked against one variant: what every verdict is made of."""

    path: str
    records: Any  #: the loaded records (``specstate.schema.Recording``)
    config: Any  #: the header's ``SpecConfig``
    replay: Any  #: the release's :class:`Replay`
    variant: str
    model: list[Observation]
    real: list[Observation]
    mismatches: list[Mismatch]  #: after the release's crash hook (``Conformance.mismatches``)
    backend: ModelBackend  #: its ``violations`` and ``idle_steps``

    @property
    def real_crash(self) -> Any:
        return next((o.crash for o in self.real if o.crash), None)

    @property
    def model_crash(self) -> Any:
        return next((o.crash for o in self.model if o.crash), None)


def arrival(rid_index: dict[str, int], r: Any) -> Any:
    """An ``arrive`` record (its release's typed model: ``rid``, ``prompt_len``, ``max_new_tokens``,
    ``lcp``, ``lcp_rid``) as the model's ``Arrive``, its request numbered in ``rid_index`` (both
    recorders write it alike: ``Scheduler._add_request_to_queue``'s request, its real
    ``max_new_tokens``, and the longest prompt prefix it shares with an earlier request, which
    counts only where that request is one of this recording: the recorder remembers every prompt
    of its process)."""
    from specstate.model import Arrive

    lcp, of = int(r.lcp or 0), r.lcp_rid
    prefix_of = rid_index.get(str(of)) if lcp > 0 and of is not None else None
    rid_index[str(r.rid)] = len(rid_index)
    return Arrive(int(r.prompt_len), max(1, int(r.max_new_tokens or 1 << 20)), prefix_of,
                  min(lcp, int(r.prompt_len)) if prefix_of is not None else 0)


def _keep(mism: list[Mismatch], model: list[Observation], real: list[Observation]) -> list[Mismatch]:
    return mism


@dataclass(frozen=True)
class Conformance:
    """What one release brings to the route (module doc); every part a function of its folder."""

    #: the release's schema-level name of a replay (``report["schema"]``), from the replay
    schema: Callable[[Any], Any]
    #: the header's model config (``threshold``: the switching threshold a release's recordings lack)
    config: Callable[[dict[str, Any], int | None], Any]
    #: loaded records -> the release's typed replay
    read_replay: Callable[[Any], Any]
    #: a replay's recorded side, one ``Observation`` per logged iteration
    recorded: Callable[[Any], list[Observation]]
    #: the release's model side
    model: type[ModelBackend]
    #: model actions (not a recording's) as a replay: every ``Step`` one logged iteration
    from_actions: Callable[[list[Any]], Any]
    #: the release's own report fields (invariants on recorded states, crash verdicts, counts)
    verdict: Callable[[Walk], dict[str, Any]]
    #: the mismatches the release's crash hook keeps (by default: all)
    mismatches: Callable[[list[Mismatch], list[Observation], list[Observation]], list[Mismatch]] = field(default=_keep)

    def check(self, path: Path | str, records: Any, variant: str, threshold: int | None) -> dict[str, Any]:
        return check(path, records, variant, threshold, self)

    def workload(self, path: Path | str, records: Any, threshold: int | None) -> tuple[Any, list[Any], str]:
        return workload(path, records, threshold, self)

    def observe(self, config: Any, actions: Sequence[Any], variant: Any) -> tuple[list[Observation], list[Any]]:
        return observe_actions(self, config, actions, variant)


def read(path: Path | str, records: Any, threshold: int | None, c: Conformance) -> tuple[Any, Any, list[Observation]]:
    """The config of the header, the replay of the records and its recorded side; a header the
    model cannot run, or records that do not fit together (an iteration naming a request that
    never arrived, lists of unequal length), is a ``RecordingFormatError``."""
    from specstate.errors import InvalidConfig, RecordingFormatError

    header: Any = getattr(records, "header", None) or next((r for r in records if r.get("ev") == "header"), {})
    typed = getattr(records, "typed", None)
    if typed and header is records[0]:  # the header as its release's model validated it (a derived
        header = typed[0]  # release's own schema included): not validated again as the base's
    try:
        config = c.config(header, threshold)
    except (InvalidConfig, ValueError) as e:
        raise RecordingFormatError(f"{path}: the header's configuration is not one the model runs: {e}") from None
    try:
        replay = c.read_replay(records)
        real = c.recorded(replay)
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise RecordingFormatError(f"{path}: the records do not fit together ({type(e).__name__}: "
                                   f"{str(e)[:120]}): a request named before it arrived, or lists of unequal length") from None
    return config, replay, real


def walk(path: Path | str, records: Any, variant: str, threshold: int | None, c: Conformance) -> Walk:
    """``read``, then the model's walk and the comparison."""
    config, replay, real = read(path, records, threshold, c)
    backend = c.model(config, variant)
    model = backend.observe(replay)
    return Walk(str(path), records, config, replay, variant, model, real, c.mismatches(compare(model, real), model, real),
                backend)


def check(path: Path | str, records: Any, variant: str, threshold: int | None, c: Conformance) -> dict[str, Any]:
    """Everything for one loaded recording: conformance with ``variant`` step by step, and the
    release's verdict fields (``Conformance.verdict``)."""
    w = walk(path, records, variant, threshold, c)
    report: dict[str, Any] = {
        "file": w.path, "schema": c.schema(w.replay), "variant": variant, "iterations": len(w.real),
        "requests": len(w.replay.rid_index), "idle_steps": w.backend.idle_steps + w.replay.inserted_idles(),
        "model_invariant_violations": [v.describe() for v in w.backend.violations][:5],
        "mismatches": [m.describe() for m in w.mismatches[:5]], "mismatch_count": len(w.mismatches),
        "first_mismatch": w.mismatches[0] if w.mismatches else None,
        "real_crash": w.real_crash, "model_crash": w.model_crash}
    return {**report, **c.verdict(w)}


def workload(path: Path | str, records: Any, threshold: int | None, c: Conformance) -> tuple[Any, list[Any], str]:
    """A loaded recording as the workload the model replays (``graph --from-recording``): the
    header's config, the actions and what they were read from."""
    config, replay, _ = read(path, records, threshold, c)
    return config, list(replay.actions), replay.describe()


def observe_actions(c: Conformance, config: Any, actions: Sequence[Any], variant: Any) -> tuple[list[Observation], list[Any]]:
    """Model actions (not a recording's) through the release's model side: its observations and
    the invariant violations (the oracle's differential runs)."""
    backend = c.model(config, variant)
    return backend.observe(c.from_actions(list(actions))), backend.violations
