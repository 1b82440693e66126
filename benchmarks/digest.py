"""The behaviour digest: one SHA-256 over everything the model shows, for checking that a speed-up
changed nothing.

``python -m benchmarks.digest`` prints one line per part and the total. It runs, for every
built-in variant of both families (aliases included):

- ``generated``: the seeded generator's cases (``fuzz.generate.generate_case``, the family's
  config drawn from each seed, 300 actions), every step's full outcome hashed (state, forwards,
  events, crash, batch, violations of every invariant);
- ``scenarios``: every scenario of the variant's family, hashed the same way, and its result
  (violations, witnesses, stats, milestones);
- ``explore``: ``fuzz.explore.explore`` over the default alphabet (v1: ``DEFAULT_EXPLORE_CONFIG``,
  v2: the family's graph config) to a small depth: state / transition counts, the counterexample,
  its violations, the witnesses and every node and edge of the explored graph;
- ``graph``: the abstract graph of ``specstate graph`` (bursts ``1,2,5``), its DOT and JSON text;
- ``trace``: the trace JSON of the first violating generated case of each bug variant.

A step's state is hashed through :func:`state_view` (a ``repr`` of every field that takes part in
equality), so a faster representation of the same values keeps the digest. The value recorded for
main before the speed work is ``MAIN_DIGEST`` (``--quick``: ``MAIN_QUICK_DIGEST``); ``tests/test_digest.py``
runs the ``--tiny`` one (a few variants and cases) against ``MAIN_TINY_DIGEST``.

Run it against another checkout with ``PYTHONPATH=that/checkout python -m benchmarks.digest``.
"""

from __future__ import annotations

import hashlib
import sys
import time
from dataclasses import fields
from typing import Any, Callable, Iterable

__all__ = ["state_view", "outcome_view", "digest_parts", "MAIN_DIGEST", "MAIN_QUICK_DIGEST", "MAIN_TINY_DIGEST"]

#: ``python -m benchmarks.digest`` on main 4b6c9e0, before the speed work
MAIN_DIGEST = ""
#: ``python -m benchmarks.digest --tiny`` (what ``tests/test_digest.py`` checks): on main 4b6c9e0 it was
#: ``30b22f99...d811``; issue 12's v2 fix (``release_kv_cache`` keeps ``Req.kv_committed_len``, 7c8499d)
#: changed v2 behaviour on purpose, and 7c8499d (before the speed work) and main after it both give:
#: ``e5b507ec...84f6``; issue 23 changed v2 behaviour on purpose (0.5.17's pending chunked abort, the
#: engine start refusing configs, ``PendingResult.launch_step``, startable generated v2 configs; the v1
#: variants' parts are unchanged: equal on main 3ec2174 and after): ``a896e65a...50ae``; then the
#: model's answer to a prompt too long for the pool changed on purpose (queued as a one-token abort,
#: ``scheduler.py::validate_input_length``, as upstream; found by the CPU oracle): only the v1
#: variants' generated seed 1 (pool 54, 31 such arrivals) changes, scenarios and explore are equal:
#: ``3689ff15...9f90``; issue 35 added the invariant ``graph-input-rows`` (more violations reported on
#: a crashing step) and the scenario ``seed-benchmark``: with both removed the digest is ``3689ff15...9f90``
#: again (checked when they were added: states, forwards, crashes unchanged), with both:
#: ``fa6ef83f...73bf``; then the running batch after a speculative decode keeps the draft extend's
#: ``input_ids`` (``EagleDraftExtendInput.prepare_extend_after_decode``, as upstream; it kept
#: verify's before): the states change on purpose, no forward reads those ids but the seed's patch:
#: ``db5b8ab2...c798``; then the scenario ``seed-benchmark-split2`` (without it: that value again):
#: ``b08511bb...cae0``; then issue 39's paged KV added the scenario ``paged-oscillate`` (page size 16;
#: the v2 variants refuse it): without it the digest is ``b08511bb...cae0`` again (checked when it was
#: added: page size 1 changed no state, forward, crash or violation); issue 39 also added
#: ``SpecConfig.speculative_adaptive`` (every config's ``repr`` and view shows it) and the scenarios
#: ``static-sweep`` and ``static-past-threshold``: with the field hidden and those two scenarios
#: removed every part is main's again (``b08511bb...cae0``, checked when they were added); with all of
#: them, the 0.5.22+ waiting-prefix refresh and the row width of the largest candidate (recomputed
#: after the merges): ``e386bae0...ab49``; then paged KV on the overlap families (the v2 variants play
#: ``paged-oscillate`` instead of refusing it) and the scenarios ``paged-adaptive`` and ``paged-context``:
#: with the three paged scenarios removed the digest is main's and this branch's alike (``d3df3b7e...1d18``,
#: checked when they were added: page size 1 changed nothing), with them:
MAIN_TINY_DIGEST = "bfb8431b1950ed8e9206572ecbdd612deb3fd472a4889dacf8f5d599b89ea61e"
#: ``python -m benchmarks.digest --quick``: ``bd3ada35...ce58`` on 4b6c9e0; on 7c8499d (issue 12's v2 change,
#: before the speed work) and on main after it (not recomputed after issue 23's v2 changes):
MAIN_QUICK_DIGEST = "b1a251eb88495319312468882cc84ad1e0f3169fb82dd0d64424cbe2fe56833c"


#: ``id(obj) -> (obj, text)`` for dataclass values already rendered (values are immutable; the
#: object is kept so that its id is not reused while the memo lives)
_MEMO: dict[int, tuple[Any, str]] = {}


#: the types ``_view`` renders as ``repr``, and whose tuples ``repr`` renders as ``_view`` would,
#: element by element (the state's token and slot rows, a request's counters: most of the calls)
_LEAF = frozenset({int, bool, float, str, bytes, type(None)})
#: a dataclass's compared fields by class (``dataclasses.fields`` builds them anew on each call)
_COMPARED: dict[type, tuple[str, ...]] = {}


def _compared(x: Any) -> tuple[str, ...]:
    names = _COMPARED.get(type(x))
    if names is None:
        names = tuple(f.name for f in fields(x) if f.compare)
        if not isinstance(x, type):  # an instance: its class's fields (a dataclass class itself is not cached)
            _COMPARED[type(x)] = names
    return names


def _view(x: Any) -> str:
    """``repr`` of a dataclass over its compared fields only (bookkeeping fields excluded)."""
    t = type(x)
    if t in _LEAF or (t is tuple and _LEAF.issuperset(map(type, x))):  # the text the branches below give
        return repr(x)
    if hasattr(x, "__dataclass_fields__"):
        hit = _MEMO.get(id(x))
        if hit is not None and hit[0] is x:
            return hit[1]
        inner = ", ".join(f"{n}={repr(v) if type(v) in _LEAF else _view(v)}"
                          for n, v in ((n, getattr(x, n)) for n in _compared(x)))
        text = f"{t.__name__}({inner})"
        _MEMO[id(x)] = (x, text)
        return text
    if isinstance(x, tuple) and hasattr(x, "_fields"):  # a named tuple renders as the dataclass it replaced
        return f"{type(x).__name__}(" + ", ".join(f"{k}={_view(v)}" for k, v in zip(x._fields, x)) + ")"
    if isinstance(x, tuple):
        return "(" + ", ".join(_view(y) for y in x) + ("," if len(x) == 1 else "") + ")"
    if isinstance(x, list):
        return "[" + ", ".join(_view(y) for y in x) + "]"
    if isinstance(x, dict):
        return "{" + ", ".join(f"{_view(k)}: {_view(v)}" for k, v in x.items()) + "}"
    return repr(x)


def state_view(state: Any) -> str:
    return _view(state)


def outcome_view(o: Any) -> str:
    from specstate.invariants import check_outcome

    viol = [v.describe() + repr(sorted(v.shapes.items())) for v in check_outcome(o)]
    return "|".join((repr(o.action), o.batch_kind, repr(o.batch_rids), repr(o.processed), _view(o.forwards),
                     _view(o.events), _view(o.crash), state_view(o.state), repr(viol)))


class _Hasher:
    def __init__(self) -> None:
        self.h = hashlib.sha256()
        self.steps = 0

    def add(self, text: str) -> None:
        self.h.update(text.encode())
        self.h.update(b"\n")

    def on_step(self, o: Any) -> None:
        self.steps += 1
        self.add(outcome_view(o))
        if len(_MEMO) > 200_000:  # bounded: the memo only saves re-rendering shared values
            _MEMO.clear()

    def hexdigest(self) -> str:
        return self.h.hexdigest()


def _variants(only: Iterable[str] | None = None) -> list[tuple[str, str]]:
    from specstate.model import get_variant, variant_names

    return [(n, get_variant(n).family_name) for n in (variant_names() if only is None else only)]


def _result_view(r: Any) -> str:
    return repr(([v.describe() for v in r.violations], sorted(r.witnesses), sorted(r.stats.items()),
                 r.milestones, r.steps))


def part_generated(h: _Hasher, seeds: int, only: Iterable[str] | None = None) -> None:
    from specstate.check import Run, StopRun
    from specstate.fuzz.generate import generate_case

    for name, family in _variants(only):
        for seed in range(seeds):
            cfg, actions = generate_case(seed, family=family)
            run = Run(cfg, name, on_step=h.on_step)
            h.add(f"generated {name} {seed} {cfg!r}")
            for a in actions:
                try:
                    run.apply(a)
                except StopRun:
                    break
            h.add(_result_view(run.result()))


def part_scenarios(h: _Hasher, quick: bool, only: Iterable[str] | None = None) -> None:
    from specstate.errors import InvalidConfig
    from specstate.model import get_variant
    from specstate.model.families import get_family
    from specstate.scenarios import SCENARIOS, play_scenario

    for name, family in _variants(only):
        for sc in sorted(SCENARIOS):
            try:
                configured = get_variant(name).configure(SCENARIOS[sc].config)
            except InvalidConfig as e:  # the engine refuses to start on it (v2: model/sglang_0_5_17/start.py)
                h.add(f"scenario {name} {sc} refused: {e}")
                continue
            # a scenario of the other scheduler loop (an adaptive family runs the overlap loop): the
            # config says its loop, not its release, so compare the loop, not a family inferred from it
            if (not configured.disable_overlap_schedule) != get_family(family).adaptive:
                continue
            if quick and sc in ("seed-sweep", "adaptive-sweep", "static-sweep"):
                continue
            h.add(f"scenario {name} {sc}")
            h.add(_result_view(play_scenario(sc, name, 0, on_step=h.on_step)))


def part_explore(h: _Hasher, depth: int, only: Iterable[str] | None = None) -> None:
    from specstate.fuzz.explore import DEFAULT_EXPLORE_CONFIG, explore
    from specstate.model.families import get_family

    for name, family in _variants(only):
        cfg = get_family(family).graph_config or DEFAULT_EXPLORE_CONFIG  # (None: the v1 family's)
        r = explore(cfg, name, max_depth=depth, max_states=20_000)
        g = r.graph
        h.add(f"explore {name} {r.states} {r.transitions} {r.max_depth_reached} {r.complete} "
              f"{r.counterexample!r} {[v.describe() for v in r.violations]} {sorted(r.witnesses)}")
        h.add(repr(sorted((n, sorted(d.items())) for n, d in g.nodes(data=True))))
        h.add(repr(sorted((a, b, d["count"], d["labels"]) for a, b, d in g.edges(data=True))))


def part_graph(h: _Hasher, variants: Iterable[str] | None) -> None:
    from specstate.graph.render import node_link_text, to_dot
    from specstate.graph.sources import exploration_graph
    from specstate.graph.transitions import SweepBounds
    from specstate.model import get_variant
    from specstate.model.families import get_family
    from specstate.scenarios import SEED_CONFIG

    names = [n for n, _ in _variants()] if variants is None else list(variants)
    for name in names:
        cfg = get_family(get_variant(name).family_name).graph_config or SEED_CONFIG
        g = exploration_graph(cfg, name, SweepBounds(levels=(1, 2, 5)))
        h.add(f"graph {name}")
        h.add(to_dot(g))
        h.add(node_link_text(g))


def part_trace(h: _Hasher, seeds: int) -> None:
    import json

    from specstate.fuzz.generate import fuzz_seed
    from specstate.fuzz.trace import trace_from_result
    from specstate.model import get_variant

    for name, _ in _variants():
        if get_variant(name).correct:
            continue
        for seed in range(seeds):
            cfg, r = fuzz_seed(seed, name)
            if r.violations:
                h.add(f"trace {name} {seed}")
                h.add(json.dumps(trace_from_result(r, seed=seed).to_json(), sort_keys=True))
                break


#: the variants of the ``tiny`` digest (``tests/test_digest.py``): one correct and one buggy per family
TINY_VARIANTS = ("fixed-threshold", "naive-threshold", "kv-leak-spec-tail", "upstream-adaptive", "v2-single-reserve")


def digest_parts(quick: bool = False, log: Callable[[str], None] | None = None, *, tiny: bool = False) -> dict[str, str]:
    """Part name -> hex digest (and ``total``). ``tiny``: a few seconds, for the test suite."""
    if tiny:
        parts: dict[str, Callable[[_Hasher], None]] = {
            "generated": lambda h: part_generated(h, 2, TINY_VARIANTS),
            "scenarios": lambda h: part_scenarios(h, True, TINY_VARIANTS),
            "explore": lambda h: part_explore(h, 3, TINY_VARIANTS),
        }
    else:
        parts = {
            "generated": lambda h: part_generated(h, 3 if quick else 8),
            "scenarios": lambda h: part_scenarios(h, quick),
            "explore": lambda h: part_explore(h, 4 if quick else 6),
            "graph": lambda h: part_graph(h, ["naive-threshold", "fixed-threshold", "upstream-adaptive"] if quick else None),
            "trace": lambda h: part_trace(h, 3 if quick else 10),
        }
    out: dict[str, str] = {}
    total = hashlib.sha256()
    for name, fn in parts.items():
        t0 = time.perf_counter()
        h = _Hasher()
        fn(h)
        out[name] = h.hexdigest()
        _MEMO.clear()
        total.update(f"{name}={out[name]}\n".encode())
        if log is not None:
            log(f"{name:10s} {out[name]}  ({h.steps} steps, {time.perf_counter() - t0:.1f} s)")
    out["total"] = total.hexdigest()
    return out


def main(argv: list[str]) -> int:
    from benchmarks.sections import usage

    if (code := usage(argv, __doc__, {"--quick": False, "--tiny": False})) is not None:
        return code
    quick, tiny = "--quick" in argv, "--tiny" in argv
    d = digest_parts(quick, log=lambda s: print(s, flush=True), tiny=tiny)
    print(f"{'total':10s} {d['total']}")
    expected = MAIN_TINY_DIGEST if tiny else MAIN_QUICK_DIGEST if quick else MAIN_DIGEST
    if expected:
        print("same as main before the speed work" if d["total"] == expected else
              f"DIFFERENT from main before the speed work ({expected})")
        return 0 if d["total"] == expected else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
