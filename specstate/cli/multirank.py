"""DP-attention launches on ``run``, ``fuzz``, ``explore``, ``prove``, ``graph``, ``check`` and ``reproduce``.

``maybe_multirank(args, command)`` is called first by each of those commands: when the launch
runs DP attention on more than one rank (``--enable-dp-attention --dp-size N``, N > 1) the
command runs on the multi-rank model (``specstate.multirank``) and its exit code comes back;
otherwise ``None``, and the command goes on as it always has (``--dp 1``: unchanged). The
variant names a multi-rank policy (``specstate.multirank.POLICIES``: the single-rank names
``naive-threshold``, ``fixed-threshold``, ``always-spec`` decide on the local batch; the ``dp-*``
ones decide from the gathered record).

Exit codes are the commands' own (``check_result.EXIT_CODES``): 0 every part passed, 1 a violation,
2 a wrong launch or option, 4 not judged (no violation, but a flag is outside the multi-rank model:
``multirank._coverage``). ``check`` prints and ``--json`` carries the coverage block.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from specstate.errors import UsageError

__all__ = ["maybe_multirank"]

_DEFAULTS = {"run": "fixed-threshold", "fuzz": "fixed-threshold", "explore": "naive-threshold",
             "check": "fixed-threshold", "reproduce": "fixed-threshold", "prove": "fixed-threshold",
             "graph": "naive-threshold"}



def _tokens(args: argparse.Namespace, base: str) -> list[str]:
    from specstate._engine_option import has_launch
    from specstate.server_args import launch_tokens

    if not has_launch(args):
        return []
    return launch_tokens(after_dashes=getattr(args, "server_argv", None) or (),
                         server_args=getattr(args, "server_args", None),
                         config_file=getattr(args, "server_config", None), variant=base)


def _policy_name(args: argparse.Namespace, command: str) -> str:
    return getattr(args, "variant", None) or _DEFAULTS[command]


def maybe_multirank(args: argparse.Namespace, command: str) -> int | None:
    from specstate.multirank import POLICIES, dp_launch

    name = _policy_name(args, command)
    engine = getattr(args, "engine", None)
    if getattr(args, "trace", None) and command == "reproduce":
        return _reproduce(args)
    dp_only = name in POLICIES and name.startswith("dp-")
    base = POLICIES[name].base if name in POLICIES else name
    try:
        dl = dp_launch(_tokens(args, base if name in POLICIES else "fixed-threshold"))
    except UsageError:
        if dp_only:
            raise
        return None  # the single-rank path reports its own launch errors
    if dl is None:
        if dp_only:
            raise UsageError(f"--variant {name}: a multi-rank variant; expected --enable-dp-attention and --dp-size > 1")
        return None
    from specstate.model.releases import core_family

    if engine not in (None, core_family()):
        return _other_release(args, command, engine, dl)
    if name not in POLICIES:
        raise UsageError(f"Expected a multi-rank variant from {sorted(POLICIES)} under DP attention but got {name!r}")
    return _COMMANDS[command](args, name, dl)


def _other_release(args: argparse.Namespace, command: str, engine: str, dl: Any) -> int:  # noqa: ANN401
    """A DP launch on 0.5.17 / 0.5.23: what upstream does at start with ``--speculative-adaptive``
    (``multirank._start``: it turns adaptive off and starts with static speculation; it does not
    refuse), then not judged (``check``: exit 4) or refused (other commands: exit 2): the overlap
    releases' ranks are outside the multi-rank model."""
    from specstate.model.releases import core_family, get_release
    from specstate.multirank._start import V2_DP_NOTE, adaptive_start
    from specstate.server_args import rules

    release = get_release(engine).version
    warn = adaptive_start(_tokens(args, "fixed-threshold"), rules(release).dp_adaptive_unsupported)
    said = (f"at start sglang {release} logs (arg_groups/speculative_hook.py, _maybe_disable_adaptive): {warn!r}; "
            if warn else "")
    note = V2_DP_NOTE.format(release=release, core=core_family())
    if command != "check":
        raise UsageError(f"{said}{note}: drop --engine {engine}")
    from specstate.check_result import CheckResult, coverage_lines
    from specstate.multirank._coverage import multi_coverage

    print(f"specstate check: sglang {release} on {dl.ranks.describe()}")
    if warn:
        print(f"  start: sglang {release} starts, adaptive speculation off (arg_groups/speculative_hook.py, "
              f"_maybe_disable_adaptive logs):\n    {warn}")
    coverage = multi_coverage(f"check on sglang {release}: start only", None, dl.ranks, None, None)
    coverage["not_judged"].append({"what": f"sglang {release} on {dl.ranks.dp_size} DP ranks", "parts": "sweep, burst, "
                                   "fuzz", "reason": note + f" (judge the same launch with --engine {core_family()})"})
    result = args.json_result = CheckResult("check", f"sglang {release} on {dl.ranks.describe()}", engine, True, None,
                                            (), None, None, 0.0, {"multirank": True, "dp_size": dl.ranks.dp_size,
                                                                  "start": warn}, coverage)
    print(f"verdict: NOT JUDGED: {note} (exit {result.exit_code})")
    print("\n".join(coverage_lines(coverage)))
    return result.exit_code


def _launch(name: str, dl: Any, args: argparse.Namespace | None = None) -> Any:  # noqa: ANN401
    from specstate._engine_option import deployment_arg
    from specstate.multirank import get_policy
    from specstate.server_args import parse_launch

    return parse_launch(list(dl.rest), get_policy(name).base, deployment_arg(args), read_model_path=True)


def _model(name: str, dl: Any, args: argparse.Namespace | None = None) -> tuple[Any, Any]:  # noqa: ANN401
    from specstate.multirank import make_model, per_rank_config

    launch = _launch(name, dl, args)
    cfg = per_rank_config(launch.config, dl.ranks)
    print(f"specstate: {dl.ranks.describe()}; per rank: chunked prefill {cfg.chunked_prefill_size}, "
          f"max running requests {cfg.max_running_requests} (ServerArgs._handle_data_parallelism, "
          f"_resolve_max_num_reqs)", file=sys.stderr)
    return cfg, make_model(cfg, dl.ranks, name)


def _save(result: Any, cfg: Any, args: argparse.Namespace) -> Any:  # noqa: ANN401
    from specstate.multirank._report import save_multi_trace

    return save_multi_trace(result, cfg, getattr(args, "failures", None))


def _verdict(args: argparse.Namespace, kind: str, name: str, dl: Any, cfg: Any, judged: str,  # noqa: ANN401
             failing: Any = None, path: Any = None, stats: Any = None) -> int:  # noqa: ANN401
    """``--json``'s ``CheckResult`` with the coverage block (``stats``: the paths a sweep reached);
    prints the block (and NOT JUDGED where a flag is outside the model); the exit code."""
    from specstate.check_result import coverage_lines
    from specstate.multirank._coverage import multi_coverage

    coverage = multi_coverage(judged, _launch(name, dl, args), dl.ranks, stats, cfg.disable_batch_threshold)
    result = args.json_result = _check_result(kind, name, dl, cfg, coverage, failing, path, 0.0, {})
    if result.verdict == "not judged":
        print("verdict: NOT JUDGED: no violation, but " + "; ".join(
            f"{x.get('flag') or x.get('what')} is outside the model" for x in coverage["not_judged"]) + " (exit 4)")
    print("\n".join(coverage_lines(coverage)))
    return result.exit_code


def _shrink(model: Any, r: Any) -> Any:
    """``r`` cut by delta debugging to the fewest actions that still break the same invariant."""
    from specstate.multirank import run_multi
    from specstate.multirank._report import ddmin_multi

    inv = r.violations[0].invariant
    return run_multi(model, ddmin_multi(model, list(r.actions), lambda x: x.violations[0].invariant == inv))


def _cmd_run(args: argparse.Namespace, name: str, dl: Any) -> int:
    from specstate.multirank import sweep_multi
    from specstate.multirank._report import format_multi_result

    cfg, model = _model(name, dl, args)
    seed = getattr(args, "seed", 0) or 0
    r = sweep_multi(model, seed=seed)
    path = _save(r, cfg, args) if not r.ok else None
    print(format_multi_result(r, title=f"seed-sweep / {name} on {dl.ranks.dp_size} DP ranks (seed {seed})", trace_path=path))
    return _verdict(args, "scenario", name, dl, cfg, f"seed-sweep {name} (seed {seed})", None if r.ok else r, path,
                    r.stats)


def _cmd_fuzz(args: argparse.Namespace, name: str, dl: Any) -> int:
    from specstate.multirank import fuzz_multi
    from specstate.multirank._report import format_multi_result

    cfg, model = _model(name, dl, args)
    seed = getattr(args, "seed", None) or 0
    cases = getattr(args, "max_examples", None) or 200
    r, ran = fuzz_multi(model, seed=seed, cases=cases)
    title = f"fuzz {name} on {dl.ranks.dp_size} DP ranks (seed {seed}, {ran} workloads)"
    if r is None:
        print(f"{title}: no violation")
        return _verdict(args, "fuzz", name, dl, cfg, f"fuzz {name}: {ran} workloads (seed {seed})")
    small = _shrink(model, r)
    print(f"  shrunk from {len(r.actions)} to {len(small.actions)} actions (delta debugging, same invariant)")
    path = _save(small, cfg, args)
    print(format_multi_result(small, title=title, trace_path=path))
    return _verdict(args, "fuzz", name, dl, cfg, f"fuzz {name}: {ran} workloads (seed {seed})", small, path)


def _cmd_explore(args: argparse.Namespace, name: str, dl: Any) -> int:
    from specstate.multirank import explore_multi
    from specstate.multirank._report import format_multi_result

    cfg, model = _model(name, dl, args)
    reduce = getattr(args, "reduce", True) is not False
    r = explore_multi(model, depth=getattr(args, "depth", 8), max_states=getattr(args, "max_states", 200_000),
                      reduce=reduce)
    what = "states" if r.reduced == "none" else f"classes of states (reduced: {r.reduced} of the ranks and each rank's key)"
    print(f"explore {name} on {dl.ranks.dp_size} DP ranks: {r.states} {what}, {r.transitions} transitions, "
          f"depth {r.depth}")
    print(f"  time: {r.elapsed_s:.1f} s", file=sys.stderr)
    judged = f"explore {name}: {r.states} states to depth {r.depth}"
    if r.counterexample is None:
        print("  no violation in the explored space")
        return _verdict(args, "explore", name, dl, cfg, judged)
    path = _save(r.counterexample, cfg, args)
    print(format_multi_result(r.counterexample, title="  shortest counterexample", trace_path=path))
    return _verdict(args, "explore", name, dl, cfg, judged, r.counterexample, path)


def _cmd_prove(args: argparse.Namespace, name: str, dl: Any) -> int:
    from specstate.multirank._prove import prove_multi
    from specstate.multirank._report import format_multi_result

    cfg, model = _model(name, dl, args)
    if getattr(args, "max_bs", None) is not None and args.max_bs > cfg.max_running_requests:
        raise UsageError(f"argument --max-bs: under DP attention the bound is per rank: expected at most the "
                         f"per-rank max_running_requests {cfg.max_running_requests} but got {args.max_bs}")
    if getattr(args, "capture_lists", "all") != "all" or getattr(args, "exhaustive", False):
        print("specstate prove: --capture-lists / --exhaustive are not read under DP attention (the launch's "
              "capture list; every per-rank size where the multisets fit, docs/multirank.md)", file=sys.stderr)
    r = prove_multi(model, getattr(args, "max_bs", None))
    how = "every size" if r.exhaustive else "by intervals"
    print(f"prove {name} on {dl.ranks.dp_size} DP ranks: per-rank bs 0..{r.max_bs} ({how}), {r.vectors} multisets "
          f"(every rank order: {r.orderings} vectors), {r.scripts} scripts, {r.steps} steps")
    print(f"  paths met: " + ", ".join(f"{k} {v}" for k, v in sorted(r.reached.items())))
    print(f"  {r.verdict()}")
    print(f"  time: {r.elapsed_s:.1f} s", file=sys.stderr)
    judged = f"prove {name}: {r.vectors} multisets of per-rank batch sizes 0..{r.max_bs} ({how})"
    if r.failure is None:
        return _verdict(args, "prove", name, dl, cfg, judged)
    path = _save(r.failure, cfg, args)
    print(format_multi_result(r.failure, title="  the failing script", trace_path=path))
    return _verdict(args, "prove", name, dl, cfg, judged, r.failure, path)


def _cmd_graph(args: argparse.Namespace, name: str, dl: Any) -> int:
    from specstate.graph.output import check_out, write_graph
    from specstate.multirank import explore_multi
    from specstate.multirank._graph import graph_texts

    check_out(args.out)
    if getattr(args, "trace", None) or getattr(args, "from_fuzz", False) or getattr(args, "from_recording", None):
        raise UsageError("graph under DP attention draws the explored multi-rank states (--depth, --max-states); "
                         "--trace, --from-fuzz and --from-recording are single-rank sources")
    cfg, model = _model(name, dl, args)
    depth = getattr(args, "depth", 8)
    r = explore_multi(model, depth=depth, max_states=getattr(args, "max_states", 200_000),
                      reduce=getattr(args, "reduce", True) is not False, graph=True)
    title = f"{name} on {dl.ranks.describe()}: explored to depth {depth}"
    dot, data, counts = graph_texts(r, cfg.max_accept_len, title)
    w = write_graph(dot, data, args.out)
    print(f"graph {name} on {dl.ranks.dp_size} DP ranks: {counts['nodes']} nodes, {counts['edges']} edges, "
          f"{counts['disagreement_edges']} rank-disagreement edges, {counts['rank_model_edges']} single-rank failures")
    print(w.message, file=sys.stdout if w.drawn else sys.stderr)
    from specstate._cli_support import EXIT_USAGE

    return 0 if w.drawn else EXIT_USAGE


def _parts(args: argparse.Namespace, model: Any, dl: Any, thr: int) -> tuple[Any, list[tuple[str, Any]], int]:
    """Run the sweep, the shortest burst and the fuzz; print one line each; the sweep, the failures
    and how many fuzz workloads ran."""
    from specstate.multirank import fuzz_multi, sweep_multi
    from specstate.multirank._report import shortest_burst

    failed = []
    sweep = sweep_multi(model, seed=args.seed)
    print(f"  sweep  {'passed' if sweep.ok else 'FAILED'} seed-sweep on every rank, {len(sweep.actions)} actions"
          + ("" if sweep.ok else f": {sweep.violations[0].describe()[:160]}"))
    failed += [] if sweep.ok else [("sweep", sweep)]
    top = (thr + 2) * dl.ranks.dp_size
    burst = shortest_burst(model, max_c=top)
    print(f"  burst  {'passed' if burst is None else 'FAILED'} requests arriving at once, 1..{top}"
          + ("" if burst is None else f": fails at {sum(1 for a in burst.actions if type(a).__name__ == 'Arrive')} requests"))
    failed += [] if burst is None else [("burst", burst)]
    fz, ran = fuzz_multi(model, seed=args.seed, cases=args.max_examples or 10_000, budget_s=min(args.budget, 60.0))
    print(f"  fuzz   {'passed' if fz is None else 'FAILED'} {ran} random workloads")
    failed += [] if fz is None else [("fuzz", fz)]
    return sweep, failed, ran


def _check_result(kind: str, name: str, dl: Any, cfg: Any, coverage: Any, shortest: Any, path: Any, elapsed: float,  # noqa: ANN401
                  parts: dict[str, str]) -> Any:  # noqa: ANN401
    from specstate.check_result import CheckResult

    details = {"multirank": True, "dp_size": dl.ranks.dp_size, "ranks": dl.ranks.to_json(), "parts": parts,
               "per_rank": {"chunked_prefill_size": cfg.chunked_prefill_size,
                            "max_running_requests": cfg.max_running_requests},
               "actions": len(shortest.actions) if shortest is not None else None}
    v = shortest.violations[0] if shortest is not None else None
    return CheckResult(kind, f"{name} on {dl.ranks.describe()}", name, shortest is None, v,
                       tuple(x.describe() for x in shortest.violations) if shortest is not None else (), path,
                       f"specstate reproduce {path}" if path is not None else None, elapsed, details, coverage)


def _cmd_check(args: argparse.Namespace, name: str, dl: Any) -> int:
    from specstate.check_result import coverage_lines
    from specstate.multirank._coverage import multi_coverage
    from specstate.multirank._report import format_multi_result

    t0 = time.perf_counter()
    cfg, model = _model(name, dl, args)
    print(f"specstate check: {name} on {dl.ranks.describe()}")
    thr = cfg.disable_batch_threshold
    sweep, failed, ran = _parts(args, model, dl, thr or 0)
    parts = {p: "passed" for p in ("sweep", "burst", "fuzz")} | {p: "failed" for p, _ in failed}
    coverage = multi_coverage(f"check {name}: sweep, burst 1..{((thr or 0) + 2) * dl.ranks.dp_size}, "
                              f"fuzz {ran} workloads", _launch(name, dl, args), dl.ranks,
                              sweep.stats, thr)
    shortest = path = None
    if failed:
        failed = [(p, r if p == "burst" else _shrink(model, r)) for p, r in failed]
        part, shortest = min(failed, key=lambda pr: (len(pr[1].actions), pr[0] != "burst"))  # ties: the uniform burst
        path = _save(shortest, cfg, args)
    result = args.json_result = _check_result("check", name, dl, cfg, coverage, shortest, path, time.perf_counter() - t0,
                                              parts)
    if shortest is not None:
        print(f"verdict: FAIL: {', '.join(p for p, _ in failed)} failed; the shortest trace ({part}):")
        print(format_multi_result(shortest, title="  ranks disagree", trace_path=path))
    elif result.verdict == "not judged":
        print("verdict: NOT JUDGED: every part passed, but " + "; ".join(
            f"{x.get('flag') or x.get('what')} is outside the model" for x in coverage["not_judged"]) + " (exit 4)")
    else:
        print("verdict: PASS: every part passed")
    print("\n".join(coverage_lines(coverage)))
    print(f"  time: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return result.exit_code


def _is_multi_trace(path: str) -> bool:
    """A trace file with a ``multirank`` object (read before anything heavy is imported)."""
    from specstate.errors import SpecStateError
    from specstate.schema._files import read_data

    try:
        data = read_data(path, what="trace", max_bytes=1 << 24)  # the safe reader: size, type, nesting
    except SpecStateError:
        return False  # the single-rank reader reports it, in one line
    return isinstance(data, dict) and isinstance(data.get("multirank"), dict)


def _reproduce(args: argparse.Namespace) -> int | None:
    if not _is_multi_trace(args.trace):
        return None
    from specstate.multirank import run_multi
    from specstate.multirank._report import format_multi_result, load_multi_trace

    from specstate.check_result import CheckResult, coverage_lines
    from specstate.multirank._coverage import multi_coverage

    model, actions, data = load_multi_trace(args.trace)
    r = run_multi(model, actions)
    print(format_multi_result(r, title=f"reproduce {args.trace} ({data['variant']} on {model.ranks.dp_size} DP ranks)"))
    want = data.get("violation")
    if want is not None and (r.ok or r.violations[0].invariant != want["invariant"] or r.violations[0].step != want["step"]):
        print(f"  did NOT reproduce: the trace recorded [{want['invariant']}] at step {want['step']}")
    coverage = multi_coverage(f"reproduce {data['variant']}: {len(r.actions)} actions of {args.trace}", None,
                              model.ranks, r.stats, model.config.disable_batch_threshold)
    v = r.violations[0] if r.violations else None
    args.json_result = CheckResult("reproduce", f"{data['variant']} on {model.ranks.describe()}", data["variant"],
                                   r.ok, v, tuple(x.describe() for x in r.violations), None, None, 0.0,
                                   {"multirank": True, "dp_size": model.ranks.dp_size, "ranks": model.ranks.to_json(),
                                    "actions": len(r.actions)}, coverage)
    print("\n".join(coverage_lines(coverage)))
    return 0 if r.ok else 1


_COMMANDS = {"run": _cmd_run, "fuzz": _cmd_fuzz, "explore": _cmd_explore, "check": _cmd_check, "prove": _cmd_prove,
             "graph": _cmd_graph}
