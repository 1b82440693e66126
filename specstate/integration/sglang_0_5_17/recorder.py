"""The recorder for sglang 0.5.17's v2 worker (``EAGLEWorkerV2``) under the overlap scheduler.

Installed by the plugin (``sglang_plugin.register`` with ``SPECSTATE_ENGINE=sglang-0.5.17``)
through ``HookRegistry`` in the scheduler process; schema ``specstate-sglang17-rec/1``
(``docs/gpu.md``). Because the overlap loop processes each batch's result one iteration
after launching the next (``Scheduler.event_loop_overlap``), the recorder writes one line per
*loop iteration* and its parts, in the order they happen:

- ``loop`` (``Scheduler.get_next_batch_to_run``, after it returned): the batch to run (mode,
  rids) or none, the last batch (whose result this iteration processes), ``idle_before``: the
  iterations since the last logged one that had neither (and no input: pure ``on_idle``
  iterations, not logged);
- ``fbg`` (``EAGLEWorkerV2.forward_batch_generation``): the launched batch, the active step
  count before and after ``activate_step_by_batch``, its path (``extend``, ``spec``, ``trivial``
  for steps 0) and one ``fwd`` event per model forward (``ModelRunner.forward``, and the draft
  graph runners' ``execute``: worker, mode, bs, token counts, CPU ``seq_lens``, graph padded
  size or eager); ``fbg_error`` when it raised (also appended to ``SPECSTATE_REC_CRASH``);
- ``post`` (``Scheduler.process_batch_result``, after): the processed batch's rids, its accept
  lengths (``GenerationBatchResult.accept_lens``, on the CPU by then), each request's lengths,
  the adaptive controller's slots;
- ``end`` (``Scheduler.process_input_requests``, before, of the next iteration): the scheduler
  as the logged iteration left it (allocator, radix tree, waiting queue, running batch and its
  requests, ``new_token_ratio``, the chunked request, the adaptive state);
- ``arrive`` / ``requeue`` / ``abort`` / ``retract`` as they happen (a ``retract`` line, written
  inside ``get_next_batch_to_run``, comes before the ``loop`` line of its iteration).

Only CPU values are read (no GPU synchronisation); the describe helpers are duck-typed and
tested on CPU with fake objects.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import Any, Callable

from specstate.integration.recorder_core import (RecorderCore, _cpu_values, _enum_name, _int_or_none,
                                                 _longest_shared_prefix, padded_bs, shape, values)

__all__ = ["SCHEMA", "V17Recorder", "REC", "TARGETS", "install", "header_desc", "snapshot", "req_state", "admitted"]

SCHEMA = "specstate-sglang17-rec/1"
_M = "sglang.srt.managers.scheduler.Scheduler."
TARGETS: tuple[tuple[str, str, str], ...] = (
    # (target, hook kind, hook function name)
    (_M + "process_input_requests", "AROUND", "around_process_input_requests"),
    (_M + "get_next_batch_to_run", "AROUND", "around_get_next_batch_to_run"),
    ("sglang.srt.speculative.eagle_worker_v2.EAGLEWorkerV2.forward_batch_generation", "AROUND", "around_fbg"),
    ("sglang.srt.model_executor.model_runner.ModelRunner.forward", "AROUND", "around_model_runner_forward"),
    ("sglang.srt.speculative.eagle_draft_cuda_graph_runner.EAGLEDraftCudaGraphRunner.execute", "AROUND",
     "around_draft_graph"),
    ("sglang.srt.speculative.eagle_draft_extend_cuda_graph_runner.EAGLEDraftExtendCudaGraphRunner.execute", "AROUND",
     "around_draft_graph"),
    (_M + "process_batch_result", "AFTER", "after_process_batch_result"),
    (_M + "_add_request_to_queue", "AROUND", "around_add_request_to_queue"),
    (_M + "abort_request", "AFTER", "after_abort_request"),
    ("sglang.srt.managers.schedule_batch.ScheduleBatch.retract_decode", "AROUND", "around_retract_decode"),
)


class V17Recorder(RecorderCore):
    def __init__(self) -> None:
        super().__init__()
        self.loop = 0  #: logged loop iterations (per scheduler process)
        self.idle = 0  #: unlogged iterations since the last logged one
        self.pending_end = False  #: the last iteration was logged: its ``end`` line is due
        self.inputs = 0  #: arrivals and aborts since the last ``loop`` line
        self.fbg: dict[str, Any] | None = None  #: the ``fbg`` line being built
        self.scheduler: Any = None

    def ensure_header(self, scheduler: Any) -> None:
        if self.on and self._header_written_for != self.out_path:
            self._header_written_for = self.out_path
            self.emit(header_desc(scheduler, self.tag))


REC = V17Recorder()


# -- describe helpers (pure, duck-typed) ---------------------------------------------------

def _kv_allocated(req: Any) -> int:
    """``req.kv.kv_allocated_len`` (``ReqKvInfo``; ``None`` once released)."""
    kv = getattr(req, "kv", None)
    return int(getattr(kv, "kv_allocated_len", 0) or 0) if kv is not None else 0


def req_state(reqs: list[Any]) -> dict[str, list[Any]]:
    """Per request, in order: rid, output length, committed and allocated KV, finished, retracted."""
    return {"rid": [str(r.rid) for r in reqs], "out_len": [len(r.output_ids) for r in reqs],
            "kv_committed": [int(r.kv_committed_len) for r in reqs], "kv_allocated": [_kv_allocated(r) for r in reqs],
            "finished": [type(r.finished_reason).__name__ if r.finished() else None for r in reqs],
            "retracted": [bool(getattr(r, "is_retracted", False)) for r in reqs]}


def adaptive_desc(worker: Any) -> dict[str, Any] | None:
    """The worker's active step count and the adaptive controller's slots."""
    if worker is None:
        return None
    ctl = getattr(worker, "adaptive_controller", None)
    slots = getattr(getattr(ctl, "params", None), "_slots", None) or {}
    return {"steps": _int_or_none(getattr(worker, "speculative_num_steps", None)),
            "slots": {str(k): [s.current_steps, float(s.ema_accept_len), s._batch_count] for k, s in slots.items()}}


def batch_brief(batch: Any) -> dict[str, Any] | None:
    if batch is None:
        return None
    return {"mode": _enum_name(getattr(batch, "forward_mode", None)), "rids": [str(r.rid) for r in batch.reqs]}


def kv_state(scheduler: Any) -> dict[str, Any]:
    tc, alloc, rtp = scheduler.tree_cache, scheduler.token_to_kv_pool_allocator, scheduler.req_to_token_pool
    return {"available": int(alloc.available_size()), "evictable": int(tc.evictable_size()),
            "protected": int(tc.protected_size()), "req_slots": int(rtp.available_size())}


def sched_state(scheduler: Any) -> dict[str, Any]:
    rb, ch = scheduler.running_batch, scheduler.chunked_req
    tracker = getattr(scheduler, "new_token_ratio_tracker", None)
    return {"waiting": [str(r.rid) for r in scheduler.waiting_queue], "running": [str(r.rid) for r in rb.reqs],
            "batch_is_full": bool(rb.batch_is_full), "chunked": str(ch.rid) if ch is not None else None,
            "new_token_ratio": float(tracker.current) if tracker is not None else None}


def snapshot(scheduler: Any) -> dict[str, Any]:
    """The ``end`` line: the scheduler as an iteration left it."""
    return {"kv": kv_state(scheduler), "sched": sched_state(scheduler),
            "reqs": req_state(list(scheduler.running_batch.reqs)),
            "adaptive": adaptive_desc(getattr(scheduler, "model_worker", None))}


def _runner_desc(runner: Any) -> dict[str, Any] | None:
    if runner is None:
        return None
    return {"cls": type(runner).__name__, "capture_bs": [int(b) for b in getattr(runner, "capture_bs", []) or []],
            "width": _int_or_none(getattr(runner, "captured_req_width", None)),
            "mode": _enum_name(getattr(runner, "capture_forward_mode", None))}


def states_desc(worker: Any) -> dict[str, Any]:
    """Each adaptive runtime state's graph runners (``AdaptiveController._states``)."""
    states = getattr(getattr(worker, "adaptive_controller", None), "_states", None) or {}
    return {str(k): {"draft_decode": _runner_desc(st.cuda_graph_runner), "target_verify": _runner_desc(st.target_graph_runner),
                     "draft_extend": _runner_desc(st.cuda_graph_runner_for_draft_extend),
                     "draft_tokens": int(st.speculative_num_draft_tokens)} for k, st in states.items()}


_ARGS = ("speculative_algorithm", "speculative_eagle_topk", "speculative_num_steps", "speculative_num_draft_tokens",
         "speculative_adaptive", "speculative_adaptive_config", "disable_overlap_schedule", "attention_backend",
         "cuda_graph_max_bs_decode", "cuda_graph_bs_decode", "max_running_requests", "page_size", "chunked_prefill_size",
         "max_prefill_tokens", "schedule_conservativeness", "disable_radix_cache", "schedule_policy", "max_total_tokens",
         "mem_fraction_static", "random_seed", "enable_mixed_chunk", "disable_cuda_graph_padding")


def header_desc(scheduler: Any, tag: str) -> dict[str, Any]:
    sa = scheduler.server_args
    h: dict[str, Any] = {"ev": "header", "schema": SCHEMA, "pid": os.getpid(), "tag": tag,
                         "server_args": {k: getattr(sa, k, None) for k in _ARGS}}
    path = getattr(sa, "speculative_adaptive_config", None)
    try:
        h["adaptive_config_text"] = None
        if path:
            with open(path) as f:
                h["adaptive_config_text"] = f.read()
    except OSError as e:
        h["adaptive_config_error"] = repr(e)
    worker = getattr(scheduler, "model_worker", None)
    # the controller as this recording starts: it lives as long as the engine (flush_cache keeps it)
    h.update(worker=f"{type(worker).__module__}.{type(worker).__qualname__}", runtime_states=states_desc(worker),
             adaptive_start=adaptive_desc(worker),
             kv_size=_int_or_none(getattr(scheduler.token_to_kv_pool_allocator, "size", None)),
             max_running_requests=_int_or_none(getattr(scheduler, "max_running_requests", None)),
             max_total_num_tokens=_int_or_none(getattr(scheduler, "max_total_num_tokens", None)),
             max_prefill_tokens=_int_or_none(getattr(scheduler, "max_prefill_tokens", None)),
             chunked_prefill_size=_int_or_none(getattr(scheduler, "chunked_prefill_size", None)),
             context_len=_int_or_none(getattr(getattr(scheduler, "model_config", None), "context_len", None)),
             env={k: v for k, v in os.environ.items() if k.startswith(("SPECSTATE_", "SGLANG_"))})
    from specstate.integration.sglang_0_5_17.switch_patch import config_from_env

    patch = config_from_env()
    h["patch"] = patch.header() if patch is not None else None  # conformance's variant and threshold
    h.update(_versions())
    return h


def _versions() -> dict[str, Any]:
    try:
        import sglang
        import torch

        return {"sglang": getattr(sglang, "__version__", None), "torch": torch.__version__, "cuda": torch.version.cuda,
                "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None}
    except Exception as e:  # noqa: BLE001
        return {"versions_err": repr(e)}


def fwd_event(fb: Any, worker: str, via: str) -> dict[str, Any]:
    spec = getattr(fb, "spec_info", None)
    return {"ev": "fwd", "worker": worker, "via": via, "mode": _enum_name(getattr(fb, "forward_mode", None)),
            "bs": _int_or_none(getattr(fb, "batch_size", None)), "input_ids": shape(getattr(fb, "input_ids", None)),
            "out_cache_loc": shape(getattr(fb, "out_cache_loc", None)),
            "seq_lens_cpu": _cpu_values(getattr(fb, "seq_lens_cpu", None)),
            "spec": type(spec).__name__ if spec is not None else None,
            "spec_ntpr": getattr(spec, "num_tokens_per_req", None) if spec is not None else None}


# -- the hooks -------------------------------------------------------------------------------

def around_process_input_requests(original: Callable, scheduler: Any, *a: Any, **k: Any) -> Any:
    """Top of a loop iteration: the last logged iteration's ``end`` line, then the inputs."""
    rec = REC
    if rec.pending_end:
        rec.pending_end = False
        if rec.on:
            try:
                rec.emit({"ev": "end", "loop": rec.loop, **snapshot(scheduler)})
            except Exception as e:  # noqa: BLE001  (never break the scheduler)
                rec.emit({"ev": "end", "loop": rec.loop, "desc_err": repr(e)})
    rec.poll_ctl()
    return original(scheduler, *a, **k)


def around_get_next_batch_to_run(original: Callable, scheduler: Any, *a: Any, **k: Any) -> Any:
    """The plan of a loop iteration: logged when it runs or processes a batch, or had inputs."""
    plan = original(scheduler, *a, **k)
    rec = REC
    last = k.get("last_batch", a[1] if len(a) > 1 else None)
    batch = getattr(plan, "batch_to_run", None)
    if batch is None and last is None and not rec.inputs:
        rec.idle += 1
        return plan
    rec.loop += 1
    rec.pending_end = True
    if rec.on:
        try:
            rec.ensure_header(scheduler)
            rec.emit({"ev": "loop", "loop": rec.loop, "tag": rec.tag, "idle_before": rec.idle, "t": round(time.time(), 4),
                      "batch": batch_brief(batch), "last": batch_brief(last)})
        except Exception as e:  # noqa: BLE001
            rec.emit({"ev": "loop", "loop": rec.loop, "desc_err": repr(e)})
    rec.idle, rec.inputs = 0, 0
    return plan


def _path(batch: Any, steps: Any) -> str:
    mode = getattr(batch, "forward_mode", None)
    if mode is not None and (mode.is_extend() or getattr(batch, "is_extend_in_batch", False)):
        return "extend"
    return "trivial" if steps == 0 else "spec"


def admitted(batch: Any) -> dict[str, Any]:
    """What admission matched for a prefill batch, per request in batch order: ``prefix_lens``
    (``len(Req.prefix_indices)``: the radix-tree match, or a chunked request's earlier chunks)
    and ``extend_lens`` (``ScheduleBatch.extend_lens``); CPU values, read before the launch.
    A key whose objects lack the attribute is left out."""
    out: dict[str, Any] = {}
    pre = [getattr(r, "prefix_indices", None) for r in batch.reqs]
    if all(p is not None for p in pre):
        out["prefix_lens"] = [len(p) for p in pre if p is not None]
    ext = getattr(batch, "extend_lens", None)
    if ext is not None:
        out["extend_lens"] = [int(x) for x in ext]
    return out


def around_fbg(original: Callable, worker: Any, batch: Any, *a: Any, **k: Any) -> Any:
    """``EAGLEWorkerV2.forward_batch_generation``: the launched batch and its forwards."""
    rec = REC
    if not rec.on:
        return original(worker, batch, *a, **k)
    r: dict[str, Any] = {"ev": "fbg", "loop": rec.loop, "tag": rec.tag, "mode_in": _enum_name(batch.forward_mode),
                         "rids": [str(x.rid) for x in batch.reqs], "bs": len(batch.reqs),
                         "steps_before": getattr(worker, "speculative_num_steps", None), "events": []}
    if r["mode_in"] in ("EXTEND", "MIXED"):
        r.update(admitted(batch))
    rec.fbg, t0 = r, time.perf_counter()
    try:
        res = original(worker, batch, *a, **k)
    except BaseException as e:
        _crash(rec, r, e, t0)
        raise
    finally:
        rec.fbg = None
    steps = getattr(worker, "speculative_num_steps", None)
    r.update(steps=steps, draft_tokens=getattr(worker, "speculative_num_draft_tokens", None), path=_path(batch, steps),
             dt_ms=round((time.perf_counter() - t0) * 1e3, 3))
    rec.emit(r)
    return res


def _crash(rec: V17Recorder, r: dict[str, Any], e: BaseException, t0: float) -> None:
    r.update(ev="fbg_error", dt_ms=round((time.perf_counter() - t0) * 1e3, 3),
             error={"cls": type(e).__name__, "msg": str(e)[:2000], "tb_tail": traceback.format_exc().splitlines()[-30:]})
    try:
        rec.emit(r)
        crash = os.environ.get("SPECSTATE_REC_CRASH")
        if crash:
            with open(crash, "a") as f:
                f.write(json.dumps(r, default=str) + "\n")
    except Exception:  # noqa: BLE001
        pass


def around_model_runner_forward(original: Callable, runner: Any, forward_batch: Any, *a: Any, **k: Any) -> Any:
    """One model forward (target or draft), eager or through the target's decode graph."""
    rec = REC
    if rec.fbg is None:
        return original(runner, forward_batch, *a, **k)
    draft = bool(getattr(runner, "is_draft_worker", False))
    try:
        ev = fwd_event(forward_batch, "draft" if draft else "target", "model_runner")
    except Exception as e:  # noqa: BLE001
        ev = {"ev": "fwd", "desc_err": repr(e)}
    rec.fbg["events"].append(ev)
    out = original(runner, forward_batch, *a, **k)
    ev["graph_ran"] = bool(getattr(out, "can_run_graph", False))
    if ev["graph_ran"]:
        ev["padded_bs"] = padded_bs(getattr(runner, "decode_cuda_graph_runner", None), ev.get("bs") or 0)
    return out


def around_draft_graph(original: Callable, runner: Any, forward_batch: Any, *a: Any, **k: Any) -> Any:
    """A draft CUDA-graph replay (draft decode or draft extend): not through ``ModelRunner.forward``."""
    rec = REC
    if rec.fbg is not None:
        try:
            ev = fwd_event(forward_batch, "draft", "graph:" + type(runner).__name__)
            ev.update(graph_ran=True, padded_bs=padded_bs(runner, ev.get("bs") or 0))
        except Exception as e:  # noqa: BLE001
            ev = {"ev": "fwd", "desc_err": repr(e)}
        rec.fbg["events"].append(ev)
    return original(runner, forward_batch, *a, **k)


def after_process_batch_result(result: Any, scheduler: Any, batch: Any, *a: Any, **k: Any) -> None:
    """The processed batch (last iteration's): accept lengths, requests, the adaptive slots."""
    rec = REC
    if not rec.on or batch is None:
        return None
    res = k.get("result", a[0] if a else None)
    try:
        accept = values(getattr(res, "accept_lens", None)) if getattr(res, "accept_lens", None) is not None else None
        rec.emit({"ev": "post", "loop": rec.loop, "tag": rec.tag, "mode": _enum_name(batch.forward_mode),
                  "rids": [str(r.rid) for r in batch.reqs], "accept_lens": accept,
                  "draft_tokens": getattr(res, "speculative_num_draft_tokens", None),
                  "reqs": req_state(list(batch.reqs)), "adaptive": adaptive_desc(getattr(scheduler, "model_worker", None))})
    except Exception as e:  # noqa: BLE001
        rec.emit({"ev": "post", "loop": rec.loop, "desc_err": repr(e)})
    return None


_PROMPTS: dict[str, tuple[int, ...]] = {}


def around_add_request_to_queue(original: Callable, scheduler: Any, req: Any, *a: Any, **k: Any) -> Any:
    """An arrival (prompt length, clamped ``max_new_tokens``, longest shared prompt prefix) or a
    retracted request put back (``requeue``)."""
    rec = REC
    rec.poll_ctl()
    out = original(scheduler, req, *a, **k)
    retracted = bool(k.get("is_retracted", a[0] if a else False))
    if not retracted:
        rec.inputs += 1
    if not rec.on:
        return out
    try:
        rec.ensure_header(scheduler)
        ev: dict[str, Any] = {"ev": "requeue" if retracted else "arrive", "loop": rec.loop, "tag": rec.tag,
                              "rid": str(req.rid), "t": round(time.time(), 4)}
        if not retracted:
            ids = list(req.origin_input_ids)
            lcp, lcp_rid = _longest_shared_prefix(ids, _PROMPTS)
            _PROMPTS[str(req.rid)] = tuple(ids)
            tracker = getattr(scheduler, "new_token_ratio_tracker", None)
            ev.update(prompt_len=len(ids), max_new_tokens=_int_or_none(req.sampling_params.max_new_tokens),
                      ignore_eos=bool(req.sampling_params.ignore_eos), lcp=lcp, lcp_rid=lcp_rid,
                      queued=any(r is req for r in scheduler.waiting_queue), kv=kv_state(scheduler),
                      ratio=float(tracker.current) if tracker is not None else None)
        rec.emit(ev)
    except Exception as e:  # noqa: BLE001
        rec.emit({"ev": "arrive", "loop": rec.loop, "desc_err": repr(e)})
    return out


def after_abort_request(result: Any, scheduler: Any, recv_req: Any, *a: Any, **k: Any) -> None:
    rec = REC
    rec.inputs += 1
    rec.poll_ctl()
    if rec.on:
        try:
            rec.ensure_header(scheduler)
        except Exception as e:  # noqa: BLE001
            rec.emit({"ev": "header_error", "desc_err": repr(e)})
        rec.emit({"ev": "abort", "loop": rec.loop, "tag": rec.tag, "rid": getattr(recv_req, "rid", None),
                  "abort_all": bool(getattr(recv_req, "abort_all", False)), "t": round(time.time(), 4)})
    return None


def around_retract_decode(original: Callable, batch: Any, *a: Any, **k: Any) -> Any:
    """``ScheduleBatch.retract_decode``: who was retracted or aborted (out of memory), in which
    order. It runs inside ``get_next_batch_to_run`` (``Scheduler.update_running_batch``), so it
    belongs to the iteration whose ``loop`` line comes next (``loop``: that line's number; the
    iteration is logged even if nothing else happens in it)."""
    rec = REC
    out = original(batch, *a, **k)
    rec.inputs += 1
    if rec.on:
        try:
            retracted, ratio, aborted = out
            rec.emit({"ev": "retract", "loop": rec.loop + 1, "tag": rec.tag, "retracted": [str(r.rid) for r in retracted],
                      "aborted": [str(r.rid) for r in aborted], "new_token_ratio": float(ratio),
                      "rids_after": [str(r.rid) for r in batch.reqs]})
        except Exception as e:  # noqa: BLE001
            rec.emit({"ev": "retract", "loop": rec.loop + 1, "desc_err": repr(e)})
    return out


def install(register: Callable[..., Any] | None = None, kinds: Any = None) -> list[str]:
    """Register every hook of ``TARGETS`` with sglang's ``HookRegistry`` (from the plugin)."""
    if register is None or kinds is None:
        from sglang.srt.plugins.hook_registry import HookRegistry, HookType

        register, kinds = register or HookRegistry.register, kinds or HookType
    this = sys.modules[__name__]
    for target, kind, fn in TARGETS:
        register(target, getattr(this, fn), getattr(kinds, kind))
    print(f"[specstate] sglang 0.5.17 recorder hooks registered in pid {os.getpid()}", file=sys.stderr, flush=True)
    return [t for t, _, _ in TARGETS]
