"""Run specstate workloads through sglang 0.5.12's real v1 ``EAGLEWorker`` (GPU host).

    python -m specstate.integration.sglang_driver run --out DIR --patch fixed \\
        --scenario seed-sweep --random 20 --timing [--agree] [--threshold 5]

One ``run`` starts the Engine ONCE, in a child "host" process (sglang's SIGQUIT handler kills
the process tree that owns the Engine when the scheduler dies, so the orchestrator lives in
a separate process and survives to write the summary), runs every workload in order, and
writes under ``--out``:

- ``rec/<workload>.jsonl``: the recorder's lines (``docs/gpu.md``, "Recorder schema");
- ``stats.jsonl``: per-workload hook counters (decode calls, paths, time in the worker and
  in the recorder; written with the recorder on and off);
- ``crash.jsonl``: the recorder's ``fbg_error`` line(s), if the worker raised;
- ``host_result.json``: the host's own view (engine start time, per-workload wall time and
  per-request outputs);
- ``summary.json``: everything above condensed (``summarize``).

Exit status: 0 when the engine ran every workload without a crash, 1 on a crash (after
recording it, shutting the engine down and reaping its child processes), 2 on bad usage.

``main(argv)`` is the CLI-callable entry (``specstate replay --engine sglang ...``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

from specstate.integration.catalog import DEFAULT, ENGINES
from specstate.integration.workloads import (
    Request,
    Workload,
    load_workload,
    random_workloads,
    seed_repeated,
    seed_sweep,
    timing_workload,
)

__all__ = ["main", "engine_kwargs", "build_workloads", "summarize", "ASSETS", "REPO_ROOT"]

HERE = os.path.dirname(os.path.abspath(__file__))
ASSETS = os.path.join(HERE, "sglang_assets")
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
PLUGIN_PATH = os.path.join(ASSETS, "plugin_path")


def engine_kwargs(overrides: dict[str, Any] | None = None, engine: str | None = None) -> dict[str, Any]:
    """The Engine arguments of ``engine``'s release adapter (``catalog.adapter_for``; ``None``: the
    default release): those that ran on the H200."""
    from specstate.integration.catalog import adapter_for

    return adapter_for(engine).engine_kwargs(overrides)


# ---------------------------------------------------------------------------------------
# workloads of a run
# ---------------------------------------------------------------------------------------


def build_workloads(
    scenarios: list[str],
    *,
    n_random: int = 0,
    random_seed: int = 0,
    threshold: int = 5,
    timing: bool = False,
    timing_reps: int = 2,
    timing_modes: tuple[str, ...] = ("off", "on", "lean"),
) -> list[dict[str, Any]]:
    """The ordered list of ``{"workload": Workload JSON, "record": bool}`` a host runs."""
    out: list[dict[str, Any]] = []
    for s in scenarios:
        w = seed_sweep() if s == "seed-sweep" else seed_repeated(threshold=threshold) if s == "seed-repeated" else load_workload(s)
        out.append({"workload": w.to_json(), "record": True})
    for w in random_workloads(random_seed, n_random, threshold):
        out.append({"workload": w.to_json(), "record": True})
    if timing:
        out += timing_items(timing_reps, timing_modes)
    return out


#: a timing block's label -> the recorder mode it runs (``on``: full, the first label used)
TIMING_MODES = {"off": None, "on": "full", "full": "full", "lean": "lean", "deferred": "deferred"}


def timing_items(reps: int, modes: tuple[str, ...]) -> list[dict[str, Any]]:
    """Recorder overhead blocks in one engine: the fallback regime (c=30 > threshold) and the
    speculative regime (c=4), the same wave once per mode per repetition, the modes rotated
    so that each leads in turn (two modes: off on, on off, ...: drift cancels); first one
    unmeasured warm-up block per mode and shape."""
    bad = [m for m in modes if m not in TIMING_MODES]
    if bad:
        raise ValueError(f"Expected timing modes among {sorted(TIMING_MODES)} but got {bad}")
    out: list[dict[str, Any]] = []
    for c in (30, 4):
        for i, mode in enumerate(modes):
            w = _rename(timing_workload(c, tag=f"w{i}"), f"timing-c{c}-warmup{i}")
            out.append({"workload": w.to_json(), "record": mode != "off", "timing": "warmup",
                        "rec_mode": TIMING_MODES[mode] or "full"})
        for rep in range(reps):
            k = rep % len(modes)
            for mode in modes[k:] + modes[:k]:
                tag = f"{mode}{rep}"
                w = _rename(timing_workload(c, tag=tag), f"timing-c{c}-{tag}")
                out.append({"workload": w.to_json(), "record": mode != "off", "timing": mode, "rep": rep,
                            "rec_mode": TIMING_MODES[mode] or "full"})
    return out


def pressure_items(per_kind: int, seed: int, fuzz_derived: int, pool: int) -> list[dict[str, Any]]:
    """Memory-pressure workloads (``specstate.integration.pressure``) for a pool of ``pool``
    slots, and fuzzer-generated workloads with prefix groups."""
    from specstate.integration.pressure import KINDS, pressure_workloads, with_prefixes

    out = [{"workload": w.to_json(), "record": True}
           for w in pressure_workloads(seed, pool, {k: per_kind for k in KINDS})] if per_kind else []
    if fuzz_derived:
        from specstate.integration.fuzz_workloads import fuzz_workload

        for i in range(fuzz_derived):
            w = fuzz_workload(100 + seed + i)
            out.append({"workload": with_prefixes(w, seed + i).to_json(), "record": True})
    return out


def _rename(w: Workload, name: str) -> Workload:
    return Workload(name=name, waves=w.waves, seed=w.seed, meta=w.meta)


# ---------------------------------------------------------------------------------------
# host process (owns the Engine)
# ---------------------------------------------------------------------------------------


def _write_json_atomic(path: str, obj: Any) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, default=str)
    os.replace(tmp, path)


def _set_ctl(ctl_path: str, out: str | None, tag: str, stats: str, mode: str = "full") -> None:
    _write_json_atomic(ctl_path, {"out": out, "tag": tag, "stats": stats, "mode": mode})


def _req_result(req: Request, o: Any) -> dict[str, Any]:
    if isinstance(o, BaseException):
        return {"rid": req.rid, "error": f"{type(o).__name__}: {o}"[:500]}
    meta = o.get("meta_info", {}) if isinstance(o, dict) else {}
    fr = meta.get("finish_reason")
    return {
        "rid": req.rid,
        "n_out": len(o.get("output_ids", []) or []) if isinstance(o, dict) else None,
        "finish": fr.get("type") if isinstance(fr, dict) else fr,
        "finish_message": str(fr.get("message"))[:300] if isinstance(fr, dict) and fr.get("message") else None,
        "spec_verify_ct": meta.get("spec_verify_ct"),
        "spec_accept_length": meta.get("spec_accept_length"),
        "completion_tokens": meta.get("completion_tokens"),
        "first_ids": (o.get("output_ids", []) or [])[:6] if isinstance(o, dict) else None,
    }


def _run_wave(engine: Any, wl: Workload, wave: tuple[Request, ...]) -> list[dict[str, Any]]:
    """Send the wave's requests together, each on its own (``async_generate``), so a request
    that fails (refused, aborted) keeps every other request's result and is named itself."""
    import asyncio

    ids = [wl.prompt(r) for r in wave]
    sps = [r.sampling_params() for r in wave]

    async def one(i: int) -> Any:
        r = wave[i]
        if r.delay_s > 0:
            await asyncio.sleep(r.delay_s)
        return await engine.async_generate(input_ids=ids[i], sampling_params=sps[i], rid=r.rid)

    async def aborter(r: Request) -> None:
        await asyncio.sleep(float(r.abort_after_s or 0.0))
        engine.tokenizer_manager.abort_request(r.rid)

    async def all_() -> list[Any]:
        tasks = [asyncio.ensure_future(one(i)) for i in range(len(wave))]
        aborts = [asyncio.ensure_future(aborter(r)) for r in wave if r.abort_after_s is not None]
        res = await asyncio.gather(*tasks, return_exceptions=True)
        for a in aborts:
            a.cancel()
        await asyncio.gather(*aborts, return_exceptions=True)
        return list(res)

    outs = engine.loop.run_until_complete(all_())
    return [_req_result(r, o) for r, o in zip(wave, outs)]


def _flush_cache(engine: Any) -> bool | str:
    """``Engine.flush_cache`` before a workload: every recording starts from an empty radix
    tree and a full pool (``Scheduler.flush_cache`` only works when the scheduler is idle,
    so retry briefly). ``new_token_ratio`` is not reset by sglang; the recorder logs it with
    each arrival."""
    for _ in range(50):
        try:
            res = engine.flush_cache()
        except Exception as e:  # noqa: BLE001
            return f"error: {type(e).__name__}: {e}"[:200]
        if getattr(res, "success", res) in (True, None):
            return True
        time.sleep(0.1)
    return False


def _versions(res: dict[str, Any]) -> None:
    import sglang

    res["sglang_version"] = getattr(sglang, "__version__", None)
    try:
        import torch

        res["torch_version"] = torch.__version__
        res["cuda"] = torch.version.cuda
        res["gpu"] = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    except Exception as e:  # noqa: BLE001
        res["torch_err"] = repr(e)


def _start_engine(cfg: dict[str, Any], res: dict[str, Any], res_path: str) -> Any:
    """Import sglang and start the Engine once (times in ``res``)."""
    t0 = time.perf_counter()
    from sglang.srt.entrypoints.engine import Engine

    res["t_import_s"] = round(time.perf_counter() - t0, 2)
    _versions(res)
    kw = engine_kwargs(cfg.get("engine_overrides"), cfg.get("engine"))
    res["engine_kwargs"] = kw
    _write_json_atomic(res_path, res)
    print(f"[driver] importing took {res['t_import_s']} s; starting engine", flush=True)
    t1 = time.perf_counter()
    engine = Engine(**kw)
    res["engine_start_s"] = round(time.perf_counter() - t1, 2)
    print(f"[driver] ENGINE STARTED in {res['engine_start_s']} s", flush=True)
    try:
        import psutil

        res["children"] = [{"pid": p.pid, "name": p.name()} for p in psutil.Process().children(recursive=True)]
    except Exception as e:  # noqa: BLE001
        res["children"] = repr(e)
    _write_json_atomic(res_path, res)
    return engine


def _run_workload(engine: Any, item: dict[str, Any], cfg: dict[str, Any], res: dict[str, Any], res_path: str,
                  ctl: str, stats: str) -> None:
    """One workload: flush the cache, point the recorder at its file, send its waves."""
    wl = Workload.from_json(item["workload"])
    flushed = _flush_cache(engine) if cfg.get("flush_cache", True) else None
    rec_dir = os.path.join(cfg["out"], "rec")
    rec_path = os.path.join(rec_dir, f"{wl.name}.jsonl") if item.get("record") and cfg.get("record", True) else None
    _set_ctl(ctl, rec_path, wl.name, stats, item.get("rec_mode") or cfg.get("rec_mode", "full"))
    if cfg.get("flush_cache", True):
        # the recorder reads the new control file here, while the scheduler is idle (a
        # ``deferred`` recording of the last workload is written now, not in this one)
        _flush_cache(engine)
    entry: dict[str, Any] = {"name": wl.name, "record": rec_path is not None, "timing": item.get("timing"),
                             "rep": item.get("rep"),
                             "n_requests": wl.num_requests, "flushed": flushed, "waves": []}
    res["workloads"].append(entry)
    _write_json_atomic(res_path, res)
    tw = time.perf_counter()
    for wi, wave in enumerate(wl.waves):
        ts = time.perf_counter()
        try:
            reqs, err = _run_wave(engine, wl, wave), None
        except Exception as e:  # noqa: BLE001
            reqs, err = [], f"{type(e).__name__}: {e}"[:1000]
        entry["waves"].append({"i": wi, "size": len(wave), "wall_s": round(time.perf_counter() - ts, 4), "reqs": reqs,
                               "error": err})
        _write_json_atomic(res_path, res)
    entry["wall_s"] = round(time.perf_counter() - tw, 4)
    entry["n_out_tokens"] = sum((r.get("n_out") or 0) for w in entry["waves"] for r in w["reqs"])
    print(f"[driver] workload {wl.name}: {wl.num_requests} requests, {len(wl.waves)} waves, {entry['wall_s']} s, "
          f"{entry['n_out_tokens']} output tokens", flush=True)
    _write_json_atomic(res_path, res)


def _finish(engine: Any, res: dict[str, Any], res_path: str, ctl: str, stats: str) -> None:
    """Flush the last workload's hook counters (written at the next call after a tag change),
    shut the engine down."""
    _set_ctl(ctl, None, "final", stats)
    try:
        engine.generate(input_ids=[[5, 6, 7, 8]], sampling_params={"max_new_tokens": 2, "ignore_eos": True,
                                                                   "temperature": 0.0}, rid="specstate-flush")
    except Exception as e:  # noqa: BLE001
        res["flush_err"] = repr(e)
    ts = time.perf_counter()
    engine.shutdown()
    res["shutdown_s"] = round(time.perf_counter() - ts, 2)
    res["done"] = True
    _write_json_atomic(res_path, res)
    print(f"[driver] engine shut down in {res['shutdown_s']} s", flush=True)


def host_main(cfg_path: str) -> int:
    """The host process: one Engine, every workload in order (see the module doc)."""
    with open(cfg_path) as f:
        cfg = json.load(f)
    out_dir = cfg["out"]
    res: dict[str, Any] = {"cfg": {k: v for k, v in cfg.items() if k != "workloads"}, "pid": os.getpid(), "workloads": []}
    res_path = os.path.join(out_dir, "host_result.json")
    ctl = os.environ["SPECSTATE_REC_CTL"]
    stats = os.path.join(out_dir, "stats.jsonl")
    _set_ctl(ctl, None, "startup", stats)
    _phase(res, res_path, "engine start")
    engine = _start_engine(cfg, res, res_path)
    os.makedirs(os.path.join(out_dir, "rec"), exist_ok=True)
    for item in cfg["workloads"]:
        _phase(res, res_path, f"workload {item['workload'].get('name')}")
        _run_workload(engine, item, cfg, res, res_path, ctl, stats)
    _phase(res, res_path, "shutdown")
    _finish(engine, res, res_path, ctl, stats)
    return 0


def _phase(res: dict[str, Any], res_path: str, phase: str) -> None:
    """Where the host is (``host_result.json``): a timeout or a death names it."""
    res["phase"] = phase
    _write_json_atomic(res_path, res)


# ---------------------------------------------------------------------------------------
# orchestrator
# ---------------------------------------------------------------------------------------


def _descendants(pid: int) -> list[Any]:
    try:
        import psutil

        return psutil.Process(pid).children(recursive=True)
    except Exception:  # noqa: BLE001
        return []


def _reap(procs: dict[int, Any]) -> list[dict[str, Any]]:
    """Kill, by pid, the processes we saw under the host that are still running (psutil
    checks the creation time, so a reused pid is left alone)."""
    reaped = []
    for pid, p in procs.items():
        try:
            if p.is_running():
                name = p.name()
                p.kill()
                reaped.append({"pid": pid, "name": name})
        except Exception:  # noqa: BLE001
            pass
    for p in procs.values():
        try:
            p.wait(timeout=5)
        except Exception:  # noqa: BLE001
            pass
    return reaped


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in args.engine_arg or []:
        k, _, v = kv.partition("=")
        try:
            out[k] = json.loads(v)
        except json.JSONDecodeError:
            out[k] = v
    return out


def _workloads_of(args: argparse.Namespace, overrides: dict[str, Any]) -> list[dict[str, Any]]:
    items = build_workloads(list(args.scenario or []), n_random=args.random, random_seed=args.random_seed,
                            threshold=args.threshold, timing=args.timing, timing_reps=args.timing_reps,
                            timing_modes=tuple(args.timing_modes.split(",")))
    items += pressure_items(args.pressure, args.pressure_seed, args.fuzz_derived,
                            int(overrides.get("max_total_tokens") or 4096))
    if args.fuzz_v2:
        fuzz_v2_workloads = _fuzz_workloads_provider(args.engine).part(FUZZ_WORKLOADS)
        items += [{"workload": w.to_json(), "record": True} for w in fuzz_v2_workloads(args.fuzz_v2, args.fuzz_v2_seed)]
    return items


#: the adapter part that generates ``--fuzz-v2``'s workloads (``fuzz_workloads(n, seed0) -> [Workload]``)
FUZZ_WORKLOADS = "fuzz_workloads"


def _fuzz_workloads_provider(engine: str | None) -> Any:
    """The release adapter that generates ``--fuzz-v2``'s workloads (its ``parts`` name
    ``fuzz_workloads``): ``engine``'s own if it has them, else the oldest that does (the seeded
    generator's v2 cases under the adaptive release's H200 config)."""
    from specstate.integration.catalog import ADAPTERS, adapter_for

    own = adapter_for(engine)
    found = [own] if FUZZ_WORKLOADS in own.parts else [a for a in ADAPTERS if FUZZ_WORKLOADS in a.parts]
    if not found:
        from specstate.errors import UsageError

        raise UsageError("--fuzz-v2: no release adapter generates its workloads (a part fuzz_workloads)")
    return found[0]


def _host_env(args: argparse.Namespace, out_dir: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([PLUGIN_PATH, REPO_ROOT] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["SPECSTATE_PATCH"] = "none" if args.plugin else args.patch
    if args.plugin:
        env["SPECSTATE_USER_PLUGIN"] = args.plugin
    env.update(SPECSTATE_THRESHOLD=str(args.threshold), SPECSTATE_NAIVE_PATH=args.naive_path,
               SPECSTATE_AGREE="1" if args.agree else "0", SPECSTATE_REC_CTL=os.path.join(out_dir, "ctl.json"),
               SPECSTATE_REC_CRASH=os.path.join(out_dir, "crash.jsonl"), PYTHONUNBUFFERED="1")
    from specstate.integration.catalog import adapter_for

    env.update(adapter_for(args.engine).engine_env())
    env.setdefault("HF_HUB_OFFLINE", "1")
    return env


def _started(res_path: str) -> bool:
    try:
        with open(res_path) as f:
            return json.load(f).get("engine_start_s") is not None
    except (OSError, ValueError):
        return False


def _kill_tree(proc: subprocess.Popen, seen: dict[int, Any]) -> None:
    """SIGKILL the host and every process under it (by pid, as seen; ``_reap`` waits for them)."""
    for p in _descendants(proc.pid):
        seen.setdefault(p.pid, p)
    proc.send_signal(signal.SIGKILL)
    for p in seen.values():
        try:
            p.kill()
        except Exception:  # noqa: BLE001  (already gone)
            pass


def _watch(proc: subprocess.Popen, limits: tuple[float, float], t0: float,
           res_path: str) -> tuple[int, str | None, dict[int, Any]]:
    """Wait for the host; past ``limits`` (the whole run, the engine start; 0: none) end its
    process tree and say which limit; remember its descendants (to reap them)."""
    timeout, start_timeout = limits
    seen: dict[int, Any] = {}
    while True:
        try:
            return proc.wait(timeout=2.0), None, seen
        except subprocess.TimeoutExpired:
            for p in _descendants(proc.pid):
                seen.setdefault(p.pid, p)
            elapsed = time.perf_counter() - t0
            why = None
            if timeout and elapsed > timeout:
                why = f"the run exceeded --timeout {timeout:g} s"
            elif start_timeout and elapsed > start_timeout and not _started(res_path):
                why = f"the engine did not start within --start-timeout {start_timeout:g} s"
            if why is not None:
                print(f"[driver] {why}: ending the host's process tree", flush=True)
                _kill_tree(proc, seen)
                return proc.wait(), why, seen


def _tee(proc: subprocess.Popen, log_path: str) -> Any:
    """Copy the host's output (sglang's processes' too) to our stdout and ``host.log``."""
    import threading

    def pump() -> None:
        with open(log_path, "w", errors="replace") as log:
            for raw in iter(proc.stdout.readline, b""):  # type: ignore[union-attr]
                line = raw.decode("utf-8", errors="replace")
                sys.stdout.write(line)
                sys.stdout.flush()
                log.write(line)
                log.flush()

    t = threading.Thread(target=pump, name="host-log", daemon=True)
    t.start()
    return t


def _verdict(summary: dict[str, Any], out_dir: str, cfg: dict[str, Any], killed: str | None) -> None:
    """``start_error``, per-workload ``verdict``, the run's ``problems`` and ``ok`` (``verdicts.py``)."""
    from specstate.integration.verdicts import start_failure, workload_verdict

    host = _read_json(os.path.join(out_dir, "host_result.json"))
    problems: list[str] = []
    start = start_failure(_read_text(os.path.join(out_dir, "host.log")), host)
    if start is not None:
        kw = host.get("engine_kwargs") or cfg.get("engine_overrides") or {}
        start["engine_kwargs"] = {k: v for k, v in kw.items()
                                  if k.startswith(("speculative", "cuda_graph", "max_", "mem_", "chunked", "context"))}
        summary["start_error"] = start
        if start["cls"] is None and killed is not None:  # the limit's own problem line says it
            start["msg"] = f"ended by the driver: {killed}"
        else:
            problems.append(f"the engine did not start ({start['phase']}): {_start_text(start)}")
    judged = _start_judged(cfg, start)
    if judged is not None:
        summary["start_model"] = judged
        if judged["agrees"] is False:
            problems.append(f"the model's engine start disagrees with the engine's: {judged['line'][:300]}")
    if killed is not None:
        problems.append(f"{killed} (in phase {host.get('phase') or 'host start'})")
    items = {it["workload"]["name"]: it["workload"] for it in cfg["workloads"]}
    for w in summary.get("workloads", []):
        admitted = w.get("arrived")
        v = workload_verdict(_host_entry(host, w["name"]), items.get(w["name"], {}), admitted)
        w["verdict"] = v
        problems += [f"{w['name']}: {p}" for p in v["problems"]]
    for c in summary.get("crashes", []):
        problems.append(f"worker crash at iter {c.get('iter')} ({c.get('tag')}): {c['error']}")
    summary["problems"] = problems
    summary["ok"] = summary.get("host_returncode") == 0 and not problems


def _start_text(start: dict[str, Any]) -> str:
    """``Class: message`` of a start failure, or the message alone when there was no exception."""
    msg = str(start.get("msg") or "")[:300]
    return f"{start['cls']}: {msg}" if start.get("cls") else msg


def _start_judged(cfg: dict[str, Any], start: dict[str, Any] | None) -> dict[str, Any] | None:
    """The model's engine start beside the engine's (``start_prediction.py``), for an engine run
    without a patch of a family whose start is modelled; ``None`` otherwise."""
    from specstate.integration.start_prediction import ENGINE_VARIANT, compare_start, predict_start

    variant = ENGINE_VARIANT.get(cfg.get("engine", ""))
    if variant is None or cfg.get("patch", "none") != "none" or cfg.get("plugin"):
        return None
    try:
        model = predict_start(engine_kwargs(cfg.get("engine_overrides"), cfg["engine"]), variant)
    except Exception as e:  # noqa: BLE001  (the verdict is written whatever the model does)
        return {"agrees": None, "line": f"the model's start check failed: {type(e).__name__}: {e}"}
    return {**compare_start(model, start), "model": model}


def _host_entry(host: dict[str, Any], name: str) -> dict[str, Any]:
    return next((w for w in host.get("workloads", []) if w.get("name") == name), {})


def _read_json(path: str) -> dict[str, Any]:
    try:
        with open(path) as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _read_text(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _prepare_out(out: str) -> str:
    """``--out`` made and writable (else one line, exit 2)."""
    out_dir = os.path.abspath(out)
    try:
        os.makedirs(out_dir, exist_ok=True)
        probe = os.path.join(out_dir, f".probe-{os.getpid()}")
        with open(probe, "w"):
            pass
        os.remove(probe)
    except OSError as e:
        from specstate.errors import UsageError

        raise UsageError(f"Expected --out to be a folder specstate can write but {out_dir}: {e.strerror or e}") from None
    return out_dir


def run(args: argparse.Namespace) -> int:
    out_dir = _prepare_out(args.out)
    overrides = _overrides(args)
    workloads = _workloads_of(args, overrides)
    if not workloads:
        print("nothing to run: give --scenario, --random, --fuzz-v2 or --timing", file=sys.stderr)
        return 2
    from specstate.integration.catalog import adapter_for

    if args.patch.startswith("v2-") and args.patch not in adapter_for(args.engine).patches:
        print(f"--patch {args.patch} is a patch of EAGLEWorkerV2, which --engine {args.engine}'s plugin does not install",
              file=sys.stderr)
        return 2
    cfg = {"out": out_dir, "engine": args.engine, "patch": args.patch, "plugin": args.plugin, "naive_path": args.naive_path,
           "threshold": args.threshold, "agree": args.agree, "record": not args.no_record, "rec_mode": args.rec_mode,
           "engine_overrides": overrides, "workloads": workloads}
    cfg_path = os.path.join(out_dir, "host_config.json")
    _write_json_atomic(cfg_path, cfg)
    for stale in ("crash.jsonl", "stats.jsonl", "host_result.json", "summary.json", "host.log"):
        if os.path.exists(os.path.join(out_dir, stale)):
            os.remove(os.path.join(out_dir, stale))
    print(f"[driver] run: engine={args.engine} patch={args.patch}" + (f"/{args.naive_path}" if args.patch == "naive" else "")
          + f" threshold={args.threshold} agree={args.agree} workloads={len(workloads)} out={out_dir}", flush=True)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "specstate.integration.sglang_driver", "_host", "--config", cfg_path],
                            env=_host_env(args, out_dir), cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    pump = _tee(proc, os.path.join(out_dir, "host.log"))
    rc, killed, seen = _watch(proc, (args.timeout, args.start_timeout), t0, os.path.join(out_dir, "host_result.json"))
    reaped = _reap(seen)
    pump.join(timeout=10)
    if not pump.is_alive() and proc.stdout is not None:
        proc.stdout.close()
    summary = summarize(out_dir)
    summary.update(host_returncode=rc, host_timed_out=killed is not None, host_killed_because=killed,
                   host_wall_s=round(time.perf_counter() - t0, 2), reaped=reaped, engine=args.engine, patch=args.patch,
                   naive_path=args.naive_path if args.patch == "naive" else None, threshold=args.threshold,
                   agree=args.agree)
    _verdict(summary, out_dir, cfg, killed)
    _write_json_atomic(os.path.join(out_dir, "summary.json"), summary)
    _print_summary(summary)
    return 0 if summary["ok"] else 1


def _read_jsonl(path: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    out.append({"ev": "unparsable", "line": line[:200]})
    return out


def _with_recording(e: dict[str, Any], rec: str) -> dict[str, Any]:
    """A workload's summary with its recording's counts (its release adapter's, from the one
    loader: ``conform.summary_of_file``) and the requests that reached the scheduler."""
    from specstate.integration.conform import summary_of_file

    if os.path.exists(rec):
        records, e["analysis"] = summary_of_file(rec)
        e["arrived"] = len({r.get("rid") for r in records if r.get("ev") == "arrive"})
    return e


def summarize(out_dir: str) -> dict[str, Any]:
    """Condense host_result.json, stats.jsonl, crash.jsonl and the recordings."""
    s: dict[str, Any] = {}
    hr_path = os.path.join(out_dir, "host_result.json")
    hr: dict[str, Any] = {}
    if os.path.exists(hr_path):
        with open(hr_path) as f:
            hr = json.load(f)
    for k in ("sglang_version", "torch_version", "cuda", "gpu", "t_import_s", "engine_start_s", "shutdown_s", "done"):
        s[k] = hr.get(k)
    stats = {st.get("tag"): st for st in _read_jsonl(os.path.join(out_dir, "stats.jsonl"))}
    wls = []
    for w in hr.get("workloads", []):
        st = stats.get(w["name"], {})
        dc = st.get("decode_calls")
        e: dict[str, Any] = {
            "name": w["name"],
            "record": w.get("record"),
            "timing": w.get("timing"),
            "n_requests": w.get("n_requests"),
            "wall_s": w.get("wall_s"),
            "n_out_tokens": w.get("n_out_tokens"),
            "decode_steps": dc,
            "fbg_calls": st.get("calls"),
            "paths": st.get("paths"),
            "wall_per_decode_step_ms": round(1e3 * w["wall_s"] / dc, 4) if dc and w.get("wall_s") else None,
            "worker_ms_per_decode_step": round(1e3 * st["t_fbg_decode_s"] / dc, 4) if dc else None,
            "recorder_ms_per_decode_step": round(1e3 * st["t_rec_decode_s"] / dc, 4) if dc else None,
            "gc_ms_per_decode_step": round(st["gc_ms"] / dc, 4) if dc and "gc_ms" in st else None,
            "gc_n": st.get("gc_n"),
            "hook_ms_per_decode_step": {k: round(v / dc, 4) for k, v in (st.get("hook_ms") or {}).items()} if dc else None,
            "finish": _count([r.get("finish") for wv in w.get("waves", []) for r in wv.get("reqs", [])]),
            "rep": w.get("rep"),
            "step_ms": st.get("step_ms") if w.get("timing") else None,
            "wave_errors": [wv["error"] for wv in w.get("waves", []) if wv.get("error")],
        }
        wls.append(_with_recording(e, os.path.join(out_dir, "rec", f"{w['name']}.jsonl")))
    s["workloads"] = wls
    s["crashes"] = [
        {
            "iter": c.get("iter"),
            "tag": c.get("tag"),
            "path": c.get("path"),
            "bs": c.get("bs"),
            "phase_stack": c.get("phase_stack"),
            "error": {k: c.get("error", {}).get(k) for k in ("cls", "msg")},
            "tb_last": (c.get("error", {}).get("tb_tail") or [])[-6:],
            "before": {k: (c.get("before") or {}).get(k) for k in ("mode", "input_ids", "out_cache_loc", "seq_lens_sum")},
            "after": {k: (c.get("after") or {}).get(k) for k in ("mode", "input_ids", "out_cache_loc", "seq_lens_sum")},
            "spec_info_after": ((c.get("after") or {}).get("spec_info") or {}).get("cls"),
            "events_tail": (c.get("events") or [])[-4:],
        }
        for c in _read_jsonl(os.path.join(out_dir, "crash.jsonl"))
    ]
    s["timing"] = timing_table(wls)
    return s


def _count(xs: list[Any]) -> dict[str, int]:
    d: dict[str, int] = {}
    for x in xs:
        d[str(x)] = d.get(str(x), 0) + 1
    return d


def timing_table(wls: list[dict[str, Any]]) -> dict[str, Any]:
    """Recorder overhead per decode step, per timing shape (``timing-c30``, ``timing-c4``) and
    mode, from the blocks of one engine run (``timing_items``):

    - ``step_ms``: min / median / max over every decode step of the mode's blocks (one step:
      from a decode ``forward_batch_generation`` entry to the next one's, so the whole
      scheduler iteration, hooks included), and ``ratio_<mode>`` = median / the ``off`` median;
    - ``paired_<mode>``: per repetition, the mode's block median over the ``off`` block median
      of the same repetition: min / median / max over repetitions;
    - ``wall_ms_per_step``: the block's wall time / decode steps (prefill and client included),
      median over blocks, and ``wall_ratio_<mode>``.
    """
    out: dict[str, Any] = {}
    for w in wls:
        label = w.get("timing")
        if label in (None, "warmup"):
            continue
        d = out.setdefault(w["name"].rsplit("-", 1)[0], {}).setdefault(label, [])
        d.append(w)
    return {shape_: _timing_shape(by_mode) for shape_, by_mode in out.items()}


def _stats3(xs: list[float]) -> dict[str, Any]:
    import statistics

    if not xs:
        return {"n": 0}
    return {"n": len(xs), "min": round(min(xs), 4), "median": round(statistics.median(xs), 4), "max": round(max(xs), 4)}


def _timing_shape(by_mode: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    import statistics

    res: dict[str, Any] = {}
    block_med: dict[str, dict[Any, float]] = {}
    for mode, blocks in by_mode.items():
        steps = [x for b in blocks for x in (b.get("step_ms") or [])]
        walls = [b["wall_per_decode_step_ms"] for b in blocks if b.get("wall_per_decode_step_ms")]
        hooks = [b["recorder_ms_per_decode_step"] for b in blocks if b.get("recorder_ms_per_decode_step") is not None]
        gcs = [b["gc_ms_per_decode_step"] for b in blocks if b.get("gc_ms_per_decode_step") is not None]
        gen2 = [b["gc_n"][2] for b in blocks if b.get("gc_n")]
        block_med[mode] = {b.get("rep"): statistics.median(b["step_ms"]) for b in blocks if b.get("step_ms")}
        res[mode] = {"blocks": len(blocks), "step_ms": _stats3(steps), "block_median_step_ms": _stats3(list(block_med[mode].values())),
                     "wall_ms_per_step": _stats3(walls), "fbg_hook_ms_per_step": _stats3(hooks),
                     "gc_ms_per_step": _stats3(gcs), "gen2_passes_per_block": _stats3(gen2),
                     "hook_ms_per_step": {h: _stats3([b["hook_ms_per_decode_step"].get(h, 0.0) for b in blocks
                                                      if b.get("hook_ms_per_decode_step")])
                                          for h in sorted({h for b in blocks for h in (b.get("hook_ms_per_decode_step") or {})})}}
    off: dict[str, Any] = res.get("off") or {}
    for mode in [m for m in res if m != "off" and off]:
        a, b = res[mode]["step_ms"].get("median"), off["step_ms"].get("median")
        res[f"ratio_{mode}"] = round(a / b, 4) if a and b else None
        wa, wb = res[mode]["wall_ms_per_step"].get("median"), off["wall_ms_per_step"].get("median")
        res[f"wall_ratio_{mode}"] = round(wa / wb, 4) if wa and wb else None
        pairs = [v / block_med["off"][r] for r, v in block_med[mode].items() if block_med["off"].get(r)]
        res[f"paired_{mode}"] = _stats3(pairs)
    return res


def _print_summary(s: dict[str, Any]) -> None:
    print("[driver] ===== summary =====", flush=True)
    print(
        f"[driver] sglang {s.get('sglang_version')} torch {s.get('torch_version')} gpu {s.get('gpu')}; "
        f"engine start {s.get('engine_start_s')} s; host rc {s.get('host_returncode')}; ok={s.get('ok')}",
        flush=True,
    )
    for w in s.get("workloads", []):
        a = w.get("analysis") or {}
        if "switch_down" in a:  # a sglang 0.5.17 recording (sglang_0_5_17.conformance.recording_counts)
            print(f"[driver]  {w['name']}: wall {w.get('wall_s')} s, {a.get('loops')} iterations, launches {a.get('paths')}, "
                  f"drafting off {a.get('switch_down')} on {a.get('switch_up')}, step changes {a.get('step_changes')} "
                  f"(down {a.get('steps_down')} up {a.get('steps_up')}), accept lengths {a.get('accept_hist')}, "
                  f"crashes {a.get('crashes')}", flush=True)
            continue
        print(
            f"[driver]  {w['name']}: wall {w.get('wall_s')} s, decode steps {w.get('decode_steps')}, paths {w.get('paths')}, "
            f"ms/step {w.get('wall_per_decode_step_ms')}, mean accept (spec) {a.get('mean_accept_len_spec')}, "
            f"spec switched off {a.get('switch_off')} resumed {a.get('resume')}, check failures {a.get('n_check_failures')}",
            flush=True,
        )
    for c in s.get("crashes", []):
        print(f"[driver]  CRASH at iter {c.get('iter')} ({c.get('tag')}), path {c.get('path')}, bs {c.get('bs')}: {c['error']}", flush=True)
    for shape_, t in (s.get("timing") or {}).items():
        for mode, d in t.items():
            if isinstance(d, dict) and "step_ms" in d:
                st, pr = d["step_ms"], t.get(f"paired_{mode}") or {}
                print(f"[driver]  {shape_} {mode}: {d['blocks']} blocks, step ms min/median/max {st.get('min')}/"
                      f"{st.get('median')}/{st.get('max')} (n {st.get('n')}), ratio {t.get(f'ratio_{mode}')}, paired "
                      f"{pr.get('min')}/{pr.get('median')}/{pr.get('max')}, wall ratio {t.get(f'wall_ratio_{mode}')}, "
                      f"gc ms/step {(d.get('gc_ms_per_step') or {}).get('median')}, gen2 passes/block "
                      f"{(d.get('gen2_passes_per_block') or {}).get('median')}", flush=True)
                hooks = {h: v.get("median") for h, v in (d.get("hook_ms_per_step") or {}).items() if v.get("median")}
                if hooks:
                    print(f"[driver]  {shape_} {mode}: hook ms/step (median of blocks) {hooks}", flush=True)
    if s.get("reaped"):
        print(f"[driver]  processes still running after the host ended, now ended: {s['reaped']}", flush=True)
    _print_verdict(s)


def _print_verdict(s: dict[str, Any]) -> None:
    """The last lines: per-workload request counts, why the engine did not start, the verdict."""
    for w in s.get("workloads", []):
        v = w.get("verdict") or {}
        if v:
            print(f"[driver]  {w['name']}: requests {v['counts']}" + ("" if v["ok"] else f"; FAILED: {'; '.join(v['problems'][:3])}"),
                  flush=True)
    start = s.get("start_error")
    if start:
        print(f"[driver]  ENGINE DID NOT START (phase {start['phase']}): {_start_text(start)}", flush=True)
        if start.get("sglang_frames"):
            print(f"[driver]    in sglang: {' <- '.join(reversed(start['sglang_frames'][-4:]))}", flush=True)
        print(f"[driver]    engine arguments: {start.get('engine_kwargs')}", flush=True)
    judged = s.get("start_model")
    if judged:
        mark = {True: "START AS MODELLED", False: "START NOT AS MODELLED", None: "START NOT JUDGED"}[judged["agrees"]]
        print(f"[driver]  {mark}: {judged['line'][:400]}", flush=True)
    if s.get("ok"):
        print("[driver] VERDICT: ok", flush=True)
    else:
        problems = s.get("problems") or [f"host exit status {s.get('host_returncode')}"]
        print(f"[driver] VERDICT: FAILED ({len(problems)} problem{'s' if len(problems) != 1 else ''}): "
              f"{'; '.join(problems[:5])}", flush=True)


# ---------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="specstate-sglang-driver", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd")
    r = sub.add_parser("run", help="start the engine once and run workloads")
    r.add_argument("--out", required=True, help="output folder")
    r.add_argument("--patch", choices=("none", "naive", "fixed", "agreed", "v2-switch-naive", "v2-switch"), default="fixed",
                   help="agreed: the DP-attention patch (one decision from the gathered MLP-sync record; on one rank, "
                        "fixed); v2-switch-naive / v2-switch: the seed's switch on EAGLEWorkerV2, for the "
                        "engine whose adapter lists them (its switch_patch.py; a static launch)")
    r.add_argument("--naive-path", choices=("graph", "eager", "carried", "carried-alloc"), default="graph")
    r.add_argument("--threshold", type=int, default=5)
    r.add_argument("--scenario", action="append", help="'seed-sweep', 'seed-repeated' (the seed's benchmark: one repeated prompt, waves above the threshold split 2 + rest) or a workload JSON file (repeatable)")
    r.add_argument("--random", type=int, default=0, help="number of generated random workloads")
    r.add_argument("--random-seed", type=int, default=0)
    r.add_argument("--timing", action="store_true", help="recorder on/off timing workloads")
    r.add_argument("--agree", action="store_true", help="rewrite weights so target and draft agree")
    r.add_argument("--no-record", action="store_true")
    r.add_argument("--timeout", type=float, default=0.0,
                   help="end the host's process tree after this many seconds, naming the phase it was in (0: none)")
    r.add_argument("--start-timeout", type=float, default=900.0,
                   help="end it if the engine has not started after this many seconds (0: none; default 900)")
    r.add_argument("--engine-arg", action="append",
                   help="extra Engine kwarg KEY=JSON (e.g. speculative_adaptive_config=\"PATH\" or "
                        "speculative_adaptive_config=null for upstream's defaults on an adaptive release)")
    r.add_argument("--rec-mode", choices=("full", "lean", "deferred"), default="full",
                   help="recorder mode for recorded workloads (lean: what conformance reads, written by a thread; "
                        "deferred: the same, captured raw and written when the workload ends)")
    r.add_argument("--timing-reps", type=int, default=2)
    r.add_argument("--timing-modes", default="off,on,lean",
                   help="comma-separated recorder modes of the timing blocks (off, on = full, lean, deferred)")
    r.add_argument("--pressure", type=int, default=0,
                   help="memory-pressure workloads of each kind (retract, chunk, prefix, abort, mixed)")
    r.add_argument("--pressure-seed", type=int, default=0)
    r.add_argument("--fuzz-derived", type=int, default=0,
                   help="N fuzzer-generated workloads with prefix groups: specstate.fuzz.generate seeds "
                        "100 + --pressure-seed + i, i < N")
    r.add_argument("--plugin", default=None, metavar="MODULE:FUNC",
                   help="your own sglang plugin (entry-point style register function) instead of --patch")
    r.add_argument("--engine", choices=ENGINES, default=DEFAULT.family,
                   help="the sglang the host runs (an adaptive release: the v2 worker with adaptive speculation; --patch none)")
    r.add_argument("--fuzz-v2", type=int, default=0,
                   help="workloads from the seeded generator's v2 cases under the H200 adaptive config")
    r.add_argument("--fuzz-v2-seed", type=int, default=0)
    h = sub.add_parser("_host", help=argparse.SUPPRESS)
    h.add_argument("--config", required=True)
    ww = sub.add_parser("write-workloads", help="write the generated workloads as JSON files (no GPU)")
    ww.add_argument("--out", required=True)
    ww.add_argument("--random", type=int, default=20)
    ww.add_argument("--random-seed", type=int, default=0)
    ww.add_argument("--threshold", type=int, default=5)
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.cmd == "run":
        return run(args)
    if args.cmd == "_host":
        return host_main(args.config)
    if args.cmd == "write-workloads":
        os.makedirs(args.out, exist_ok=True)
        from specstate.integration.workloads import dump_workload

        ws = [seed_sweep()] + random_workloads(args.random_seed, args.random, args.threshold)
        for w in ws:
            dump_workload(w, os.path.join(args.out, f"{w.name}.json"))
        print(f"wrote {len(ws)} workloads to {args.out}")
        return 0
    _parser().print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
