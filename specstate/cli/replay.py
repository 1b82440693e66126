"""CLI subcommands at the integration boundary: ``replay`` and ``conform``.

- ``specstate replay --engine model TRACE.json``: replay a trace on the model.
- ``specstate replay --engine sglang [--patch naive|fixed | --plugin MODULE:FUNC] [--pressure N]
  [--engine-arg K=V] [--variant V] [--timeout S] [seed-sweep|WORKLOAD.json] --out DIR``: start the real SGLang
  engine once on a GPU host, run the workloads with the recorder on (``sglang_driver.py``),
  then compare every recording with the model variant; needs CUDA and sglang==0.5.12 there.
- ``specstate replay --engine sglang-0.5.17 [seed-sweep|WORKLOAD.json] [--random N] [--fuzz-v2 N]
  --out DIR``: the same through sglang 0.5.17's ``EAGLEWorkerV2`` with upstream's adaptive
  speculation (``sglang_0_5_17/``), compared with ``upstream-adaptive`` (or ``--variant``).
- ``specstate conform RECORDING.jsonl[.gz] --variant V --threshold N``: replay a recorded
  real run on the model, compare step by step, check invariants on the recorded states (a
  0.5.17 recording is recognised by its schema and compared with the v2 family).
"""

from __future__ import annotations

import argparse
import json

from specstate._cli_support import int_arg

__all__ = ["add_parsers"]


def _cmd_replay(args: argparse.Namespace) -> int:
    from specstate._engine_option import has_launch
    from specstate.errors import UsageError

    if args.engine != "model" and has_launch(args):
        raise UsageError("server flags (after --, --server-args, --config) are read by --engine model; for a real "
                         "engine use --engine-arg KEY=JSON")

    if args.engine == "model":
        from specstate._cli_support import guard_variant_import
        from specstate.fuzz.trace import load_trace, replay_trace
        from specstate.report import format_result

        if not args.target or not args.target.endswith(".json"):
            raise UsageError("--engine model replays a TRACE.json")
        t = load_trace(args.target)
        guard_variant_import(t, args.target, args)
        from specstate._engine_option import has_launch, resolve_launch

        if has_launch(args):  # the trace's actions on the launch's config (docs/check.md)
            from dataclasses import replace

            args.variant = args.variant or t.variant
            t = replace(t, config=resolve_launch(args).config, variant=args.variant)
        r = replay_trace(t, allow_variant_import=True)
        print(format_result(r, title=f"{args.target} / {t.variant} (model)"))
        return 0 if r.ok else 1
    from specstate.integration.catalog import adapter_for

    adapter = adapter_for(None if args.engine == "sglang" else args.engine)  # "sglang": the default release
    args.variant = args.variant or adapter.default_variant
    _check_sglang_run(args, adapter)
    from specstate.integration.sglang_driver import main as driver_main

    argv = ["run", "--out", args.out, "--patch", adapter.patch or args.patch, "--threshold", str(args.threshold),
            "--naive-path", args.naive_path, "--engine", adapter.family,
            "--timeout", str(args.timeout), "--start-timeout", str(args.start_timeout)]
    if args.fuzz_v2:
        argv += ["--fuzz-v2", str(args.fuzz_v2)]
    if args.agree:
        argv += ["--agree"]
    argv += ["--scenario", args.target or "seed-sweep"]
    if args.random:
        argv += ["--random", str(args.random)]
    if args.plugin:
        argv += ["--plugin", args.plugin]
    if args.pressure:
        argv += ["--pressure", str(args.pressure), "--fuzz-derived", str(args.pressure)]
    for kv in args.engine_arg or []:
        argv += ["--engine-arg", kv]
    rc = driver_main(argv)
    return max(rc, _conform_dir(args.out, args.variant, args.threshold))


def _check_sglang_run(args: argparse.Namespace, adapter) -> None:  # noqa: ANN001
    """Everything ``--engine sglang`` needs, checked before an engine starts: the workload
    file, the variant, the ``--engine-arg``s, and sglang itself (with its install command)."""
    import importlib.util

    from specstate.errors import MissingDependency, UsageError
    from specstate.model import get_variant

    if args.target and args.target != "seed-sweep":
        from specstate.integration.workloads import load_workload

        load_workload(args.target)
    get_variant(args.variant)
    for kv in args.engine_arg or []:
        key, eq, value = kv.partition("=")
        try:
            json.loads(value)
        except ValueError:
            eq = ""
        if not eq or not key.isidentifier():
            raise UsageError(f"Expected --engine-arg KEY=JSON (e.g. max_total_tokens=4096) but got {kv[:80]!r}")
    if importlib.util.find_spec("sglang") is None:
        from specstate.integration.catalog import DEFAULT

        release = adapter.family.removeprefix("sglang-")
        if adapter is not DEFAULT:  # a release without a pip extra: its site is built and carried by hand
            raise MissingDependency(f"sglang=={release}", "bash specstate/integration/build_site17.sh .whl17, unpacked "
                                    "on the GPU host (specstate/integration/gpu_run_v17.sh does it)",
                                    f"specstate replay --engine {adapter.family}")
        raise MissingDependency(f"sglang=={release}", "pip install 'specstate[gpu]' (on a GPU host with CUDA)",
                                "specstate replay --engine sglang")


def _conform_dir(out: str, variant: str | None, threshold: int) -> int:
    """Every recording the run wrote, against the model variant, step by step (with every
    invariant on the recorded states and on the model's)."""
    import glob
    import os

    from specstate.integration.conform import check_recording
    from specstate.schema._messages import printable

    bad = 0
    for path in sorted(glob.glob(os.path.join(out, "rec", "*.jsonl"))):
        rep = check_recording(path, variant, None if threshold < 0 else threshold)
        ok = not rep["mismatch_count"] and not rep["recorded_invariant_violations"] and not rep["model_invariant_violations"]
        bad += not ok
        first = printable(rep["mismatches"][0]) if rep["mismatches"] else ""  # rids come from the file
        print(f"[conform] {os.path.basename(path)}: {rep['iterations']} iterations, "
              f"{rep['mismatch_count']} mismatches vs {variant or 'the default variant'} {first}", flush=True)
    return 1 if bad else 0


def _cmd_conform(args: argparse.Namespace) -> int:
    from specstate.integration.conform import check_recording
    from specstate.model import get_variant

    from specstate.cli._unused import given

    if args.variant is not None:
        get_variant(args.variant)
    worst = 0
    threshold_given = "threshold" in given(args)
    for path in args.recordings:
        rep = check_recording(path, args.variant, None if args.threshold < 0 else args.threshold,
                              threshold_given=threshold_given)
        expected_crash = args.expect_crash
        bad = rep["mismatch_count"] or (rep["recorded_invariant_violations"] and not expected_crash)
        rep["verdict"], rep["exit_code"] = ("violation", 1) if bad else ("pass", 0)
        rep["coverage"] = _conform_coverage(path, rep, rep.get("variant") or args.variant)
        print(json.dumps(rep, indent=1, default=_plain))
        worst = max(worst, 1 if bad else 0)
    return worst


def _conform_coverage(path: str, rep: dict, variant: str | None) -> dict:
    """What a conformance check judged: the recording's iterations against the model's variant."""
    from specstate.check_result import coverage_block

    judged = (f"conform {path}: {rep.get('iterations', 0)} recorded iterations replayed on the model "
              f"({variant or 'the default variant'})")
    return coverage_block(judged=judged, reached=sorted(str(w) for w in rep.get("witnesses", ()) or ()))


def _plain(v: object) -> object:
    """JSON for the report's dataclasses (``Mismatch``) and tuples."""
    import dataclasses

    return dataclasses.asdict(v) if dataclasses.is_dataclass(v) and not isinstance(v, type) else str(v)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("replay", help="replay a trace on the model, or workloads on the real SGLang worker (GPU)")
    r.add_argument("target", nargs="?", help="TRACE.json (model) or seed-sweep / WORKLOAD.json (sglang)")
    from specstate.integration.catalog import DEFAULT, ENGINES, default_variants

    defaults = {f.removeprefix("sglang-"): v for f, v in default_variants().items()}

    r.add_argument("--engine", choices=("model", "sglang", *ENGINES), default="model",
                   help=f"model (a trace), sglang (= {DEFAULT.family}), or a release: {', '.join(ENGINES)}")
    r.add_argument("--patch", choices=("none", "naive", "fixed"), default="fixed")
    r.add_argument("--naive-path", choices=("graph", "eager"), default="graph")
    r.add_argument("--threshold", type=int_arg(-1, 4096), default=5)
    r.add_argument("--random", type=int_arg(0, 1000), default=0, help="also run N generated random workloads")
    r.add_argument("--out", default="specstate-gpu-out")
    r.add_argument("--plugin", default=None, metavar="MODULE:FUNC",
                   help="your own sglang plugin (entry-point style register function) instead of --patch")
    r.add_argument("--variant", default=None,
                   help="model variant the recordings are compared with after the run (sglang engines; default "
                        + ", ".join(f"{v} for {r}" for r, v in defaults.items()) + ")")
    r.add_argument("--fuzz-v2", type=int_arg(0, 1000), default=0,
                   help="also N workloads of the v2 fuzzer's generator (the overlap scheduler's releases)")
    r.add_argument("--agree", action="store_true", help="rewrite the weights so target and draft agree")
    r.add_argument("--pressure", type=int_arg(0, 100), default=0,
                   help="also N memory-pressure workloads of each kind and N fuzzer-derived ones")
    r.add_argument("--engine-arg", action="append", help="extra Engine kwarg KEY=JSON (e.g. max_total_tokens=2048)")
    r.add_argument("--timeout", type=int_arg(0, 7 * 86400), default=0, metavar="SECONDS",
                   help="end the engine's whole process tree after SECONDS and name the phase it was in (0: none)")
    r.add_argument("--start-timeout", type=int_arg(0, 86400), default=900, metavar="SECONDS",
                   help="end it if the engine has not started after SECONDS (default 900; 0: none)")
    from specstate._engine_option import add_server_args_options
    from specstate._cli_support import add_allow_import

    add_server_args_options(r)  # --engine model: the trace on your launch's flags
    add_allow_import(r)
    r.set_defaults(func=_cmd_replay)
    c = sub.add_parser("conform", help="check a recorded real run against the model")
    c.add_argument("recordings", nargs="+")
    c.add_argument("--variant", default=None,
                   help="default: " + ", ".join(f"{v} ({r} recordings)" for r, v in defaults.items()))
    c.add_argument("--threshold", type=int_arg(-1, 4096), default=5, help="-1: no threshold")
    c.add_argument("--expect-crash", action="store_true", help="a recorded crash is expected (naive patch)")
    c.set_defaults(func=_cmd_conform)
