"""The ``deferred`` recorder mode's snapshots of sglang 0.5.12's v1 worker (pure, duck-typed).

What conformance reads, and nothing more than the ``lean`` mode records
(``sglang_recorder.lean_before`` / ``lean_after`` / ``lean_fwd_desc``), captured as cheaply
as the scheduler thread allows: plain values for what changes later (lengths, the CPU
``seq_lens`` copy that ``EagleVerifyInput.verify`` updates in place, per-request counters)
and references to immutable objects for the rest (``torch.Size``, ``torch.dtype``, classes,
finish reasons), which ``recorder_core._render`` turns into the same JSON when the recording
is written (``RecorderCore.flush_buffer``). No GPU tensor is read or kept: a kept tensor
would hold device memory until the workload ends.

The identity kept: for every record, ``json.loads(json.dumps(deferred, default=_render))``
equals what ``lean`` mode writes (``tests/test_integration_cpu.py`` checks it on fakes).
"""

from __future__ import annotations

import bisect
from typing import Any

from specstate.integration.backend import is_drafting
from specstate.integration.recorder_core import _enum_name, _int_or_none, tdesc

try:  # the scheduler has torch; an isinstance check is cheaper than three hasattr calls
    from torch import Tensor as _Tensor
except ImportError:  # pragma: no cover  (the duck-typed checks below still apply)
    _Tensor = None  # type: ignore[assignment,misc]

__all__ = ["name_of", "length", "cpu_list", "cpu_values", "rshape", "after_capture", "render_after",
           "fwd_capture", "render_event", "runner_info", "graph_snapshot", "post_capture", "render_post", "req_rows"]

_ROW_FIELDS = ("topk_p", "topk_index", "hidden_states", "bonus_tokens")


def _is_tensor(x: Any) -> bool:
    if _Tensor is not None and isinstance(x, _Tensor):
        return True
    return hasattr(x, "shape") and hasattr(x, "dtype") and hasattr(x, "device")


#: enum members seen by ``name_of``, by identity (members live as long as their class; an
#: ``IntEnum`` member would also match its integer as a dict key)
_NAMES: dict[int, tuple[Any, str]] = {}


def name_of(x: Any) -> Any:
    """``recorder_core._enum_name``, with a fast path for enum members (their ``_name_``;
    ``Enum.name`` is a descriptor, several times slower), remembered by identity."""
    hit = _NAMES.get(id(x))
    if hit is not None and hit[0] is x:
        return hit[1]
    n = getattr(x, "_name_", None)
    if type(n) is str and hasattr(x, "value"):
        if len(_NAMES) < 256:
            _NAMES[id(x)] = (x, n)
        return n
    return _enum_name(x)


def length(x: Any) -> int | None:
    """``len`` of a list or a 1-D tensor, ``None`` for ``None``; a tensor's length from its
    shape (``Tensor.__len__`` is Python code, about ten times slower)."""
    if x is None:
        return None
    if _Tensor is not None and isinstance(x, _Tensor):
        return x.shape[0]
    return len(x)


def cpu_list(x: Any, limit: int = 512) -> list[Any] | None:
    """The values of a small CPU tensor (``recorder_core._cpu_values``), else ``None``."""
    if x is None:
        return None
    if _Tensor is not None and isinstance(x, _Tensor):
        return (x.tolist() if x.dim() == 1 else x.flatten().tolist()) if x.is_cpu and x.numel() <= limit else None
    dev = getattr(x, "device", None)
    if dev is None or getattr(dev, "type", None) != "cpu" or not hasattr(x, "dtype") or x.numel() > limit:
        return None
    return x.tolist() if x.dim() == 1 else x.detach().flatten().tolist()


def rshape(x: Any) -> Any:
    """A tensor's ``torch.Size`` (a tuple: JSON writes it as ``recorder_core.shape`` does)."""
    return x.shape if x is not None and _is_tensor(x) else None


def after_capture(batch: Any, res: Any) -> tuple[Any, ...]:
    """The ``fbg`` exit snapshot (``lean_after``), captured as one tuple (of tuples, plain values
    and ``req_rows``' list; no dict survives the call) and rendered by
    ``render_after`` when the recording is written: ``seq_lens`` from the CPU copy,
    per-request rids, lengths and finish reasons, ``spec_info`` rows, accept lengths."""
    spec = batch.spec_info
    per = getattr(res, "num_correct_drafts_per_req_cpu", None)
    return (cpu_values(getattr(batch, "seq_lens_cpu", None)), None if spec is None else _spec_capture(spec),
            req_rows(batch.reqs), None if per is None else tuple(per))


def _spec_capture(spec: Any) -> tuple[Any, ...]:
    """``(class, *row fields)``, each field ``_raw_field``'s (one loop, no call per tensor)."""
    out: list[Any] = [type(spec)]
    for n in _ROW_FIELDS:
        x = getattr(spec, n, None)
        out.append((x.shape, x.dtype) if type(x) is _Tensor else _raw_field(x))
    return tuple(out)


def req_rows(reqs: list[Any]) -> list[tuple[Any, int, Any, Any, Any]]:
    """Per request ``(rid, len(output_ids), kv_committed_len, kv_allocated_len,
    finished_reason)``: one loop (five list comprehensions take twice as long); tuples of
    plain values, which the cyclic GC stops tracking at its next pass."""
    return [(r.rid, len(r.output_ids), r.kv_committed_len, r.kv_allocated_len, r.finished_reason) for r in reqs]


def _columns(rows: list[tuple[Any, ...]]) -> tuple[list[str], list[Any], list[Any], list[Any], list[Any]]:
    """``req_rows`` as the recorder's parallel lists: rids as strings, finish reasons by class name."""
    return ([str(r[0]) for r in rows], [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows],
            [None if r[4] is None else type(r[4]).__name__ for r in rows])


def _raw_field(x: Any) -> Any:
    """A row field: ``(shape, dtype)`` of a tensor, else the value (``tdesc`` at render)."""
    if x is not None and _is_tensor(x):
        return (x.shape, x.dtype)
    return x


def _render_field(x: Any) -> Any:
    if type(x) is tuple and len(x) == 2 and not isinstance(x[1], (int, float, str, bool)):
        return {"s": list(x[0]), "d": str(x[1]).replace("torch.", "")}
    return tdesc(x)


def render_after(cap: tuple[Any, ...]) -> dict[str, Any]:
    """``after_capture``'s tuple as ``lean_after`` writes it, with the finished list
    (the entry snapshot lists none as finished: a finish happens inside the call)."""
    seq, spec, rows, per = cap
    srids, out_len, kvc, kva, names = _columns(rows)
    spec_d = None if spec is None else {
        "cls": spec[0].__name__, "fields": {n: _render_field(v) for n, v in zip(_ROW_FIELDS, spec[1:])}}
    return {
        "after": {"seq_lens": None if seq is None else list(seq), "spec_info": spec_d},
        "reqs_after": {"rid": srids, "out_len": out_len, "kv_committed": kvc, "kv_allocated": kva, "finished": names},
        "result": {"accept_lens": [int(v) + 1 for v in per] if per is not None else None},
        "finished": [rid for rid, f in zip(srids, names) if f is not None],
    }


def cpu_values(x: Any, limit: int = 512) -> tuple[Any, ...] | None:
    """``cpu_list`` as a tuple (kept until the recording is written); a 1-D CPU tensor (the
    per-step case: ``seq_lens_cpu``) without the general checks."""
    if type(x) is _Tensor and x.is_cpu and x.dim() == 1 and x.shape[0] <= limit:
        return tuple(x.tolist())
    v = cpu_list(x, limit)
    return None if v is None else tuple(v)


#: per graph runner (they live as long as the engine): label, capture mode, tokens per bs,
#: capture list
_RUNNERS: dict[int, tuple[Any, str, Any, int, list[int]]] = {}


def runner_info(runner: Any, label_of: Any) -> tuple[str, Any, int, list[int]]:
    """A graph runner's static attributes, read once (``label_of``: the recorder's label)."""
    hit = _RUNNERS.get(id(runner))
    if hit is not None and hit[0] is runner:
        return hit[1:]
    cfm = name_of(getattr(runner, "capture_forward_mode", None))
    info = (label_of(runner), cfm, int(getattr(runner, "num_tokens_per_bs", None) or 0),
            list(getattr(runner, "capture_bs", []) or []))
    _RUNNERS[id(runner)] = (runner, *info)
    return info


def _padded(cbs: list[int], raw_bs: int) -> int | None:
    i = bisect.bisect_left(cbs, raw_bs)
    return cbs[i] if cbs and i < len(cbs) else None


def graph_snapshot(runner: Any, forward_batch: Any, label_of: Any) -> dict[str, Any]:
    """The target graph runner's ``replay_prepare`` (``_around_replay_prepare``'s ``graph``)."""
    return _graph_dict(runner, getattr(forward_batch, "batch_size", None) or 0,
                       rshape(getattr(forward_batch, "input_ids", None)), label_of)


def _graph_dict(runner: Any, raw_bs: int, in_tokens: Any, label_of: Any) -> dict[str, Any]:
    label, cfm, ntpb, cbs = runner_info(runner, label_of)
    pbs = _padded(cbs, raw_bs)
    return {"runner": label, "capture_forward_mode": cfm, "num_tokens_per_bs": ntpb, "raw_bs": raw_bs,
            "padded_bs": pbs, "raw_num_token": raw_bs * ntpb, "in_tokens": in_tokens,
            "padding_reset": pbs is not None and pbs != raw_bs}


def draft_graph_snapshot(runner: Any, ev: dict[str, Any], label_of: Any) -> dict[str, Any]:
    """A draft graph runner's ``replay`` (``_around_draft_graph_replay``'s ``graph``)."""
    return _draft_graph_dict(runner, getattr(runner, "forward_mode", None), ev, label_of)


def _draft_graph_dict(runner: Any, runner_mode: Any, ev: dict[str, Any], label_of: Any) -> dict[str, Any]:
    label, _cfm, ntpb, cbs = runner_info(runner, label_of)
    raw_bs = ev.get("bs") or 0
    pbs = _padded(cbs, raw_bs)
    n_in = (ev.get("input_ids") or [0])[0]
    mode = name_of(runner_mode) or ("DECODE" if label == "draft_decode" else None)
    return {"runner": label, "capture_forward_mode": mode, "num_tokens_per_bs": ntpb, "raw_bs": raw_bs, "padded_bs": pbs,
            "padding_reset": (pbs != raw_bs) if label == "draft_decode" else (pbs is not None and pbs * ntpb != n_in)}


# ---------------------------------------------------------------------------------------
# the compact captures of the per-step hooks (one tuple each; rendered at write time)
# ---------------------------------------------------------------------------------------


def fwd_capture(fb: Any, draft: bool) -> tuple[Any, ...]:
    """A ``ForwardBatch`` entering a model forward (``lean_fwd_desc``), as a tuple of
    references and plain values (``render_fwd_desc``); a drafting forward
    (``backend.is_drafting``) as ``(mode, batch size)``."""
    mode = getattr(fb, "forward_mode", None)
    if draft and is_drafting("draft", name_of(mode)):
        return (mode, getattr(fb, "batch_size", None))
    spec = getattr(fb, "spec_info", None)
    ids = getattr(fb, "input_ids", None)
    ocl = getattr(fb, "out_cache_loc", None)
    return (mode, getattr(fb, "batch_size", None),
            None if ids is None else ids.shape if type(ids) is _Tensor or _is_tensor(ids) else None,
            None if ocl is None else ocl.shape if type(ocl) is _Tensor or _is_tensor(ocl) else None,
            cpu_values(getattr(fb, "seq_lens_cpu", None)), None if spec is None else type(spec))


def render_fwd_desc(cap: tuple[Any, ...]) -> dict[str, Any]:
    """``fwd_capture``'s tuple as ``lean_fwd_desc`` writes it."""
    if len(cap) == 2:
        return {"mode": name_of(cap[0]), "bs": _int_or_none(cap[1])}
    mode, bs, ids, ocl, seq, spec = cap
    return {"mode": name_of(mode), "bs": _int_or_none(bs), "input_ids": None if ids is None else list(ids),
            "out_cache_loc": None if ocl is None else list(ocl), "seq_lens_cpu": None if seq is None else list(seq),
            "spec": None if spec is None else spec.__name__}


def render_graph(raw: tuple[Any, Any, Any], label_of: Any) -> dict[str, Any]:
    """A target graph runner's ``replay_prepare``, captured as ``(runner, batch_size,
    input_ids shape)`` (``graph_snapshot``)."""
    runner, raw_bs, in_tokens = raw
    return _graph_dict(runner, raw_bs or 0, in_tokens, label_of)


def render_event(ev: Any, label_of: Any) -> dict[str, Any]:
    """One sub-event of a compact ``fbg`` record, as ``lean`` mode writes it: a model-runner
    forward (``"m"``: phase, draft?, forward capture, graph capture, ``can_run_graph`` of its
    result or ``None`` before it returned), a draft graph replay (``"d"``: phase, runner, its
    forward mode, forward capture, returned?), or a dict (a graph decision outside a forward,
    an error). The outputs' shapes are not kept: conformance does not read them (``full``
    mode writes them)."""
    if type(ev) is dict:
        return ev
    kind = ev[0]
    if kind == "m":
        _k, ph, draft, cap, graph, out, err = ev
        d: dict[str, Any] = {"ev": "fwd", "worker": "draft" if draft else "target", "via": "model_runner"}
        d.update(render_fwd_desc(cap) if err is None else {"desc_err": err})
        d["phase"] = ph
        if graph is not None:
            d["graph"] = render_graph(graph, label_of)
        if out is not None:
            d["graph_ran"] = out
        return d
    _k, ph, runner, rmode, cap, out, err = ev
    d = {"ev": "fwd", "worker": "draft", "via": "graph:" + label_of(runner)}
    d.update(render_fwd_desc(cap) if err is None else {"desc_err": err})
    d["graph"] = _draft_graph_dict(runner, rmode, d, label_of)
    d["phase"] = ph
    if out:
        d["graph_ran"] = True
    return d


def post_capture(scheduler: Any, reqs: list[Any]) -> tuple[Any, ...]:
    """A ``post`` line's values (``sglang_recorder.post_reqs``, ``sched_kv``, ``sched_desc``)
    as one tuple; the running batch's rids are not copied when it is the processed batch."""
    alloc = getattr(scheduler, "token_to_kv_pool_allocator", None)
    tc = getattr(scheduler, "tree_cache", None)
    rtp = getattr(scheduler, "req_to_token_pool", None)
    rb = getattr(scheduler, "running_batch", None)
    rb_reqs = getattr(rb, "reqs", None) or []
    ch = getattr(scheduler, "chunked_req", None)
    ratio = getattr(scheduler, "new_token_ratio", None)
    return (req_rows(reqs), int(alloc.available_size()) if alloc is not None else None,
            int(tc.evictable_size()) if tc is not None else None,
            int(tc.protected_size()) if tc is not None else None,
            int(rtp.available_size()) if rtp is not None and callable(getattr(rtp, "available_size", None)) else None,
            tuple([r.rid for r in (getattr(scheduler, "waiting_queue", None) or ())]),
            None if rb_reqs is reqs else tuple([r.rid for r in rb_reqs]),
            bool(getattr(rb, "batch_is_full", False)), None if ch is None else ch.rid,
            None if ratio is None else float(ratio))


def render_post(head: tuple[Any, ...], cap: tuple[Any, ...]) -> dict[str, Any]:
    """``post_capture``'s tuple as the compact modes write the ``post`` line (``head``: iter,
    tag, forward mode)."""
    (rows, avail, evict, prot, slots, waiting, running, full, chunked, ratio) = cap
    it, tag, mode = head
    srids, out_len, kvc, kva, names = _columns(rows)
    return {"ev": "post", "iter": it, "tag": tag, "mode": name_of(mode), "rids": srids,
            "out_len": out_len, "kv_committed": kvc, "kv_allocated": kva, "finished": names,
            "kv": {"available": avail, "evictable": evict, "protected": prot, "req_slots": slots},
            "sched": {"waiting": [str(r) for r in waiting], "running": srids if running is None else [str(r) for r in running],
                      "batch_is_full": full, "chunked": None if chunked is None else str(chunked),
                      "new_token_ratio": ratio}}
