"""Recorder of the real SGLang v1 ``EAGLEWorker``, run inside the scheduler process.

Installed by the plugin (``specstate.integration.sglang_plugin``) through sglang's
``HookRegistry``; it writes one JSON line per ``EAGLEWorker.forward_batch_generation``
call (flushed per line), with sub-events for every model-runner forward, CUDA-graph
decision and worker phase inside it. The schema is documented in ``docs/gpu.md``
("Recorder schema"); ``SCHEMA_VERSION`` names it.

Control (read in the scheduler process):

- ``SPECSTATE_REC_CTL``: path of a small JSON control file ``{"out": PATH|null, "tag": STR,
  "stats": PATH|null, "mode": "full"|"lean"|"deferred"}``, re-read whenever it changes
  (``os.stat`` per call). ``out`` null: recording off (the hooks only count calls and time
  them). On every tag change the counters of the previous tag are appended to ``stats``
  (recorder on/off timing, with ``step_ms``: every decode step's scheduler iteration).
  ``lean`` and ``deferred`` record what conformance reads; ``deferred`` captures it raw
  (``sglang_capture``) and writes it when the file closes (``recorder_core``).
- ``SPECSTATE_REC_OUT``: a fixed output file (always on), when no control file is named.

The describe helpers at the top are pure (duck-typed) and are tested on CPU with fake
objects; sglang is imported only inside ``install()``.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import Any, Callable

from specstate.integration._hookstate import STATE, add_event, phase
from specstate.integration.backend import is_drafting
from specstate.integration.sglang_capture import (after_capture, draft_graph_snapshot, fwd_capture,
                                                  graph_snapshot, length, name_of, post_capture,
                                                  render_after, render_event, render_post, rshape)
from specstate.integration.recorder_core import (  # noqa: F401  (re-exported: the 0.5.12 names)
    RecorderCore,
    _render,
    _cpu_values,
    _enum_name,
    _int_or_none,
    _is_tensor,
    _longest_shared_prefix,
    _Writer,
    padded_bs,
    per_rank_path,
    shape,
    tdesc,
    values,
)

__all__ = [
    "SCHEMA_VERSION",
    "SCHEMA_VERSIONS",
    "tdesc",
    "spec_desc",
    "batch_desc",
    "reqs_desc",
    "kv_desc",
    "result_desc",
    "Recorder",
    "RECORDER",
    "install",
]

SCHEMA_VERSION = "specstate-sglang-rec/2"
#: every schema the CPU side reads (/1: no arrivals, retractions or scheduler state)
SCHEMA_VERSIONS = ("specstate-sglang-rec/1", SCHEMA_VERSION)
TB_TAIL_LINES = 30
#: the modes that record only what conformance reads (the hooks test ``mode in _COMPACT``,
#: not the ``compact`` property: they run several times per decode step)
_COMPACT = frozenset(("lean", "deferred"))


# ---------------------------------------------------------------------------------------
# describe helpers (pure)
# ---------------------------------------------------------------------------------------


_SPEC_SKIP = {"grammar", "future_indices", "verify_done"}


def spec_desc(spec: Any) -> dict[str, Any] | None:
    """``batch.spec_info``: class, every tensor field's shape/dtype, scalar fields,
    ``num_tokens_per_req`` and ``capture_hidden_mode``."""
    if spec is None:
        return None
    import dataclasses

    if dataclasses.is_dataclass(spec):
        names = [f.name for f in dataclasses.fields(spec)]
    else:
        names = [k for k in vars(spec) if not k.startswith("_")]
    fields: dict[str, Any] = {}
    for n in names:
        if n in _SPEC_SKIP:
            continue
        try:
            v = getattr(spec, n)
        except Exception as e:  # noqa: BLE001
            v = f"<err {type(e).__name__}>"
        if n in ("num_accept_tokens_cpu",) and isinstance(v, (list, tuple)):
            fields[n] = list(v)[:512]
            continue
        fields[n] = tdesc(v)
    # attributes set outside the dataclass fields (e.g. positions on EagleDraftInput)
    for extra in ("positions", "extend_seq_lens_cpu"):
        if extra not in fields and extra in getattr(spec, "__dict__", {}):
            fields[extra] = tdesc(getattr(spec, extra))
    return {
        "cls": type(spec).__name__,
        "ntpr": getattr(spec, "num_tokens_per_req", None),
        "capture": _enum_name(getattr(spec, "capture_hidden_mode", None)),
        "fields": fields,
    }


def batch_desc(batch: Any, *, with_values: bool = True) -> dict[str, Any]:
    """A ``ScheduleBatch`` (duck-typed)."""
    d: dict[str, Any] = {}
    d["mode"] = _enum_name(getattr(batch, "forward_mode", None))
    reqs = getattr(batch, "reqs", None) or []
    d["bs"] = len(reqs)
    d["input_ids"] = shape(getattr(batch, "input_ids", None))
    d["out_cache_loc"] = shape(getattr(batch, "out_cache_loc", None))
    d["seq_lens_sum"] = _int_or_none(getattr(batch, "seq_lens_sum", None))
    if with_values:
        d["seq_lens"] = values(getattr(batch, "seq_lens", None))
        d["seq_lens_cpu"] = values(getattr(batch, "seq_lens_cpu", None))
        d["orig_seq_lens"] = values(getattr(batch, "orig_seq_lens", None))
        d["req_pool_indices"] = values(getattr(batch, "req_pool_indices", None))
    else:
        d["seq_lens"] = shape(getattr(batch, "seq_lens", None))
    el = getattr(batch, "extend_lens", None)
    if el is not None and d["mode"] in ("EXTEND", "MIXED"):
        d["extend_lens"] = list(el)[:512]
    d["return_hidden_states"] = bool(getattr(batch, "return_hidden_states", False))
    d["spec_info"] = spec_desc(getattr(batch, "spec_info", None))
    return d


def reqs_desc(batch: Any) -> dict[str, list[Any]]:
    """Per request, in batch order (parallel lists)."""
    reqs = getattr(batch, "reqs", None) or []
    out: dict[str, list[Any]] = {
        "rid": [],
        "prompt_len": [],
        "out_len": [],
        "kv_committed": [],
        "kv_allocated": [],
        "spec_verify_ct": [],
        "finished": [],
        "prefix_len": [],
        "extend_len": [],
        "protected": [],
        "retracted": [],
    }
    for r in reqs:
        out["rid"].append(str(getattr(r, "rid", "?")))
        out["prompt_len"].append(len(getattr(r, "origin_input_ids", None) or []))
        out["out_len"].append(len(getattr(r, "output_ids", None) or []))
        out["kv_committed"].append(_int_or_none(getattr(r, "kv_committed_len", None)))
        out["kv_allocated"].append(_int_or_none(getattr(r, "kv_allocated_len", None)))
        out["spec_verify_ct"].append(_int_or_none(getattr(r, "spec_verify_ct", None)))
        pi = getattr(r, "prefix_indices", None)
        out["prefix_len"].append(length(pi))
        out["extend_len"].append(_int_or_none(getattr(r, "extend_input_len", None)))
        out["protected"].append(_int_or_none(getattr(r, "cache_protected_len", None)))
        out["retracted"].append(bool(getattr(r, "is_retracted", False)))
        fin = r.finished() if callable(getattr(r, "finished", None)) else False
        out["finished"].append(type(r.finished_reason).__name__ if fin else None)
    return out


def kv_desc(worker: Any, batch: Any) -> dict[str, Any]:
    d: dict[str, Any] = {}
    alloc = getattr(worker, "token_to_kv_pool_allocator", None)
    if alloc is not None:
        try:
            d["available"] = int(alloc.available_size())
        except Exception:  # noqa: BLE001
            d["available"] = None
        d["size"] = _int_or_none(getattr(alloc, "size", None))
    tc = getattr(batch, "tree_cache", None)
    if tc is not None:
        for k in ("evictable_size", "protected_size"):
            f = getattr(tc, k, None)
            try:
                d[k.replace("_size", "")] = int(f()) if callable(f) else None
            except Exception:  # noqa: BLE001
                d[k.replace("_size", "")] = None
    rtp = getattr(worker, "req_to_token_pool", None)
    if rtp is not None and callable(getattr(rtp, "available_size", None)):
        try:
            d["req_slots_available"] = int(rtp.available_size())
        except Exception:  # noqa: BLE001
            pass
    return d


def result_desc(res: Any) -> dict[str, Any]:
    if res is None:
        return {}
    per_req = getattr(res, "num_correct_drafts_per_req_cpu", None)
    lo = getattr(res, "logits_output", None)
    return {
        "next_token_ids": tdesc(getattr(res, "next_token_ids", None)),
        "num_correct_drafts": _int_or_none(getattr(res, "num_correct_drafts", None)),
        "num_correct_drafts_per_req": list(per_req) if per_req is not None else None,
        "accept_lens": [int(v) + 1 for v in per_req] if per_req is not None else None,
        "can_run_cuda_graph": bool(getattr(res, "can_run_cuda_graph", False)),
        "logits": shape(getattr(lo, "next_token_logits", None)) if lo is not None else None,
        "hidden": shape(getattr(lo, "hidden_states", None)) if lo is not None else None,
    }


def fwd_desc(fb: Any) -> dict[str, Any]:
    """A ``ForwardBatch`` entering a model forward (no GPU sync: CPU values only)."""
    spec = getattr(fb, "spec_info", None)
    d = {
        "mode": _enum_name(getattr(fb, "forward_mode", None)),
        "bs": _int_or_none(getattr(fb, "batch_size", None)),
        "input_ids": shape(getattr(fb, "input_ids", None)),
        "positions": shape(getattr(fb, "positions", None)),
        "out_cache_loc": shape(getattr(fb, "out_cache_loc", None)),
        "seq_lens_cpu": _cpu_values(getattr(fb, "seq_lens_cpu", None)),
        "seq_lens_sum": _int_or_none(getattr(fb, "seq_lens_sum", None)),
        "extend_seq_lens": list(fb.extend_seq_lens_cpu)[:512]
        if getattr(fb, "extend_seq_lens_cpu", None) is not None
        else None,
        "capture": _enum_name(getattr(fb, "capture_hidden_mode", None)),
        "spec": type(spec).__name__ if spec is not None else None,
        "spec_ntpr": getattr(spec, "num_tokens_per_req", None) if spec is not None else None,
        "spec_capture": _enum_name(getattr(spec, "capture_hidden_mode", None)) if spec is not None else None,
        "hidden_in": shape(getattr(spec, "hidden_states", None)) if spec is not None else None,
    }
    return d


def lean_fwd_desc(fb: Any, draft: bool = False) -> dict[str, Any]:
    """A forward as conformance reads it (shapes and CPU values only); a drafting forward
    (``backend.is_drafting``) by its mode and batch size alone."""
    mode = _enum_name(getattr(fb, "forward_mode", None))
    if draft and is_drafting("draft", mode):
        return {"mode": mode, "bs": _int_or_none(getattr(fb, "batch_size", None))}
    spec = getattr(fb, "spec_info", None)
    return {
        "mode": mode,
        "bs": _int_or_none(getattr(fb, "batch_size", None)),
        "input_ids": shape(getattr(fb, "input_ids", None)),
        "out_cache_loc": shape(getattr(fb, "out_cache_loc", None)),
        "seq_lens_cpu": _cpu_values(getattr(fb, "seq_lens_cpu", None)),
        "spec": type(spec).__name__ if spec is not None else None,
    }


def graph_static(runner: Any) -> dict[str, Any] | None:
    if runner is None:
        return None
    return {
        "cls": type(runner).__name__,
        "capture_forward_mode": _enum_name(getattr(runner, "capture_forward_mode", None))
        or _enum_name(getattr(runner, "forward_mode", None)),
        "num_tokens_per_bs": _int_or_none(getattr(runner, "num_tokens_per_bs", None)),
        "capture_hidden_mode": _enum_name(getattr(runner, "capture_hidden_mode", None)),
        "capture_bs": list(getattr(runner, "capture_bs", []) or []),
        "max_bs": _int_or_none(getattr(runner, "max_bs", None)),
    }


_ROW_FIELDS = ("topk_p", "topk_index", "hidden_states", "bonus_tokens")


def lean_spec(spec: Any) -> dict[str, Any] | None:
    """``spec_info`` as conformance reads it: class and the row fields' shapes."""
    if spec is None:
        return None
    return {"cls": type(spec).__name__, "fields": {n: tdesc(getattr(spec, n, None)) for n in _ROW_FIELDS}}


def lean_before(batch: Any, mode: Any, rids: list[str] | None = None) -> dict[str, Any]:
    """The lean ``fbg`` entry snapshot: CPU-side values only (no GPU synchronisation)."""
    before: dict[str, Any] = {"bs": len(batch.reqs)}
    reqs: dict[str, Any] = {"rid": rids if rids is not None else [str(r.rid) for r in batch.reqs]}
    if mode in ("EXTEND", "MIXED"):
        before["extend_lens"] = list(getattr(batch, "extend_lens", None) or [])
        reqs["prefix_len"] = [length(getattr(r, "prefix_indices", None)) or 0 for r in batch.reqs]
    return {"before": before, "reqs_before": reqs}


def lean_after(batch: Any, res: Any) -> dict[str, Any]:
    """The lean ``fbg`` exit snapshot: ``seq_lens`` from the CPU copy, per-request lengths,
    ``spec_info`` rows, accept lengths."""
    reqs = batch.reqs
    per = getattr(res, "num_correct_drafts_per_req_cpu", None)
    return {
        "after": {"seq_lens": _cpu_values(getattr(batch, "seq_lens_cpu", None)), "spec_info": lean_spec(batch.spec_info)},
        "reqs_after": {
            "rid": [str(r.rid) for r in reqs],
            "out_len": [len(r.output_ids) for r in reqs],
            "kv_committed": [r.kv_committed_len for r in reqs],
            "kv_allocated": [r.kv_allocated_len for r in reqs],
            "finished": [type(r.finished_reason).__name__ if r.finished() else None for r in reqs],
        },
        "result": {"accept_lens": [int(v) + 1 for v in per] if per is not None else None},
    }


class Recorder(RecorderCore):
    """The sglang 0.5.12 recorder: the header and the ``EAGLEWorker.forward_batch_generation`` hook."""

    #: the last ``forward_batch_generation`` call: (entry time, decode?, tag)
    _prev_call: tuple[float, bool, str] | None = None

    # -- header -------------------------------------------------------------------------
    def header(self, worker: Any) -> dict[str, Any]:
        h: dict[str, Any] = {"ev": "header", "schema": SCHEMA_VERSION, "pid": os.getpid(), "tag": self.tag}
        try:
            import sglang
            import torch

            h["sglang"] = getattr(sglang, "__version__", None)
            h["torch"] = torch.__version__
            h["cuda"] = torch.version.cuda
            h["gpu"] = torch.cuda.get_device_name() if torch.cuda.is_available() else None
        except Exception as e:  # noqa: BLE001
            h["versions_err"] = repr(e)
        h["worker"] = f"{type(worker).__module__}.{type(worker).__qualname__}"
        for k in ("topk", "speculative_num_steps", "speculative_num_draft_tokens", "page_size"):
            h[k] = getattr(worker, k, None)
        sa = getattr(worker, "server_args", None)
        if sa is not None:
            h["server_args"] = {
                k: getattr(sa, k, None)
                for k in (
                    "speculative_algorithm",
                    "speculative_eagle_topk",
                    "speculative_num_steps",
                    "speculative_num_draft_tokens",
                    "disable_overlap_schedule",
                    "attention_backend",
                    "sampling_backend",
                    "cuda_graph_max_bs",
                    "max_running_requests",
                    "page_size",
                    "mem_fraction_static",
                    "disable_radix_cache",
                    "chunked_prefill_size",
                    "random_seed",
                    "max_prefill_tokens",
                    "max_total_tokens",
                    "schedule_policy",
                    "schedule_conservativeness",
                    "radix_eviction_policy",
                    "enable_mixed_chunk",
                )
            }
        tw = getattr(worker, "target_worker", None)
        tmr = getattr(tw, "model_runner", None)
        h["graph_runners"] = {
            "target": graph_static(getattr(tmr, "graph_runner", None)),
            "draft": graph_static(getattr(worker, "cuda_graph_runner", None)),
            "draft_extend": graph_static(getattr(worker, "cuda_graph_runner_for_draft_extend", None)),
        }
        alloc = getattr(worker, "token_to_kv_pool_allocator", None)
        h["kv_size"] = _int_or_none(getattr(alloc, "size", None))
        h["env"] = {k: v for k, v in os.environ.items() if k.startswith(("SPECSTATE_", "SGLANG_"))}
        h.update(self.header_extra)
        return h

    # -- stats --------------------------------------------------------------------------
    def _reset_stats(self) -> None:
        super()._reset_stats()
        #: per decode step: ms from its ``forward_batch_generation`` entry to the next one's,
        #: when both are decode steps of one workload (one scheduler iteration; recorder on or off)
        self.stats["step_ms"] = []

    def _count_call(self, t_enter: float, is_decode: bool) -> None:
        prev = self._prev_call
        if is_decode and prev is not None and prev[1] and prev[2] == self.tag:
            self.stats["step_ms"].append(round((t_enter - prev[0]) * 1e3, 4))
        self._prev_call = (t_enter, is_decode, self.tag)

    @property
    def compact(self) -> bool:
        """``lean`` or ``deferred``: only what conformance reads (no phase or ``can_run`` snapshots)."""
        return self.mode in _COMPACT

    # -- snapshots ----------------------------------------------------------------------
    def _before(self, worker: Any, batch: Any, rec: dict[str, Any]) -> None:
        if self.mode == "deferred" and name_of(rec["mode_in"]) not in ("EXTEND", "MIXED"):
            # rids by reference (``render_fbg`` writes them as strings); nothing else at entry
            rids = rec["rids"] = tuple([r.rid for r in batch.reqs])
            rec["bs"] = len(rids)
            rec["before"] = {"bs": len(rids)}
            rec["reqs_before"] = {"rid": rids}
            return
        rec["rids"] = [str(r.rid) for r in batch.reqs]
        rec["bs"] = len(rec["rids"])
        if self.compact:
            rec.update(lean_before(batch, name_of(rec["mode_in"]), rec["rids"]))
        else:
            rec["before"] = batch_desc(batch)
            rec["reqs_before"] = reqs_desc(batch)
            rec["kv_before"] = kv_desc(worker, batch)

    def _after(self, worker: Any, batch: Any, res: Any, rec: dict[str, Any]) -> None:
        if self.mode == "deferred":
            rec["_after"] = after_capture(batch, res)  # ``render_fbg``: ``finished`` too
            return
        if self.mode == "lean":
            rec.update(lean_after(batch, res))
        else:
            rec["after"] = batch_desc(batch)
            rec["reqs_after"] = reqs_desc(batch)
            rec["kv_after"] = kv_desc(worker, batch)
            rec["result"] = result_desc(res)
        fb = rec.get("reqs_before", {}).get("finished", [])
        fa = rec["reqs_after"]["finished"]
        rec["finished"] = [rid for rid, b, a in zip(rec["reqs_after"]["rid"], fb + [None] * len(fa), fa)
                           if a is not None and b is None]

    def _crashed(self, e: BaseException, rec: dict[str, Any] | None, it: int, batch: Any, dt_s: float) -> None:
        """The ``fbg_error`` line of a call that raised (written at once, in every mode)."""
        err = {"cls": type(e).__name__, "msg": str(e)[:2000],
               "tb_tail": traceback.format_exc().splitlines()[-TB_TAIL_LINES:], "iter": it}
        rec = render_fbg(rec) if rec is not None else {"ev": "fbg", "iter": it, "tag": self.tag}
        rec.update(ev="fbg_error", error=err, dt_ms=round(dt_s * 1e3, 3), path=STATE.path, notes=STATE.notes,
                   phase_stack=STATE.error_stack or list(STATE.phase_stack))
        try:
            # no GPU values here: after a device-side error every sync raises again
            rec["after"] = batch_desc(batch, with_values=False)
        except Exception as e2:  # noqa: BLE001
            rec["after_err"] = repr(e2)
        STATE.current = None
        try:
            self.emit(rec)
            crash = per_rank_path(os.environ.get("SPECSTATE_REC_CRASH"))
            if crash:
                with open(crash, "a") as f:
                    f.write(json.dumps(rec, default=_render if self.deferred else str) + "\n")
        except Exception:  # noqa: BLE001
            pass

    def _finish_stats(self, it: int, path: str, is_decode: bool, t_enter: float, t0: float, t1: float) -> None:
        t2 = time.perf_counter()
        st = self.stats
        st["calls"] += 1
        st["paths"][path] = st["paths"].get(path, 0) + 1
        st["t_fbg_s"] += t1 - t0
        st["t_rec_s"] += (t0 - t_enter) + (t2 - t1)
        if is_decode:
            st["decode_calls"] += 1
            st["t_fbg_decode_s"] += t1 - t0
            st["t_rec_decode_s"] += (t0 - t_enter) + (t2 - t1)
        if st["first_iter"] is None:
            st["first_iter"] = it
        st["last_iter"] = it

    # -- the AROUND hook on EAGLEWorker.forward_batch_generation ---------------------------
    def around_fbg(self, original: Callable, worker: Any, batch: Any, *args: Any, **kwargs: Any) -> Any:
        t_enter = time.perf_counter()
        self.poll_ctl()
        self.iter += 1
        it = self.iter
        STATE.reset_call()
        mode = getattr(batch, "forward_mode", None)
        is_decode = bool(mode is not None and mode.is_decode())
        self._count_call(t_enter, is_decode)
        rec: dict[str, Any] | None = None
        if self.out_path is not None:
            if self._header_written_for != self.out_path:
                self._header_written_for = self.out_path
                self.emit(self.header(worker))
            # raw values (wall clock, forward modes, seconds): ``render_fbg`` rounds and names them
            rec = {"ev": "fbg", "iter": it, "tag": self.tag, "t": time.time(), "mode_in": mode}
            try:
                self._before(worker, batch, rec)
            except Exception as e:  # noqa: BLE001
                rec["snapshot_err"] = repr(e)
            STATE.current = rec
        t0 = time.perf_counter()
        try:
            res = original(worker, batch, *args, **kwargs)
        except BaseException as e:
            self._crashed(e, rec, it, batch, time.perf_counter() - t0)
            raise
        t1 = time.perf_counter()
        path = STATE.path or _infer_path(rec, batch, mode)
        if rec is not None:
            rec["dt"] = t1 - t0
            rec["path"] = path
            if STATE.notes:
                rec["notes"] = STATE.notes
            rec["mode_out"] = getattr(batch, "forward_mode", None)
            try:
                self._after(worker, batch, res, rec)
            except Exception as e:  # noqa: BLE001
                rec["snapshot_after_err"] = repr(e)
            STATE.current = None
            self.emit_raw(render_fbg, rec)  # ``deferred``: rendered when the file is written
            self.stats["records"] += 1
        self._finish_stats(it, path, is_decode, t_enter, t0, t1)
        return res


def render_fbg(rec: dict[str, Any]) -> dict[str, Any]:
    """An ``fbg`` record as it is written: the wall clock rounded, the forward modes by name,
    ``dt`` (seconds) as ``dt_ms`` (every mode keeps these raw); in ``deferred`` mode also the
    rids as strings, the sub-events' capture tuples and the exit capture
    (``sglang_capture.after_capture``) rendered, as ``lean`` writes them."""
    out: dict[str, Any] = {}
    for k, v in rec.items():
        if k == "dt":
            out["dt_ms"] = round(v * 1e3, 3)
        elif k == "t" and type(v) is float:
            out["t"] = round(v, 4)
        elif k in ("mode_in", "mode_out"):
            out[k] = name_of(v)
        else:
            out[k] = v
    rids = out.get("rids")
    if type(rids) is tuple:
        out["rids"] = [str(r) for r in rids]
        out["reqs_before"] = dict(out["reqs_before"], rid=out["rids"])
    evs = out.get("events")
    if evs is not None:
        out["events"] = [render_event(e, _graph_label) for e in evs if e is not None]
    after = out.pop("_after", None)
    if after is not None:
        out.update(render_after(after))
    return out


def _infer_path(rec: dict[str, Any] | None, batch: Any, mode: Any) -> str:
    """The path of a call no specstate patch labelled (a user's own plugin): a DECODE call
    that ran no draft DECODE forward fell back to plain decode."""
    path = _default_path(batch, mode)
    if path == "spec" and rec is not None:
        evs = [e if type(e) is dict else render_event(e, _graph_label) for e in rec.get("events") or [] if e is not None]
        fwds = [e for e in evs if e.get("ev") == "fwd"]
        if fwds and not any(e.get("worker") == "draft" and e.get("mode") == "DECODE" for e in fwds):
            return "fallback"
    return path


def _default_path(batch: Any, mode: Any) -> str:
    if mode is None:
        return "?"
    if mode.is_idle():
        return "idle"
    if mode.is_extend() or getattr(batch, "is_extend_in_batch", False):
        return "extend"
    return "spec"


RECORDER = Recorder()


# ---------------------------------------------------------------------------------------
# sub-hooks (forwards, graph decisions, phases)
# ---------------------------------------------------------------------------------------

_FWD_STACK: list[Any] = []  # an event (a dict), or a deferred forward's one-item cell (a list)


def _around_model_runner_forward(original: Callable, runner: Any, forward_batch: Any, *a: Any, **k: Any) -> Any:
    cur = STATE.current
    if cur is None:
        return original(runner, forward_batch, *a, **k)
    if RECORDER.mode == "deferred":
        return _deferred_forward(cur, original, runner, forward_batch, a, k)
    draft = bool(getattr(runner, "is_draft_worker", False))
    ev: dict[str, Any] = {"ev": "fwd", "worker": "draft" if draft else "target", "via": "model_runner"}
    try:
        ev.update(_fwd_desc(forward_batch, draft))
    except Exception as e:  # noqa: BLE001
        ev["desc_err"] = repr(e)
    add_event(ev)
    _FWD_STACK.append(ev)
    try:
        out = original(runner, forward_batch, *a, **k)
    finally:
        _FWD_STACK.pop()
    try:
        ev["graph_ran"] = bool(getattr(out, "can_run_graph", False))
        if RECORDER.mode not in _COMPACT:
            lo = getattr(out, "logits_output", None)
            ev["out_logits"] = rshape(getattr(lo, "next_token_logits", None))
            ev["out_hidden"] = rshape(getattr(lo, "hidden_states", None))
    except Exception:  # noqa: BLE001
        pass
    return out


def _event_slot(cur: dict[str, Any]) -> tuple[list[Any], int, str | None]:
    """A place in the current record's events, taken at a forward's entry (events stay in
    entry order, as ``add_event`` appends them), and the phase then."""
    evs = cur.get("events")
    if evs is None:
        evs = cur["events"] = []
    evs.append(None)
    stack = STATE.phase_stack
    return evs, len(evs) - 1, stack[-1] if stack else None


def _safe_capture(fb: Any, draft: bool) -> tuple[Any, str | None]:
    """``fwd_capture(fb, draft)``, or ``(None, repr(error))``: a capture must never break the forward."""
    try:
        return fwd_capture(fb, draft), None
    except Exception as e:  # noqa: BLE001
        return None, repr(e)


def _deferred_forward(cur: dict[str, Any], original: Callable, runner: Any, fb: Any, a: Any, k: Any) -> Any:
    """``_around_model_runner_forward`` in ``deferred`` mode: one capture tuple per forward
    (``sglang_capture.render_event``: ``"m"``), the target graph's ``replay_prepare`` inside
    it in a cell on ``_FWD_STACK``."""
    draft = bool(getattr(runner, "is_draft_worker", False))
    cap, err = _safe_capture(fb, draft)
    evs, i, ph = _event_slot(cur)
    cell: list[Any] = [None]
    _FWD_STACK.append(cell)
    try:
        out = original(runner, fb, *a, **k)
    except BaseException:
        evs[i] = ("m", ph, draft, cap, cell[0], None, err)
        raise
    finally:
        _FWD_STACK.pop()
    try:
        ran = bool(getattr(out, "can_run_graph", False))
    except Exception:  # noqa: BLE001
        ran = None
    evs[i] = ("m", ph, draft, cap, cell[0], ran, err)
    return out


def _fwd_desc(fb: Any, draft: bool) -> dict[str, Any]:
    """A forward's snapshot in the recorder's mode (``full``: ``fwd_desc``; ``lean``:
    ``lean_fwd_desc``; ``deferred`` captures instead: ``_deferred_forward``)."""
    return lean_fwd_desc(fb, draft) if RECORDER.mode in _COMPACT else fwd_desc(fb)


def _graph_label(runner: Any) -> str:
    n = type(runner).__name__
    if n == "EAGLEDraftCudaGraphRunner":
        return "draft_decode"
    if n == "EAGLEDraftExtendCudaGraphRunner":
        return "draft_extend"
    mr = getattr(runner, "model_runner", None)
    return "draft" if getattr(mr, "is_draft_worker", False) else "target"


def _after_can_run(result: Any, runner: Any, forward_batch: Any, *a: Any, **k: Any) -> Any:
    if STATE.current is None or RECORDER.mode in _COMPACT:
        return None
    ev = {
        "ev": "can_run",
        "g": _graph_label(runner),
        "ok": bool(result),
        "bs": _int_or_none(getattr(forward_batch, "batch_size", None)),
        "mode": _enum_name(getattr(forward_batch, "forward_mode", None)),
        "capture_forward_mode": _enum_name(getattr(runner, "capture_forward_mode", None)),
        "num_tokens_per_bs": _int_or_none(getattr(runner, "num_tokens_per_bs", None)),
        "graph_capture_hidden": _enum_name(getattr(runner, "capture_hidden_mode", None)),
        "fb_capture": _enum_name(getattr(forward_batch, "capture_hidden_mode", None)),
        "spec_capture": _enum_name(getattr(getattr(forward_batch, "spec_info", None), "capture_hidden_mode", None)),
    }
    if _FWD_STACK:
        _FWD_STACK[-1]["can_run"] = ev
    else:
        add_event(ev)
    return None


def _around_replay_prepare(original: Callable, runner: Any, forward_batch: Any, *a: Any, **k: Any) -> Any:
    if STATE.current is None:
        return original(runner, forward_batch, *a, **k)
    if RECORDER.mode == "deferred" and _FWD_STACK:
        # (runner, batch size, input shape): ``sglang_capture.render_graph`` at write time
        _FWD_STACK[-1][0] = (runner, getattr(forward_batch, "batch_size", None), rshape(getattr(forward_batch, "input_ids", None)))
        return original(runner, forward_batch, *a, **k)
    g = graph_snapshot(runner, forward_batch, _graph_label)
    if _FWD_STACK:
        _FWD_STACK[-1]["graph"] = g
    else:
        add_event({"ev": "replay_prepare", **g})
    return original(runner, forward_batch, *a, **k)


def _around_draft_graph_replay(original: Callable, runner: Any, forward_batch: Any, *a: Any, **k: Any) -> Any:
    cur = STATE.current
    if cur is None:
        return original(runner, forward_batch, *a, **k)
    if RECORDER.mode == "deferred":
        return _deferred_draft_replay(cur, original, runner, forward_batch, a, k)
    ev: dict[str, Any] = {"ev": "fwd", "worker": "draft", "via": "graph:" + _graph_label(runner)}
    try:
        ev.update(_fwd_desc(forward_batch, True))
    except Exception as e:  # noqa: BLE001
        ev["desc_err"] = repr(e)
    # draft decode pads when bs != raw_bs; draft extend when bs * ntpb != num_tokens
    ev["graph"] = draft_graph_snapshot(runner, ev, _graph_label)
    add_event(ev)
    out = original(runner, forward_batch, *a, **k)
    try:
        ev["graph_ran"] = True
        if RECORDER.mode not in _COMPACT:  # the outputs' shapes: conformance does not read them
            if isinstance(out, tuple):
                ev["out"] = [rshape(x) for x in out]
            else:
                ev["out_logits"] = rshape(getattr(out, "next_token_logits", None))
                ev["out_hidden"] = rshape(getattr(out, "hidden_states", None))
    except Exception:  # noqa: BLE001
        pass
    return out


def _deferred_draft_replay(cur: dict[str, Any], original: Callable, runner: Any, fb: Any, a: Any, k: Any) -> Any:
    """``_around_draft_graph_replay`` in ``deferred`` mode: one capture tuple (``"d"``:
    the runner and its forward mode; the graph decision is derived at write time; ``ran``
    once the replay returned)."""
    cap, err = _safe_capture(fb, True)
    evs, i, ph = _event_slot(cur)
    rmode = getattr(runner, "forward_mode", None)
    evs[i] = ("d", ph, runner, rmode, cap, False, err)
    out = original(runner, fb, *a, **k)
    evs[i] = ("d", ph, runner, rmode, cap, True, err)
    return out


def _timed_hook(name: str, fn: Callable, around: bool) -> Callable:
    """``SPECSTATE_REC_HOOK_TIMES=1`` (a diagnostic run): ``fn`` adding its own wall time (an
    AROUND hook's less the original's) to ``RECORDER.stats["hook_ms"][name]``, in every mode."""
    clock = time.perf_counter

    def add(t: float) -> None:
        d = RECORDER.stats.setdefault("hook_ms", {})
        d[name] = d.get(name, 0.0) + t * 1e3

    if not around:
        def after(*a: Any, **k: Any) -> Any:
            t0 = clock()
            try:
                return fn(*a, **k)
            finally:
                add(clock() - t0)

        return after

    def wrapped(original: Callable, *a: Any, **k: Any) -> Any:
        inner = [0.0]

        def timed_original(*a2: Any, **k2: Any) -> Any:
            t = clock()
            try:
                return original(*a2, **k2)
            finally:
                inner[0] += clock() - t

        t0 = clock()
        try:
            return fn(timed_original, *a, **k)
        finally:
            add(clock() - t0 - inner[0])

    return wrapped


def _after_process_batch_result(result: Any, scheduler: Any, batch: Any, *a: Any, **k: Any) -> None:
    """``Scheduler.process_batch_result`` (after the worker): the prefill's first token is
    appended here, requests that finish at prefill (``max_new_tokens`` 1, EOS, abort) finish
    here, and finished requests' KV is released here (into the radix tree)."""
    rec = RECORDER
    if rec.out_path is None or batch is None:
        return None
    try:
        mode = getattr(batch, "forward_mode", None)
        if rec.mode == "deferred":
            rec.emit_raw(render_post, (rec.iter, rec.tag, mode), post_capture(scheduler, getattr(batch, "reqs", None) or []))
            return None
        ev: dict[str, Any] = {"ev": "post", "iter": rec.iter, "tag": rec.tag, "mode": name_of(mode)}
        reqs = getattr(batch, "reqs", None) or []
        ev["rids"] = [str(r.rid) for r in reqs]
        ev.update(post_reqs(reqs) if rec.compact else {k: v for k, v in reqs_desc(batch).items() if k in _POST_KEYS})
        ev["kv"] = sched_kv(scheduler)
        ev["sched"] = sched_desc(scheduler)
        rec.emit(ev)
    except Exception as e:  # noqa: BLE001  (never break the scheduler)
        try:
            rec.emit({"ev": "post", "iter": rec.iter, "desc_err": repr(e)})
        except Exception:  # noqa: BLE001
            pass
    return None


_POST_KEYS = ("out_len", "kv_committed", "kv_allocated", "finished", "protected", "prefix_len")


def post_reqs(reqs: list[Any]) -> dict[str, list[Any]]:
    """A ``post`` line's per-request fields in the compact modes: what conformance reads
    (``conformance._rec_post``, ``_final_lengths``), not ``protected`` or ``prefix_len``; the
    finish reasons by class name (``deferred``: by reference, ``recorder_core._render``)."""
    return {
        "out_len": [len(r.output_ids) for r in reqs],
        "kv_committed": [r.kv_committed_len for r in reqs],
        "kv_allocated": [r.kv_allocated_len for r in reqs],
        "finished": [r.finished_reason for r in reqs] if RECORDER.deferred
        else [type(r.finished_reason).__name__ if r.finished() else None for r in reqs],
    }


def sched_kv(scheduler: Any) -> dict[str, Any]:
    """The allocator and the radix tree as the scheduler sees them."""
    alloc = getattr(scheduler, "token_to_kv_pool_allocator", None)
    tc = getattr(scheduler, "tree_cache", None)
    rtp = getattr(scheduler, "req_to_token_pool", None)
    return {
        "available": int(alloc.available_size()) if alloc is not None else None,
        "evictable": int(tc.evictable_size()) if tc is not None else None,
        "protected": int(tc.protected_size()) if tc is not None else None,
        "req_slots": int(rtp.available_size()) if rtp is not None and callable(getattr(rtp, "available_size", None)) else None,
    }


def sched_desc(scheduler: Any) -> dict[str, Any]:
    """Scheduler state that admission and retraction depend on (``Scheduler.waiting_queue``,
    ``running_batch``, ``chunked_req``, ``new_token_ratio``, ``batch_is_full``)."""
    rb = getattr(scheduler, "running_batch", None)
    ch = getattr(scheduler, "chunked_req", None)
    ratio = getattr(scheduler, "new_token_ratio", None)
    return {
        "waiting": [str(r.rid) for r in (getattr(scheduler, "waiting_queue", None) or [])],
        "running": [str(r.rid) for r in (getattr(rb, "reqs", None) or [])],
        "batch_is_full": bool(getattr(rb, "batch_is_full", False)),
        "chunked": str(ch.rid) if ch is not None else None,
        "new_token_ratio": float(ratio) if ratio is not None else None,
    }


_PROMPTS: dict[str, tuple[int, ...]] = {}


def _around_add_request_to_queue(original: Callable, scheduler: Any, req: Any, *a: Any, **k: Any) -> Any:
    """``Scheduler._add_request_to_queue``: an arrival (logged with the iteration it precedes,
    the prompt's longest shared prefix with an earlier prompt) or a retracted request's
    re-queue (``is_retracted=True``)."""
    rec = RECORDER
    rec.poll_ctl()
    out = original(scheduler, req, *a, **k)
    if not rec.on:
        return out
    try:
        retracted = bool(k.get("is_retracted", a[0] if a else False))
        ev: dict[str, Any] = {"ev": "requeue" if retracted else "arrive", "iter": rec.iter, "tag": rec.tag,
                              "rid": str(req.rid), "t": round(time.time(), 4)}
        ids: tuple[int, ...] = ()
        if not retracted:
            ids = tuple(getattr(req, "origin_input_ids", None) or ())
            sp = getattr(req, "sampling_params", None)
            ev.update(prompt_len=len(ids), max_new_tokens=_int_or_none(getattr(sp, "max_new_tokens", None)),
                      ignore_eos=bool(getattr(sp, "ignore_eos", False)), lcp=None, lcp_rid=None)
        ev["queued"] = any(r is req for r in (getattr(scheduler, "waiting_queue", None) or []))
        # the scheduler's state as the request arrives: where a recording starts, this is
        # the model's initial state (new_token_ratio and the radix tree outlive workloads)
        ev["kv"] = sched_kv(scheduler)
        ev["sched"] = sched_desc(scheduler)
        rec.emit_lazy(lambda: _with_shared_prefix(ev, ids, retracted))
    except Exception as e:  # noqa: BLE001
        rec.emit({"ev": "arrive", "iter": rec.iter, "desc_err": repr(e)})
    return out


def _with_shared_prefix(ev: dict[str, Any], ids: tuple[int, ...], retracted: bool) -> dict[str, Any]:
    """An arrival's longest prompt prefix shared with an earlier recorded arrival (built in
    arrival order: at once, or when a ``deferred`` recording is written)."""
    if not retracted:
        ev["lcp"], ev["lcp_rid"] = _longest_shared_prefix(list(ids), _PROMPTS)
        _PROMPTS[ev["rid"]] = ids
    return ev


def _after_flush_cache(result: Any, scheduler: Any, *a: Any, **k: Any) -> None:
    """``Scheduler.flush_cache`` (the driver calls it between workloads): read the control
    file, so a ``deferred`` recording is written there, while the scheduler is idle, rather
    than inside the next workload's first iteration."""
    RECORDER.poll_ctl()
    return None


def _around_retract_decode(original: Callable, batch: Any, *a: Any, **k: Any) -> Any:
    """``ScheduleBatch.retract_decode``: which requests were retracted / aborted, and the
    allocator before and after."""
    rec = RECORDER
    if not rec.on:
        return original(batch, *a, **k)
    tc = getattr(batch, "tree_cache", None)
    alloc = getattr(batch, "token_to_kv_pool_allocator", None)

    def kv() -> dict[str, Any]:
        return {"available": int(alloc.available_size()) if alloc is not None else None,
                "evictable": int(tc.evictable_size()) if tc is not None else None}

    ev: dict[str, Any] = {"ev": "retract", "iter": rec.iter, "tag": rec.tag,
                          "rids_before": [str(r.rid) for r in batch.reqs], "kv_before": kv()}
    out = original(batch, *a, **k)
    try:
        retracted, ratio, aborted = out
        ev.update(retracted=[str(r.rid) for r in retracted], aborted=[str(r.rid) for r in aborted],
                  new_token_ratio=float(ratio), kv_after=kv(), rids_after=[str(r.rid) for r in batch.reqs])
    except Exception as e:  # noqa: BLE001
        ev["desc_err"] = repr(e)
    rec.emit(ev)
    return out


def _after_abort_request(result: Any, scheduler: Any, recv_req: Any, *a: Any, **k: Any) -> None:
    """``Scheduler.abort_request``: sglang matches ``req.rid.startswith(recv_req.rid)``."""
    rec = RECORDER
    rec.poll_ctl()
    if not rec.on:
        return None
    try:
        rec.emit(
            {
                "ev": "abort",
                "iter": rec.iter,
                "tag": rec.tag,
                "rid": getattr(recv_req, "rid", None),
                "abort_all": bool(getattr(recv_req, "abort_all", False)),
                "t": round(time.time(), 4),
            }
        )
    except Exception:  # noqa: BLE001
        pass
    return None


def _phase_hook(name: str, snapshot: bool) -> Callable:
    def hook(original: Callable, worker: Any, batch: Any, *a: Any, **k: Any) -> Any:
        if STATE.current is None or RECORDER.mode in _COMPACT:
            with phase(name):
                return original(worker, batch, *a, **k)
        if snapshot:
            add_event({"ev": "phase", "name": name, "at": "enter", "batch": batch_desc(batch, with_values=False)})
        with phase(name):
            out = original(worker, batch, *a, **k)
        if snapshot:
            ev: dict[str, Any] = {"ev": "phase", "name": name, "at": "exit", "batch": batch_desc(batch, with_values=False)}
            try:
                if name == "verify":
                    _lo, vout, can = out
                    ev["can_run_cuda_graph"] = bool(can)
                    ev["accept_tokens"] = shape(getattr(vout, "accept_tokens", None))
                    per = getattr(vout, "num_correct_drafts_per_req_cpu", None)
                    ev["accept_lens"] = [int(v) + 1 for v in per] if per is not None else None
                    ev["draft_extend_input"] = spec_desc(getattr(vout, "draft_extend_input", None))
                elif name == "draft":
                    ev["verify_input"] = spec_desc(out)
                elif name == "forward_draft_extend_after_decode":
                    ev["next_draft_input"] = spec_desc(out)
            except Exception as e:  # noqa: BLE001
                ev["desc_err"] = repr(e)
            add_event(ev)
        return out

    hook.__name__ = f"specstate_phase_{name}"
    return hook


def install(register: Callable[..., Any] | None = None) -> list[str]:
    """Register the recorder's hooks with sglang's HookRegistry (call from the plugin's
    ``register()``; ``load_plugins()`` applies them). Returns the targets."""
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    reg = register or HookRegistry.register
    ew = "sglang.srt.speculative.eagle_worker.EAGLEWorker."
    targets = []

    timed = bool(os.environ.get("SPECSTATE_REC_HOOK_TIMES"))

    def r(target: str, fn: Callable, kind: Any) -> None:
        reg(target, _timed_hook(".".join(target.split(".")[-2:]), fn, kind == HookType.AROUND) if timed else fn, kind)
        targets.append(target)

    r(ew + "forward_batch_generation", RECORDER.around_fbg, HookType.AROUND)
    for name, snap in (
        ("forward_target_extend", False),
        ("forward_draft_extend", False),
        ("draft", True),
        ("verify", True),
        ("forward_draft_extend_after_decode", True),
    ):
        r(ew + name, _phase_hook(name, snap), HookType.AROUND)
    r("sglang.srt.model_executor.model_runner.ModelRunner.forward", _around_model_runner_forward, HookType.AROUND)
    cgr = "sglang.srt.model_executor.cuda_graph_runner.CudaGraphRunner."
    r(cgr + "can_run", _after_can_run, HookType.AFTER)
    r(cgr + "replay_prepare", _around_replay_prepare, HookType.AROUND)
    dr = "sglang.srt.speculative.eagle_draft_cuda_graph_runner.EAGLEDraftCudaGraphRunner."
    de = "sglang.srt.speculative.eagle_draft_extend_cuda_graph_runner.EAGLEDraftExtendCudaGraphRunner."
    for base in (dr, de):
        r(base + "can_run", _after_can_run, HookType.AFTER)
        r(base + "replay", _around_draft_graph_replay, HookType.AROUND)
    sch = "sglang.srt.managers.scheduler.Scheduler."
    r(sch + "process_batch_result", _after_process_batch_result, HookType.AFTER)
    r(sch + "abort_request", _after_abort_request, HookType.AFTER)
    r(sch + "_add_request_to_queue", _around_add_request_to_queue, HookType.AROUND)
    r(sch + "flush_cache", _after_flush_cache, HookType.AFTER)
    r("sglang.srt.managers.schedule_batch.ScheduleBatch.retract_decode", _around_retract_decode, HookType.AROUND)
    print(f"[specstate] recorder hooks registered in pid {os.getpid()}", file=sys.stderr, flush=True)
    return targets
