"""``check``, ``run``, ``fuzz`` and ``reproduce`` on an engine with a model of its own (vLLM's).

The SGLang commands hand over here when ``_engine_option.own_model_release`` finds the release the
command is for (``--engine vllm-X.Y.Z``, a ``vllm serve ...`` line after ``--`` its launch part
recognises, one of its built-in variants' names) or the trace is such an engine's trace
(``is_vllm_trace``). Everything release-specific is asked of that release, found by its folder's
name (``Release.part``, ``model/releases.py``): its launch part (``model/<folder>/launch.py``: ``is_serve``,
``parse``, ``SERVE``, ``default_launch``, ``DEFAULT_VARIANT``) and its check
(``integration/<folder>/check.py``: ``check_vllm``, ``reproduce_vllm``, ``format_check``). Each prints
the parts, the coverage block and the verdict; exit 0 pass, 1 violation, 2 usage, 3 (``reproduce``)
a different finding than the recorded one, 4 not judged.

- ``check``: the start, the sweep and the fuzz on the launch line after ``--`` (``--parts``).
- ``run``: the family's default scenario, the sweep (its check's ``sweep_workloads``), after the
  engine start; ``--seed`` changes nothing there, so it is refused.
- ``fuzz``: the start, then ``--max-examples`` (else the profile's number) random workloads from
  ``random.Random(--seed)``.
- ``reproduce TRACE``: the trace's actions replayed (``--variant``: under another variant; a
  ``vllm serve`` line: on its config).

Without a ``vllm serve`` line ``run`` and ``fuzz`` judge the release's ``DEFAULT_LAUNCH`` (the
issue's line), and the coverage block says so.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from specstate.errors import UsageError

if TYPE_CHECKING:
    from specstate.model.releases import Release

__all__ = ["cmd_check", "cmd_run", "cmd_fuzz", "cmd_reproduce", "is_vllm_trace"]

SCENARIOS = ("sweep",)


def _trace_engine(path: str) -> str | None:
    """The ``"engine"`` a JSON trace names, when it is one of an engine with a model of its own
    (``vllm-...``); ``None`` for anything else (an SGLang trace, a file that is not JSON: its own
    path says why). Reads the file only (no model imported: ``tests/test_startup.py``), through the
    safe reader (size, type, nesting: a deeply nested file raised ``RecursionError`` from ``json.loads``)."""
    from specstate.errors import SpecStateError
    from specstate.model.releases import own_model_releases
    from specstate.schema._files import read_data

    try:
        data = read_data(path, what="trace", max_bytes=1 << 24)
    except SpecStateError:
        return None  # the SGLang reader reports it, in one line
    engine = str(data.get("engine", "")) if isinstance(data, dict) else ""
    return engine if any(engine.startswith(f"{r.engine}-") for r in own_model_releases()) else None


def is_vllm_trace(path: str) -> bool:
    """A JSON trace ``check`` / ``run`` / ``fuzz`` wrote for an engine with a model of its own
    (``"engine": "vllm-..."``); ``False`` for anything else."""
    return _trace_engine(path) is not None


def _release(args: argparse.Namespace, trace: str | None = None) -> "Release":
    """The release the command is for (``_engine_option.own_model_release``); for a trace without
    ``--engine`` or a launch line, the release its ``"engine"`` names (else its engine's newest)."""
    from specstate._engine_option import own_model_release
    from specstate.model.releases import own_model_releases

    found = own_model_release(args)
    if found is not None:
        return found
    engine = _trace_engine(trace) if trace is not None else None
    ours = own_model_releases()
    return next((r for r in ours if r.name == engine), None) or \
        next((r for r in ours if (engine or "").startswith(f"{r.engine}-")), ours[0])


def _part(release: "Release", name: str, room: str | None = None) -> Any:  # noqa: ANN401 - the release's module
    part = release.part(name, room)
    if part is None:
        raise UsageError(f"{release.name}: its folders hold no {name} part ({name}.py)")
    return part


def _check(release: "Release") -> Any:  # noqa: ANN401 - the release's check module
    return _part(release, "check", room="integration")


def _engine(args: argparse.Namespace, release: "Release") -> None:
    engine = getattr(args, "engine", None)
    if engine == "all":
        raise UsageError(f"--engine all: the SGLang families' table; the vLLM family runs alone "
                         f"(--engine {release.name})")
    if engine is not None and engine != release.name:
        raise UsageError(f"--engine {engine}: an SGLang family, but the command is vLLM's (a vllm serve line, a vLLM "
                         f"variant or trace): drop --engine or give --engine {release.name}")


def _refuse_sglang_launch(args: argparse.Namespace, what: str) -> None:
    """sglang's launch options (``--server-args``, ``--config``, ``--model-config``, ``--gpu``) refused."""
    if getattr(args, "server_args", None) is not None or getattr(args, "server_config", None) is not None:
        raise UsageError("--server-args / --config: sglang's; give the vLLM launch as 'vllm serve ...' after --")
    sglang_only = [o for o, k in (("--model-config", "model_config"), ("--gpu", "gpu")) if getattr(args, k, None)]
    if sglang_only:
        raise UsageError(f"{', '.join(sglang_only)}: read for sglang launches only; the vLLM {what} assumes what the "
                         f"line does not give ({'its' if what == 'check' else 'the'} coverage block says what)")


def _launch(args: argparse.Namespace, release: "Release") -> Any:  # noqa: ANN401 - the release's launch
    """The launch line after ``--`` as the release parses it (else its default launch); sglang's
    launch options refused."""
    launch = _part(release, "launch")
    _refuse_sglang_launch(args, "family")
    argv = list(getattr(args, "server_argv", None) or ())
    if not argv:
        return launch.default_launch()
    if not launch.is_serve(argv):
        raise UsageError(f"{args.command} --engine {release.name}: expected a '{launch.SERVE}' line after --")
    return launch.parse(argv)


def _variant(args: argparse.Namespace, release: "Release") -> str:
    return str(args.variant or _part(release, "launch").DEFAULT_VARIANT)


def _finish(args: argparse.Namespace, release: "Release", result: Any) -> int:  # noqa: ANN401 - its check's result
    print(_check(release).format_check(result))
    print(f"  time: {result.elapsed_s:.1f} s", file=sys.stderr)
    args.json_result = result
    return int(result.exit_code)


def cmd_check(args: argparse.Namespace) -> int:
    """``specstate check [--variant V] [--parts P] -- vllm serve ...``: start, sweep, fuzz on the launch."""
    release = _release(args)
    launch = _part(release, "launch")
    argv = list(getattr(args, "server_argv", None) or ())
    if not launch.is_serve(argv):
        raise UsageError(f"--engine {release.name}: expected a '{launch.SERVE}' line after --")
    _refuse_sglang_launch(args, "check")
    if args.budget is not None and "fuzz" not in args.parts:
        raise UsageError("--budget: the fuzz part's option, but --parts runs no fuzz")
    parsed = launch.parse(argv)
    variant = _variant(args, release)
    print(f"specstate check: {release.name} {variant} on {parsed.describe()}")
    result = _check(release).check_vllm(parsed, variant, seed=args.seed or 0, max_examples=args.max_examples or 200,
                                        budget_s=args.budget, failures=args.failures, parts=tuple(args.parts))
    return _finish(args, release, result)


def cmd_run(args: argparse.Namespace) -> int:
    """``specstate run --engine vllm-X.Y.Z [--variant V] [--scenario sweep] [-- vllm serve ...]``."""
    release = _release(args)
    _engine(args, release)
    if args.scenario is not None and args.scenario not in SCENARIOS:
        raise UsageError(f"--scenario {args.scenario}: the vLLM family's scenarios are {', '.join(SCENARIOS)} "
                         f"(`specstate scenarios` lists SGLang's)")
    if args.seed:
        raise UsageError(f"--seed: the vLLM sweep is a fixed load, a seed changes nothing; `specstate fuzz --engine "
                         f"{release.name} --seed N` draws random workloads")
    launch = _launch(args, release)
    variant = _variant(args, release)
    print(f"specstate run: {release.name} {variant}, scenario sweep, on {launch.describe()}")
    return _finish(args, release, _check(release).check_vllm(launch, variant, failures=args.failures,
                                                             parts=("start", "sweep")))


def cmd_fuzz(args: argparse.Namespace) -> int:
    """``specstate fuzz --engine vllm-X.Y.Z [--variant V] [--seed N] [--max-examples N] [-- vllm serve ...]``."""
    from specstate.fuzz.profiles import profile_settings

    release = _release(args)
    _engine(args, release)
    launch = _launch(args, release)
    variant = _variant(args, release)
    seed = args.seed or 0
    n = args.max_examples or int(profile_settings(args.profile).max_examples)
    print(f"specstate fuzz: {release.name} {variant}, {n} workloads (seed {seed}), on {launch.describe()}")
    return _finish(args, release, _check(release).check_vllm(launch, variant, seed=seed, max_examples=n,
                                                             failures=args.failures, parts=("start", "fuzz")))


def cmd_reproduce(args: argparse.Namespace) -> int:
    """``specstate reproduce TRACE.json`` on a vLLM trace (``check``, ``run`` or ``fuzz`` wrote it)."""
    release = _release(args, trace=args.trace)
    _engine(args, release)
    given = [o for o, v in (("--seed", args.seed), ("--scenario", args.scenario)) if v is not None]
    if given:
        raise UsageError(f"{', '.join(given)}: a vLLM trace holds its own actions; drop {' and '.join(given)}")
    from specstate.schema._files import read_data

    recorded = str(read_data(args.trace, what="trace", max_bytes=1 << 24).get("variant", ""))
    if args.variant is None and ":" in recorded and not getattr(args, "allow_variant_import", False):
        from specstate.model.variant_registry import require_variant_import

        require_variant_import(recorded, args.trace, False, hint="add --allow-variant-import")
    launch = _launch(args, release) if getattr(args, "server_argv", None) else None
    print(f"specstate reproduce: {release.name} trace {args.trace}")
    return _finish(args, release, _check(release).reproduce_vllm(
        args.trace, args.variant, launch, allow_variant_import=bool(getattr(args, "allow_variant_import", False))))
