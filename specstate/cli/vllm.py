"""``run``, ``fuzz`` and ``reproduce`` on the vLLM family (``check``'s is ``specstate/cli/check.py``).

The SGLang commands hand over here when ``_engine_option.is_vllm`` says the command is vLLM's
(``--engine vllm-0.34.0``, a ``vllm serve ...`` line after ``--``, a vLLM variant's name) or the
trace is a vLLM trace (``launch_check.vllm.is_vllm_trace``). Each prints the parts, the coverage
block and the verdict of ``specstate/launch_check/vllm.py``; exit 0 pass, 1 violation, 2 usage,
3 (``reproduce``) a different finding than the recorded one, 4 not judged.

- ``run``: the family's default scenario, the sweep (``launch_check.vllm.sweep_workloads``), after
  the engine start; ``--seed`` changes nothing there, so it is refused.
- ``fuzz``: the start, then ``--max-examples`` (else the profile's number) random workloads from
  ``random.Random(--seed)``.
- ``reproduce TRACE``: the trace's actions replayed (``--variant``: under another variant; a
  ``vllm serve`` line: on its config).

Without a ``vllm serve`` line ``run`` and ``fuzz`` judge ``launch_check.vllm.DEFAULT_LAUNCH`` (the
issue's line), and the coverage block says so.
"""

from __future__ import annotations

import argparse
import sys

from specstate.errors import UsageError

__all__ = ["cmd_run", "cmd_fuzz", "cmd_reproduce", "is_vllm_trace"]

SCENARIOS = ("sweep",)


def is_vllm_trace(path: str) -> bool:
    """A JSON trace ``check`` / ``run`` / ``fuzz`` wrote for the vLLM family (``"engine": "vllm-..."``);
    ``False`` for anything else (an SGLang trace, a file that is not JSON: its own path says why).
    Reads the file only (no model imported: ``tests/test_startup.py``), through the safe reader
    (size, type, nesting: a deeply nested file raised ``RecursionError`` from ``json.loads``)."""
    from specstate.errors import SpecStateError
    from specstate.schema._files import read_data

    try:
        data = read_data(path, what="trace", max_bytes=1 << 24)
    except SpecStateError:
        return False  # the SGLang reader reports it, in one line
    return isinstance(data, dict) and str(data.get("engine", "")).startswith("vllm-")


def _engine(args: argparse.Namespace) -> None:
    engine = getattr(args, "engine", None)
    if engine == "all":
        raise UsageError("--engine all: the SGLang families' table; the vLLM family runs alone (--engine vllm-0.34.0)")
    if engine is not None and not engine.startswith("vllm-"):
        raise UsageError(f"--engine {engine}: an SGLang family, but the command is vLLM's (a vllm serve line, a vLLM "
                         f"variant or trace): drop --engine or give --engine vllm-0.34.0")


def _launch(args: argparse.Namespace):  # noqa: ANN202
    """The ``vllm serve`` line after ``--`` (else the default launch); sglang's launch options refused."""
    from specstate.launch_check.vllm import default_launch
    from specstate.model.vllm_0_34_0.flags import is_vllm_serve, parse_vllm_serve

    if getattr(args, "server_args", None) is not None or getattr(args, "server_config", None) is not None:
        raise UsageError("--server-args / --config: sglang's; give the vLLM launch as 'vllm serve ...' after --")
    sglang_only = [o for o, k in (("--model-config", "model_config"), ("--gpu", "gpu")) if getattr(args, k, None)]
    if sglang_only:
        raise UsageError(f"{', '.join(sglang_only)}: read for sglang launches only; the vLLM family assumes what the "
                         f"line does not give (the coverage block says what)")
    argv = list(getattr(args, "server_argv", None) or ())
    if not argv:
        return default_launch()
    if not is_vllm_serve(argv):
        raise UsageError(f"{args.command} --engine vllm-0.34.0: expected a 'vllm serve MODEL ...' line after --")
    return parse_vllm_serve(argv)


def _variant(args: argparse.Namespace) -> str:
    from specstate.model.vllm_0_34_0.variants import DEFAULT_VARIANT

    return args.variant or DEFAULT_VARIANT


def _finish(args: argparse.Namespace, result) -> int:  # noqa: ANN001
    from specstate.launch_check.vllm import format_check

    print(format_check(result))
    print(f"  time: {result.elapsed_s:.1f} s", file=sys.stderr)
    args.json_result = result
    return int(result.exit_code)


def cmd_run(args: argparse.Namespace) -> int:
    """``specstate run --engine vllm-0.34.0 [--variant V] [--scenario sweep] [-- vllm serve ...]``."""
    from specstate.launch_check.vllm import check_vllm

    _engine(args)
    if args.scenario is not None and args.scenario not in SCENARIOS:
        raise UsageError(f"--scenario {args.scenario}: the vLLM family's scenarios are {', '.join(SCENARIOS)} "
                         f"(`specstate scenarios` lists SGLang's)")
    if args.seed:
        raise UsageError("--seed: the vLLM sweep is a fixed load, a seed changes nothing; `specstate fuzz --engine "
                         "vllm-0.34.0 --seed N` draws random workloads")
    launch = _launch(args)
    variant = _variant(args)
    print(f"specstate run: vllm-0.34.0 {variant}, scenario sweep, on {launch.describe()}")
    return _finish(args, check_vllm(launch, variant, failures=args.failures, parts=("start", "sweep")))


def cmd_fuzz(args: argparse.Namespace) -> int:
    """``specstate fuzz --engine vllm-0.34.0 [--variant V] [--seed N] [--max-examples N] [-- vllm serve ...]``."""
    from specstate.fuzz.profiles import profile_settings
    from specstate.launch_check.vllm import check_vllm

    _engine(args)
    launch = _launch(args)
    variant = _variant(args)
    seed = args.seed or 0
    n = args.max_examples or int(profile_settings(args.profile).max_examples)
    print(f"specstate fuzz: vllm-0.34.0 {variant}, {n} workloads (seed {seed}), on {launch.describe()}")
    return _finish(args, check_vllm(launch, variant, seed=seed, max_examples=n, failures=args.failures,
                                    parts=("start", "fuzz")))


def cmd_reproduce(args: argparse.Namespace) -> int:
    """``specstate reproduce TRACE.json`` on a vLLM trace (``check``, ``run`` or ``fuzz`` wrote it)."""
    from specstate.launch_check.vllm import reproduce_vllm

    _engine(args)
    given = [o for o, v in (("--seed", args.seed), ("--scenario", args.scenario)) if v is not None]
    if given:
        raise UsageError(f"{', '.join(given)}: a vLLM trace holds its own actions; drop {' and '.join(given)}")
    from specstate.schema._files import read_data

    recorded = str(read_data(args.trace, what="trace", max_bytes=1 << 24).get("variant", ""))
    if args.variant is None and ":" in recorded and not getattr(args, "allow_variant_import", False):
        from specstate.model.variant_registry import require_variant_import

        require_variant_import(recorded, args.trace, False, hint="add --allow-variant-import")
    launch = _launch(args) if getattr(args, "server_argv", None) else None
    print(f"specstate reproduce: vllm-0.34.0 trace {args.trace}")
    return _finish(args, reproduce_vllm(args.trace, args.variant, launch))
