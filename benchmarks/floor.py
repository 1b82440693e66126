"""The cost floor of the model's present decomposition, beside the speed goals' budgets.

Issue 11 asks for model transitions at >= 3x a trivial Hypothesis machine's steps and for
``explore`` at >= 0.1x a bare-Python BFS. Each goal is a time budget per unit of work, measured
in the same process as its baseline: ``1 / (3 x trivial steps/s)`` per transition, and
``1 / (0.1 x BFS states/s)`` per explored state. This module measures what a transition costs
*before any of its logic runs*: the Python calls it makes, the frozen values it copies
(``values.evolve``) and the ones it constructs, each priced at its bare cost on this machine:

- a **census** of ``Run.apply`` over the generator's cases (as the model figure of ``perf.py``
  runs them), under ``sys.setprofile``: Python function calls per transition, ``evolve`` calls
  per transition (every frozen value a transition changes is one; ``Tx``, ``ModelState``,
  ``Req``, ``ScheduleBatch``, ... see ``by_class``), dataclass constructions per transition
  (their generated ``__init__``);
- the **price** of one copy and of one construction: the census's own ``evolve`` and
  ``__init__`` calls (sampled with their arguments as they happened) replayed and timed, less
  the same loop calling a function that returns at once; of one call: a three-argument Python
  function that returns at once, less the loop around it. Prices are this thread's CPU time
  (``time.thread_time``), so another process sharing the core (the fast tier's other worker)
  does not inflate one loop of a difference and not the other.

``floor_us = copies x copy_us + constructions x construct_us + the other calls x call_us``: a
lower bound, since it prices no statement beyond the call itself. When it exceeds a goal's
budget, no tuning of the operations' bodies meets that goal; what would is fewer copies
(operations that do not each return a new frozen ``Tx`` / ``ModelState``) or fewer calls (fewer,
larger functions), i.e. a different decomposition from the one ``../shared/STYLE.md`` asks for
(frozen states, pure ``step``, every real operation a small named replaceable function).
"""

from __future__ import annotations

import collections
import sys
import time
from typing import Any, Callable

__all__ = ["census", "model_work", "explore_work", "copy_us", "construct_us", "call_us", "floor", "budgets", "measure"]

_SAMPLE = 4000  #: ``evolve`` and ``__init__`` calls kept (with their arguments) to price a copy, a construction


def census(work: Callable[[], int]) -> dict[str, Any]:
    """Per unit of ``work()`` (it returns how many units it did: transitions, explored states):
    Python calls, ``evolve`` calls (by class), dataclass ``__init__`` calls and the calls made inside
    them (``in_inits``); and samples of the ``evolve`` and ``__init__`` calls for :func:`copy_us` and
    :func:`construct_us` (a construction's replay runs what ran inside it)."""
    from specstate.model import values

    evolve_code = values.evolve.__code__
    calls = 0
    inits = 0
    in_init = 0
    by_class: collections.Counter[str] = collections.Counter()
    sample: list[tuple[Any, dict[str, Any]]] = []
    init_sample: list[tuple[type, dict[str, Any]]] = []
    inside = 0  # generated ``__init__`` frames open: what runs in them is priced with the outermost

    def prof(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls, inits, in_init, inside
        code = frame.f_code
        if event == "return":  # also when the frame ends in an exception
            if inside and _generated_init(code):
                inside -= 1
            return
        if event != "call":
            return
        calls += 1
        if inside:
            in_init += 1
            inside += _generated_init(code)
            return
        if code is evolve_code:
            loc = frame.f_locals
            by_class[type(loc["obj"]).__name__] += 1
            if len(sample) < _SAMPLE:
                sample.append((loc["obj"], dict(loc["changes"])))
        elif _generated_init(code):
            inits += 1
            inside = 1
            if len(init_sample) < _SAMPLE:  # its arguments (``f_locals`` holds its closure's names too)
                loc = frame.f_locals
                names = code.co_varnames[1:code.co_argcount + code.co_kwonlyargcount]
                init_sample.append((type(loc["self"]), {k: loc[k] for k in names}))

    sys.setprofile(prof)
    try:
        n = work()
    finally:
        sys.setprofile(None)
    if n <= 0:
        raise ValueError(f"Expected work that did at least one unit but got n={n!r}")
    return {"units": n, "calls": calls / n, "copies": sum(by_class.values()) / n, "inits": inits / n,
            "in_inits": in_init / n, "by_class": {k: v / n for k, v in by_class.most_common()}, "sample": sample,
            "init_sample": init_sample}


def _generated_init(code: Any) -> bool:
    """A dataclass's generated ``__init__`` (the model's frozen values are constructed by it)."""
    return code.co_name == "__init__" and code.co_filename == "<string>"


def model_work(variant: str, cases: list[tuple[Any, list[Any]]]) -> Callable[[], int]:
    """``Run.apply`` over ``cases``, as the model figure runs them (``perf.run_cases``); transitions."""
    from benchmarks.perf import run_cases

    return lambda: run_cases(variant, cases)


def explore_work(variant: str, depth: int) -> Callable[[], int]:
    """``explore`` of the default config on one core (the whole search: steps, invariants,
    canonical states, the seen-set); states."""
    from specstate.fuzz import explore as ex

    return lambda: ex.explore(ex.DEFAULT_EXPLORE_CONFIG, variant, max_depth=depth, keep_graph=False).states


def _noop(obj: Any, **changes: Any) -> Any:
    return obj


_clock = time.thread_time  #: a price's clock: this thread's CPU time (the module doc says why)


def _replay(fn: Callable[..., Any], sample: list[tuple[Any, dict[str, Any]]], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = _clock()
        for obj, changes in sample:
            fn(obj, **changes)
        best = min(best, _clock() - t0)
    return best


def _body_us(fn: Callable[..., Any], sample: list[tuple[Any, dict[str, Any]]], rounds: int) -> float:
    """Microseconds per ``fn(first, **rest)`` over ``sample``, less the same loop calling a function
    that returns at once, plus one bare call (:func:`call_us`): the work and the price of calling
    it, not the replay's loop."""
    return max(_replay(fn, sample, rounds) - _replay(_noop, sample, rounds), 0.0) / len(sample) * 1e6 + call_us()


def copy_us(sample: list[tuple[Any, dict[str, Any]]], rounds: int = 20) -> float:
    """Microseconds per ``evolve`` over ``sample`` (the census's own calls, replayed)."""
    from specstate.model.values import evolve

    if not sample:
        raise ValueError("Expected a sample of evolve calls but got none")
    return _body_us(evolve, sample, rounds)


def construct_us(sample: list[tuple[type, dict[str, Any]]], rounds: int = 20) -> float:
    """Microseconds per construction over ``sample`` (the census's own dataclass ``__init__``
    calls, replayed as ``cls(**fields)``: ``__init__`` and any ``__post_init__``); 0 for none."""
    return _body_us(type.__call__, sample, rounds) if sample else 0.0


def _f(a: Any, b: Any, c: Any) -> Any:
    return a


def call_us(n: int = 200_000, rounds: int = 5) -> float:
    """Microseconds per call of a three-argument Python function that returns at once, less the
    loop around it."""
    f = _f
    best = float("inf")
    for _ in range(rounds):
        t0 = _clock()
        for i in range(n):
            f(i, i, i)
        t1 = _clock()
        for i in range(n):
            pass
        best = min(best, (t1 - t0) - (_clock() - t1))
    return max(best, 0.0) / n * 1e6


def floor(census_: dict[str, Any]) -> dict[str, float]:
    """The prices (:func:`copy_us`, :func:`construct_us` over the census's samples, :func:`call_us`)
    and ``floor_us`` per unit: ``copies x copy_us + constructions x construct_us + the other calls
    x call_us`` (what runs inside a construction, its ``__post_init__`` and what that calls, is in
    the construction's price, not among the other calls)."""
    c = census_
    cp, cn, cl = copy_us(c["sample"]), construct_us(c.get("init_sample", [])), call_us()
    other = c["calls"] - c["copies"] - c["inits"] - c.get("in_inits", 0.0)
    return {"copy_us": cp, "construct_us": cn, "call_us": cl, "floor_us": c["copies"] * cp + c["inits"] * cn + other * cl}


def budgets(trivial_steps_per_s: float, bfs_states_per_s: float) -> dict[str, float]:
    """The goals' budgets in microseconds: per model transition, 1 / (3x the trivial Hypothesis
    machine's steps/s); per explored state, 1 / (0.1x the bare BFS's states/s)."""
    return {"model_us": 1e6 / (3 * trivial_steps_per_s), "explore_us": 1e6 / (0.1 * bfs_states_per_s)}


def measure(cases: list[tuple[Any, list[Any]]], depth: int, repeats: int) -> dict[str, Any]:
    """The census of the model (``fixed-threshold`` over ``cases``) and of ``explore`` (to
    ``depth``), once; then ``repeats`` rounds of: the baselines (``perf``'s, each run as ``perf``
    runs every figure, heap frozen), the prices, each floor over its budget."""
    from benchmarks.perf import _frozen as frozen
    from benchmarks.perf import _stats, bfs_states_per_s, trivial_steps_per_s

    counts = {"model": census(model_work("fixed-threshold", cases)), "explore": census(explore_work("fixed-threshold", depth))}
    rounds: dict[str, list[float]] = collections.defaultdict(list)
    for _ in range(repeats):
        b = budgets(frozen(trivial_steps_per_s), frozen(bfs_states_per_s))
        for name in ("model", "explore"):
            f = frozen(lambda: floor(counts[name]))
            for k, v in f.items():
                rounds[f"{name}/{k}"].append(v)
            rounds[f"{name}/budget_us"].append(b[f"{name}_us"])
            rounds[f"{name}/floor_over_budget"].append(f["floor_us"] / b[f"{name}_us"])
    out: dict[str, Any] = {k: _stats(v) for k, v in rounds.items()}
    for name, c in counts.items():
        out[f"{name}/census"] = {k: v for k, v in c.items() if not k.endswith("sample")}
    out["depth"] = depth
    return out


def main(argv: list[str]) -> None:
    """``python -m benchmarks.floor REPEATS JSON [--quick]``: the figure alone, saved to ``JSON``
    (``benchmarks/__main__.py`` runs it so, in a child on an otherwise idle machine)."""
    import json

    from benchmarks import perf

    quick = "--quick" in argv
    got = measure(perf._cases("fixed-threshold", range(2), 300), 6 if quick else 8, int(argv[0]))
    with open(argv[1], "w") as f:
        json.dump(got, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
