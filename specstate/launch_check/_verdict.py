"""One verdict over the parts of a check: ``check_launch(launch, ...) -> CheckResult``.

The result is passed when every part that ran passed (a part that is not modelled for the
family is said so, and does not fail the check); its violation, trace and reproduce command
are the first failing part's, in the order the parts run (start, sweep, fuzz, prove): the
sweep's crash is what a load test meets first, with the shapes it would print.
"""

from __future__ import annotations

import time
from pathlib import Path

from specstate.launch_check._parts import Part, fuzz_part, prove_part, skipped_part, start_part, sweep_part
from specstate.server_args import Launch
from specstate.check_result import CheckResult
from specstate.launch_check import DEFAULT_BUDGET_S, PARTS

__all__ = ["check_launch", "part_result", "PARTS", "DEFAULT_BUDGET_S"]



def _run_parts(launch: Launch, parts: tuple[str, ...], *, budget_s: float, seed: int, max_examples: int | None,
               failures: Path | str | None, quiet: bool, on_part) -> list[Part]:  # noqa: ANN001
    cfg, v = launch.config, launch.variant
    runners = {"start": lambda: start_part(cfg, v), "sweep": lambda: sweep_part(cfg, v, failures=failures),
               "fuzz": lambda: fuzz_part(cfg, v, budget_s=budget_s, seed=seed, max_examples=max_examples,
                                         failures=failures, quiet=quiet),
               "prove": lambda: prove_part(cfg, v, failures=failures, quiet=quiet)}
    done: list[Part] = []
    for name in PARTS:
        if name in parts:
            started = not done or done[0].name != "start" or done[0].status != "failed"
            done.append(runners[name]() if started else skipped_part(name))
            if on_part is not None:
                on_part(done[-1])
    return done


def check_launch(launch: Launch, *, budget_s: float = DEFAULT_BUDGET_S, seed: int = 0,
                 max_examples: int | None = None, parts: tuple[str, ...] = PARTS,
                 failures: Path | str | None = None, quiet: bool = True, on_part=None) -> CheckResult:  # noqa: ANN001
    """Every part of ``parts`` on ``launch``'s config; ``on_part(part)`` after each (the CLI prints it)."""
    t0 = time.perf_counter()
    done = _run_parts(launch, parts, budget_s=budget_s, seed=seed, max_examples=max_examples, failures=failures,
                      quiet=quiet, on_part=on_part)
    failed = [p for p in done if p.status == "failed"]
    first = failed[0] if failed else None
    details = {"release": launch.release, "flags": list(launch.tokens), "not_modelled": list(launch.not_modelled),
               "notes": list(launch.notes), "config": launch.config.to_json(), "parts": [p.to_json() for p in done]}
    coverage = launch_coverage_of(launch, done)
    problems = tuple(f"{p.name}: {p.violation.describe() if p.violation else p.summary}" for p in failed)
    if first is not None and first.name == "start" and first.repro_command is None:
        first.repro_command = _start_command(launch)
    return CheckResult("check", launch.describe(), launch.variant, not failed, first.violation if first else None,
                       problems, first.trace_path if first else None, first.repro_command if first else None,
                       time.perf_counter() - t0, details, coverage)


def launch_coverage_of(launch: Launch, parts: list[Part]) -> dict:
    """The launch's coverage (flags, settings, environment) with the paths its parts reached and not,
    and each inconclusive part as not judged."""
    from specstate.check_result import coverage_block

    reached: dict[str, int] = {}
    for p in parts:
        for path, count in p.details.get("paths", {}).items():
            reached[path] = reached.get(path, 0) + count
    ran = [p.name for p in parts if p.status in ("passed", "failed", "inconclusive")]
    not_judged = list(launch.coverage.get("not_judged", ()))
    not_judged += [{"what": f"{p.name} (inconclusive)", "parts": p.name, "reason": p.summary} for p in parts
                   if p.status == "inconclusive"]
    c = launch.coverage
    block = coverage_block(judged=f"{', '.join(ran) or 'no part'} on {launch.describe()}",
                           modelled=c.get("modelled"), not_judged=not_judged, unaffected=c.get("unaffected"),
                           not_examined=c.get("not_examined"), assumed=c.get("assumed"), derived=c.get("derived"),
                           environment=c.get("environment"),
                           reached=[f"{k} ({v})" for k, v in sorted(reached.items())],
                           not_reached=not_reached(launch, set(reached), ran,
                                                   stopped=any(p.status == "failed" for p in parts)))
    return block


def not_reached(launch: Launch, reached: set[str], ran: list[str], *, stopped: bool = False) -> list[dict[str, str]]:
    """Each path of ``check.PATHS`` no part reached, and why (unreachable on this launch, or not steered to)."""
    from specstate.check import PATHS
    from specstate.launch_check._parts import chunk_reachable
    from specstate.model import as_variant
    from specstate.model.families import get_family

    if not {"sweep", "fuzz"} & set(ran):
        return []
    cfg = launch.config  # before the variant's own changes (its threshold is the launch's flag)
    adaptive = get_family(as_variant(launch.variant).family_name).adaptive
    why = {"chunked-prefill": "no workload had a prompt longer than the chunk size",
           "retraction": f"the {cfg.target_kv_pool_size}-slot KV pool was never squeezed",
           "shared-prefix": "no workload shared a prompt prefix", "abort": "no workload aborted a request",
           "crossed-up": "no decode batch grew past the switch", "crossed-down": "no decode batch shrank back"}
    if not chunk_reachable(cfg):
        why["chunked-prefill"] = (f"not reachable: the chunk size {cfg.chunked_prefill_size} is not below "
                                  f"{cfg.max_running_requests} running requests of the context length {cfg.context_len}")
    if not adaptive and cfg.disable_batch_threshold is None:
        for w in ("crossed-up", "crossed-down"):
            why[w] = ("the switch never fired: no --speculative-disable-batch-threshold on the launch, so this "
                      "variant always speculates (the switch path was not judged)")
    elif not cfg.speculative_adaptive and cfg.disable_batch_threshold is None:
        for w in ("crossed-up", "crossed-down"):
            why[w] = ("not reachable: static speculation (no --speculative-adaptive, no switch patch's threshold): "
                      "EAGLEWorkerV2 runs the launch's step count on every decode")
    after = " (a failing part stopped at its first violation: a crash at a switch is not counted as crossing it)"
    return [{"path": p, "why": why[p] + (after if stopped else "")} for p in PATHS if p not in reached]


def _start_command(launch: Launch) -> str:
    """The one command that shows a start refusal again: the start alone on the same flags."""
    import shlex

    from specstate.model import as_variant

    family = as_variant(launch.variant).family_name
    return (f"specstate check --engine {family} --variant {shlex.quote(launch.variant)} --parts start "
            f"{deployment_options(launch)}-- " + " ".join(shlex.quote(t) for t in launch.tokens))


def deployment_options(launch: Launch) -> str:
    """``--model-config PATH --gpu NAME `` of the launch's deployment (empty: none given)."""
    import shlex

    d = launch.settings.deployment
    model = f"--model-config {shlex.quote(d.model.path)} " if d.model is not None else ""
    return model + (f"--gpu {d.gpu.name} " if d.gpu is not None else "")


def part_result(part: Part, launch: Launch) -> CheckResult:
    """One part as a ``CheckResult`` (``specstate fuzz -- FLAGS`` prints and ``--json``s it)."""
    ok = part.status != "failed"
    problems = () if ok else (part.violation.describe() if part.violation else part.summary, part.summary)
    return CheckResult(part.name, f"{launch.variant} on {launch.describe()}", launch.variant, ok, part.violation,
                       problems, part.trace_path, part.repro_command, part.elapsed_s,
                       {**part.details, "flags": list(launch.tokens), "not_modelled": list(launch.not_modelled)},
                       launch_coverage_of(launch, [part]))
