"""The ``specstate`` command.

This package holds every command module, above every library they drive.

``specstate run`` runs a built-in scenario under a variant with every invariant checked
after every step; on a violation it writes the trace and prints the one command that
replays it. The other subcommands come from this package's modules, each exposing
``add_parsers(subparsers)`` and imported when the parser is built: ``check`` (a user's
launch flags), ``fuzz`` (reproduce, fuzz, minimize, explore), ``graph``, ``prove``,
``replay`` (replay and conform on the real worker), ``oracle`` and ``engines``; ``across``
is ``--engine all``, ``figures`` regenerates docs/graphs.md's figures. No library imports
this package (``specstate/_cli_support.py``, ``_cli_output.py`` and ``_engine_option.py``
are the option helpers below it).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from typing import Sequence, cast

from specstate import __version__
from specstate._cli_output import add_output_options, json_output
from specstate._cli_support import Parser, guarded, int_arg
from specstate._engine_option import add_engine_option, add_server_args_options, resolve_launch

__all__ = ["main", "build_parser", "run_scenario", "SEED"]

#: the command modules, in the order of ``--help`` (``check`` first)
_COMMANDS = tuple(f"specstate.cli.{m}" for m in ("check", "fuzz", "graph", "prove", "replay", "oracle", "engines"))

#: ``--seed``: a non-negative integer of at most 64 bits (it becomes part of file names)
SEED = int_arg(0, (1 << 64) - 1)


def run_scenario(name: str, variant: str, seed: int, *, progress: bool = False):  # noqa: ANN201
    """Play scenario ``name`` under ``variant`` with ``seed``; returns the ``RunResult``
    (``progress``: a step counter on an interactive stderr): ``specstate.scenarios.run_scenario``,
    imported here when first run, so that ``--help`` and ``--version`` import no scenario."""
    from specstate.scenarios import run_scenario as play

    return play(name, variant, seed, progress=progress)


@json_output
def _cmd_run(args: argparse.Namespace) -> int:
    from specstate.fuzz.trace import save_trace, trace_from_result
    from specstate.report import format_result
    from specstate.scenarios import get_scenario
    from specstate.testing._api import from_run

    from specstate._engine_option import resolve_variant
    from specstate.fuzz.trace import failure_dir
    from specstate.model import get_variant
    from specstate.cli.multirank import maybe_multirank
    from specstate._engine_option import is_vllm

    if is_vllm(args):  # the vLLM family: its sweep (specstate/cli/vllm.py)
        from specstate.cli.vllm import cmd_run

        return cmd_run(args)
    status = maybe_multirank(args, "run")  # DP attention on N > 1 ranks: the multi-rank model
    if status is not None:
        return status
    resolve_variant(args, "fixed-threshold")
    failure_dir(args.failures)  # a bad --failures fails now, not after the run
    variant = get_variant(args.variant)
    if args.scenario is None:  # the variant's own story (seed-patch: the seed's benchmark), else the sweep
        args.scenario = variant.default_scenario() or "seed-sweep"
    get_scenario(args.scenario)
    launch = resolve_launch(args)  # the user's launch flags: the scenario's workload on that config
    t0 = time.perf_counter()
    print(f"specstate {__version__}: scenario {args.scenario}, variant {args.variant}, seed {args.seed}", file=sys.stderr)
    if launch is None:
        result = run_scenario(args.scenario, args.variant, args.seed, progress=not args.quiet)
    else:
        from specstate.launch_check._parts import play_on

        result = play_on(launch.config, args.scenario, args.variant, args.seed)
    path = None
    if not result.ok:
        config = launch.config if launch is not None else get_scenario(args.scenario).config
        trace = trace_from_result(result, seed=args.seed, scenario=None if launch else args.scenario, config=config)
        path = save_trace(trace, args.failures)
    args.json_result = from_run(result, kind="scenario", subject=f"{args.scenario} / {args.variant} (seed {args.seed})",
                                trace_path=path, elapsed_s=time.perf_counter() - t0, launch=launch)
    text = format_result(result, title=f"{args.scenario} / {args.variant} (seed {args.seed})", trace_path=path)
    if args.json_result.verdict == "not judged":  # no violation, but the launch is partly outside the model
        text = "NOT JUDGED" + text.removeprefix("PASS")
    print(text)
    for x in args.json_result.coverage["not_judged"]:
        print(f"  NOT JUDGED: {x.get('flag') or x.get('what')}: {x['reason']}")
    print(f"  time: {time.perf_counter() - t0:.2f} s", file=sys.stderr)
    return args.json_result.exit_code


def _cmd_list(args: argparse.Namespace) -> int:
    if args.what == "variants":
        from specstate.model import get_variant, variant_names
        for n in variant_names():
            v = get_variant(n)
            tag = "correct" if v.correct else (f"bug, caught by {v.expected_invariant}" if v.expected_invariant else "")
            alias = "" if v.name == n else f" (alias of {v.name})"
            print(f"{n:26s} {v.summary}{alias}" + (f"  [{tag}]" if tag else ""))
    elif args.what == "invariants":
        from specstate.invariants import all_invariants
        for inv in all_invariants():
            print(f"{inv.name:24s} {inv.doc.splitlines()[0]}\n{'':24s} mirrors {inv.mirrors}")
    else:
        from specstate.scenarios import SCENARIOS
        for s in SCENARIOS.values():
            print(f"{s.name:32s} {s.summary}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="specstate", description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--version", action="version", version=f"specstate {__version__}")
    p.add_argument("--debug", action="store_true", help="print the traceback of an error too (or SPECSTATE_DEBUG=1)")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run a built-in scenario under a variant, checking every invariant")
    r.add_argument("--scenario", default=None,
                   help="a built-in scenario (default: the variant's own, e.g. seed-benchmark for seed-patch; else seed-sweep)")
    r.add_argument("--variant", default=None, help="a built-in name or package.module:Object (default fixed-threshold)")
    add_engine_option(r)
    add_server_args_options(r)
    r.add_argument("--seed", type=SEED, default=0)
    r.add_argument("--failures", default=None, help="folder for failure traces (default ./specstate-failures)")
    add_output_options(r)
    r.set_defaults(func=_cmd_run)
    for what in ("variants", "invariants", "scenarios"):
        lp = sub.add_parser(what, help=f"list the {what}")
        lp.set_defaults(func=_cmd_list, what=what)
    for module in _COMMANDS:
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name != module:
                raise
            continue
        mod.add_parsers(sub)
    for sp in sub.choices.values():
        sp.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="print the traceback of an error too (or SPECSTATE_DEBUG=1)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """The ``specstate`` command; returns the exit code (``_cli_support`` says which)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    server_argv = argv[argv.index("--") + 1:] if "--" in argv else None  # sglang's flags (specstate.server_args)
    if server_argv is not None:
        argv = argv[:argv.index("--")]
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version, or an argument error (already printed, one line)
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    except KeyboardInterrupt:  # Ctrl-C while the subcommands' modules are imported
        print("specstate: interrupted by SIGINT; stopped while starting", file=sys.stderr)
        return 130
    if server_argv is not None and not getattr(args, "takes_server_flags", False):
        print(f"specstate {args.command}: error: takes no server flags after -- (see specstate {args.command} --help)",
              file=sys.stderr)
        return 2
    args.server_argv = server_argv or []
    from specstate.cli._unused import remember_words

    commands = cast("dict[str, argparse.ArgumentParser]", parser._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    remember_words(args, commands[args.command], argv[argv.index(args.command) + 1:])
    return guarded(args.func, args)


if __name__ == "__main__":
    sys.exit(main())
