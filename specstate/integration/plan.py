"""One plan file per device call: several engines, each with its workloads in a given order.

    python -m specstate.integration.plan PLAN.json OUT      (gpu_run.sh PLAN.json OUT calls it)
    python -m specstate.integration.plan conform PLAN.json OUT RESULT.json   (then this, on the recordings)

A cold engine start costs about 90 s on the H200, so one device call should run several
configurations (pools, chunk sizes, adaptive configs) rather than one. A plan::

    {"budget_s": 1500,
     "engines": [
       {"name": "small-pool", "engine": "sglang-0.5.12", "patch": "fixed",
        "engine_args": {"max_total_tokens": 2048, "chunked_prefill_size": 64},
        "workloads": ["seed-sweep", {"random": 3, "seed": 0}, {"fuzz_derived": 2, "seed": 20},
                      "my-workloads/may-kill-the-engine.json"],
        "timeout_s": 300},
       {"name": "v2-adaptive", "engine": "sglang-0.5.17", "adaptive_config": "my-adaptive.json",
        "workloads": ["seed-sweep"]},
       {"name": "v2-upstream-defaults", "engine": "sglang-0.5.17", "adaptive_config": null,
        "workloads": [{"random": 2, "seed": 7}]}]}

Each engine runs the driver once (``sglang_driver.run``) into ``OUT/<name>``, its workloads in
the order listed: a built-in name (``seed-sweep``), a generated batch with explicit seeds
(``random``: ``random_workloads(seed, n, threshold)``; ``fuzz_derived``: the fuzzer's generator
seeds ``100 + seed + i`` with prefix groups; ``pressure``: N of each pressure kind from ``seed``
for a pool of ``pool`` slots), or a workload file. Generated workloads are written as files
first, so a workload that may kill the engine can go last. ``adaptive_config``: a path
(``--engine-arg speculative_adaptive_config=PATH``), or ``null`` for upstream's defaults.

Before each engine starts, what is left of ``budget_s`` is checked: an engine that cannot get
``min_engine_s`` (default 150: a cold start and a workload) is skipped, saying so; the others
get ``min(timeout_s, what is left)``. ``OUT/plan-summary.json`` holds each engine's verdict
(ok, problems, start error); the exit status is 0 only if every engine ran and passed.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, Field, ValidationError

from specstate.errors import FileFormatError
from specstate.integration.catalog import DEFAULT, ENGINES, adapter_for
from specstate.schema._config import STRICT
from specstate.schema._messages import describe_error

__all__ = ["Plan", "load_plan", "run_plan", "conform_plan", "main"]

Name = Annotated[str, Field(min_length=1, max_length=60, pattern=r"^[A-Za-z0-9_.-]+$")]
Count = Annotated[int, Field(ge=1, le=1000)]
Seed = Annotated[int, Field(ge=0, le=(1 << 31) - 1)]


class _Random(BaseModel):
    model_config = STRICT
    random: Count
    seed: Seed = 0
    threshold: Annotated[int, Field(ge=0, le=4096)] = 5


class _FuzzDerived(BaseModel):
    model_config = STRICT
    fuzz_derived: Count
    seed: Seed = 0


class _Pressure(BaseModel):
    model_config = STRICT
    pressure: Count
    seed: Seed = 0
    pool: Annotated[int, Field(ge=64, le=1 << 24)] = 4096


WorkloadSpec = Union[Annotated[str, Field(min_length=1, max_length=1000)], _Random, _FuzzDerived, _Pressure]


class _Engine(BaseModel):
    model_config = STRICT
    name: Name
    engine: Literal[ENGINES] = DEFAULT.family  # type: ignore[valid-type]
    patch: Literal["none", "naive", "fixed"] = "fixed"
    plugin: Optional[Annotated[str, Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")]] = None
    engine_args: dict[str, Any] = {}
    #: a path, or ``null`` (upstream's defaults); left out: the driver's default
    adaptive_config: Optional[Annotated[str, Field(min_length=1, max_length=1000)]] = None
    threshold: Annotated[int, Field(ge=-1, le=4096)] = 5
    workloads: Annotated[list[WorkloadSpec], Field(min_length=1, max_length=200)]
    timeout_s: Annotated[int, Field(ge=60, le=86400)] = 600


class Plan(BaseModel):
    model_config = STRICT
    budget_s: Annotated[int, Field(ge=60, le=86400)]
    min_engine_s: Annotated[int, Field(ge=30, le=3600)] = 150
    engines: Annotated[list[_Engine], Field(min_length=1, max_length=32)]


def load_plan(path: str) -> Plan:
    from specstate.schema import read_text

    text = read_text(path, what="plan file", error=FileFormatError)
    try:
        plan = Plan.model_validate_json(text)
    except ValidationError as e:
        raise FileFormatError(describe_error(e, path)) from None
    names = [e.name for e in plan.engines]
    if len(set(names)) != len(names):
        raise FileFormatError(f"{path}: engines: expected distinct names but got {names}")
    return plan


def _workload_files(spec: _Engine, folder: Path, base: Path) -> list[str]:
    """Every workload of ``spec`` as a file, in the plan's order (generated ones written here)."""
    from specstate.integration.sglang_driver import pressure_items
    from specstate.integration.workloads import Workload, dump_workload, load_workload, random_workloads, seed_sweep

    folder.mkdir(parents=True, exist_ok=True)
    made: list[Workload] = []
    for w in spec.workloads:
        if isinstance(w, str):
            made.append(seed_sweep() if w == "seed-sweep" else load_workload(str(base / w) if not os.path.isabs(w) else w))
        elif isinstance(w, _Random):
            made += random_workloads(w.seed, w.random, w.threshold)
        elif isinstance(w, _FuzzDerived):
            made += [Workload.from_json(i["workload"]) for i in pressure_items(0, w.seed, w.fuzz_derived, 4096)]
        else:
            made += [Workload.from_json(i["workload"]) for i in pressure_items(w.pressure, w.seed, 0, w.pool)]
    paths = []
    for i, wl in enumerate(made):
        p = folder / f"{i:03d}-{wl.name}.json"
        dump_workload(wl, str(p))
        paths.append(str(p))
    return paths


def _argv(spec: _Engine, out: Path, files: list[str], limit: int) -> list[str]:
    argv = ["run", "--out", str(out), "--engine", spec.engine, "--patch", adapter_for(spec.engine).patch or spec.patch, "--threshold", str(spec.threshold), "--timeout", str(limit),
            "--start-timeout", str(min(limit, 900))]
    if spec.plugin:
        argv += ["--plugin", spec.plugin]
    args = dict(spec.engine_args)
    if "adaptive_config" in spec.model_fields_set:
        args["speculative_adaptive_config"] = spec.adaptive_config
    for k, v in args.items():
        argv += ["--engine-arg", f"{k}={json.dumps(v)}"]
    for f in files:
        argv += ["--scenario", f]
    return argv


def run_plan(plan: Plan, out: Path, base: Path) -> dict[str, Any]:
    """Every engine of ``plan`` in order, within its budget (module doc)."""
    from specstate.integration.sglang_driver import main as driver_main

    t0 = time.monotonic()
    rows: list[dict[str, Any]] = []
    for spec in plan.engines:
        left = int(plan.budget_s - (time.monotonic() - t0) - 25)
        if left < plan.min_engine_s:
            rows.append({"name": spec.name, "ok": False, "skipped": f"only {left} s of the budget left "
                         f"(an engine needs {plan.min_engine_s} s)"})
            print(f"[plan] skip {spec.name}: {rows[-1]['skipped']}", flush=True)
            continue
        limit = min(spec.timeout_s, left)
        files = _workload_files(spec, out / spec.name / "plan-workloads", base)
        print(f"[plan] ===== engine {spec.name} ({spec.engine}, {len(files)} workloads, limit {limit} s) =====", flush=True)
        rc = driver_main(_argv(spec, out / spec.name, files, limit))
        rows.append(_row(spec.name, rc, out / spec.name / "summary.json"))
    result = {"ok": all(r["ok"] for r in rows), "engines": rows, "wall_s": round(time.monotonic() - t0, 1)}
    (out / "plan-summary.json").write_text(json.dumps(result, indent=1, default=str))
    for r in rows:
        print(f"[plan] {r['name']}: {'ok' if r['ok'] else 'FAILED'}" +
              ("" if r["ok"] else f": {r.get('skipped') or '; '.join(r.get('problems') or [])[:400]}"), flush=True)
    print(f"[plan] VERDICT: {'ok' if result['ok'] else 'FAILED'} ({sum(r['ok'] for r in rows)} of {len(rows)} engines "
          f"passed)", flush=True)
    return result


def _row(name: str, rc: int, summary_path: Path) -> dict[str, Any]:
    try:
        s = json.loads(summary_path.read_text())
    except (OSError, ValueError):
        s = {}
    return {"name": name, "rc": rc, "ok": rc == 0 and bool(s.get("ok")), "problems": s.get("problems"),
            "start_error": s.get("start_error")}


def _variant_of(spec: _Engine) -> tuple[str, int | None] | None:
    """The model variant and threshold a plan engine's recordings are judged against: the fixed
    patch is ``fixed-threshold`` at the engine's threshold, no patch the same variant with no
    threshold (every decode speculates); a plugin or the naive patch: not judged here."""
    if spec.plugin or adapter_for(spec.engine).family != DEFAULT.family:
        return None
    if spec.patch == "fixed":
        return "fixed-threshold", None if spec.threshold < 0 else spec.threshold
    if spec.patch == "none":
        return "fixed-threshold", None
    return None


def _conform_one(path: str, variant: str, threshold: int | None) -> dict[str, Any]:
    from specstate.integration.conform import check_recording

    try:
        rep = check_recording(path, variant, threshold)
    except Exception as e:  # noqa: BLE001  (one unreadable recording is that recording's verdict)
        return {"file": path, "ok": False, "error": f"{type(e).__name__}: {str(e)[:300]}"}
    ok = not rep["mismatch_count"] and not rep["recorded_invariant_violations"] and not rep["model_invariant_violations"]
    return {"file": path, "ok": ok, "variant": variant, "threshold": threshold, "iterations": rep["iterations"],
            "requests": rep["requests"], "mismatch_count": rep["mismatch_count"], "mismatches": rep["mismatches"][:3],
            "recorded_invariant_violations": rep["recorded_invariant_violations"][:3],
            "model_invariant_violations": rep["model_invariant_violations"][:3]}


def conform_plan(plan: Plan, run_dir: Path, out_json: Path, *, jobs: int = 0) -> dict[str, Any]:
    """Every recording the plan's engines wrote (``RUN_DIR/<engine>/rec/*.jsonl``) against the model
    (``_variant_of``), one process per CPU (``jobs`` 0); ``out_json`` is rewritten after each
    recording, so a run cut short keeps what was judged. ``ok``: every recording judged conforms."""
    from concurrent.futures import ProcessPoolExecutor, as_completed

    todo: list[tuple[str, str, int | None]] = []
    rows: list[dict[str, Any]] = []
    for spec in plan.engines:
        recs = sorted(str(p) for p in (run_dir / spec.name / "rec").glob("*.jsonl"))
        judged = _variant_of(spec)
        if judged is None:
            rows += [{"file": p, "ok": None, "not_judged": "a plugin or the naive patch"} for p in recs]
        else:
            todo += [(p, judged[0], judged[1]) for p in recs]

    def write() -> dict[str, Any]:
        judged_rows = [r for r in rows if r.get("ok") is not None]
        result = {"ok": bool(judged_rows) and all(r["ok"] for r in judged_rows) and len(judged_rows) == len(todo),
                  "recordings": len(todo), "judged": len(judged_rows), "conforming": sum(bool(r["ok"]) for r in judged_rows),
                  "rows": sorted(rows, key=lambda r: r["file"])}
        out_json.write_text(json.dumps(result, indent=1, default=str))
        return result

    result = write()
    with ProcessPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
        for fut in as_completed([pool.submit(_conform_one, *t) for t in todo]):
            row = fut.result()
            rows.append(row)
            what = (f"{row['iterations']} iterations, {row['mismatch_count']} mismatches" if "iterations" in row
                    else row.get("error", ""))
            first = (row.get("mismatches") or row.get("recorded_invariant_violations") or
                     row.get("model_invariant_violations") or [""])[0]
            print(f"[conform] {os.path.relpath(row['file'], run_dir)}: {'ok' if row['ok'] else 'FAILED'}: {what} {first}"[:600],
                  flush=True)
            result = write()
    print(f"[conform] VERDICT: {'ok' if result['ok'] else 'FAILED'} ({result['conforming']} of {result['recordings']} "
          f"recordings conform)", flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    from specstate.errors import SpecStateError

    args = sys.argv[1:] if argv is None else argv
    if len(args) == 4 and args[0] == "conform":
        try:
            plan = load_plan(args[1])
        except SpecStateError as e:
            print(f"specstate: error: {e}", file=sys.stderr)
            return 2
        return 0 if conform_plan(plan, Path(args[2]), Path(args[3]))["ok"] else 1
    if len(args) != 2:
        print("usage: python -m specstate.integration.plan PLAN.json OUT\n"
              "       python -m specstate.integration.plan conform PLAN.json RUN_DIR RESULT.json", file=sys.stderr)
        return 2
    try:
        plan = load_plan(args[0])
    except SpecStateError as e:
        print(f"specstate: error: {e}", file=sys.stderr)
        return 2
    out = Path(args[1])
    out.mkdir(parents=True, exist_ok=True)
    return 0 if run_plan(plan, out, Path(args[0]).resolve().parent)["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
