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

from specstate.integration.recorder_core import _enum_name, tdesc

try:  # the scheduler has torch; an isinstance check is cheaper than three hasattr calls
    from torch import Tensor as _Tensor
except ImportError:  # pragma: no cover  (the duck-typed checks below still apply)
    _Tensor = None  # type: ignore[assignment,misc]

__all__ = ["name_of", "length", "cpu_list", "rshape", "spec_rows", "after_snapshot", "fwd_snapshot", "runner_info", "graph_snapshot"]

_ROW_FIELDS = ("topk_p", "topk_index", "hidden_states", "bonus_tokens")


def _is_tensor(x: Any) -> bool:
    if _Tensor is not None and isinstance(x, _Tensor):
        return True
    return hasattr(x, "shape") and hasattr(x, "dtype") and hasattr(x, "device")


def name_of(x: Any) -> Any:
    """``recorder_core._enum_name``, with a fast path for enum members (their ``_name_``;
    ``Enum.name`` is a descriptor, several times slower)."""
    n = getattr(x, "_name_", None)
    return n if type(n) is str and hasattr(x, "value") else _enum_name(x)


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


def _rdesc(x: Any) -> Any:
    if x is not None and _is_tensor(x):
        return {"s": x.shape, "d": x.dtype}
    return tdesc(x)


def spec_rows(spec: Any) -> dict[str, Any] | None:
    """``spec_info``: class and the row fields' shapes and dtypes (``lean_spec``)."""
    if spec is None:
        return None
    return {"cls": type(spec), "fields": {n: _rdesc(getattr(spec, n, None)) for n in _ROW_FIELDS}}


def after_snapshot(batch: Any, res: Any) -> dict[str, Any]:
    """The ``fbg`` exit snapshot (``lean_after``): ``seq_lens`` from the CPU copy, per-request
    lengths and finish reasons, ``spec_info`` rows, accept lengths, and the requests that
    finished in the call (the entry snapshot lists none as finished)."""
    reqs = batch.reqs
    rids = [str(r.rid) for r in reqs]
    # Req.finished() is ``finished_reason is not None``; rendered by class name
    fins = [r.finished_reason for r in reqs]
    per = getattr(res, "num_correct_drafts_per_req_cpu", None)
    return {
        "after": {"seq_lens": cpu_list(getattr(batch, "seq_lens_cpu", None)), "spec_info": spec_rows(batch.spec_info)},
        "reqs_after": {"rid": rids, "out_len": [len(r.output_ids) for r in reqs],
                       "kv_committed": [r.kv_committed_len for r in reqs],
                       "kv_allocated": [r.kv_allocated_len for r in reqs], "finished": fins},
        "result": {"accept_lens": [int(v) + 1 for v in per] if per is not None else None},
        "finished": [rid for rid, f in zip(rids, fins) if f is not None],
    }


def fwd_snapshot(fb: Any) -> dict[str, Any]:
    """A ``ForwardBatch`` entering a model forward (``lean_fwd_desc``)."""
    spec = getattr(fb, "spec_info", None)
    return {
        "mode": name_of(getattr(fb, "forward_mode", None)),
        "bs": getattr(fb, "batch_size", None),
        "input_ids": rshape(getattr(fb, "input_ids", None)),
        "out_cache_loc": rshape(getattr(fb, "out_cache_loc", None)),
        "seq_lens_cpu": cpu_list(getattr(fb, "seq_lens_cpu", None)),
        "spec": type(spec) if spec is not None else None,
    }


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
    label, cfm, ntpb, cbs = runner_info(runner, label_of)
    raw_bs = getattr(forward_batch, "batch_size", None) or 0
    pbs = _padded(cbs, raw_bs)
    return {"runner": label, "capture_forward_mode": cfm, "num_tokens_per_bs": ntpb, "raw_bs": raw_bs,
            "padded_bs": pbs, "raw_num_token": raw_bs * ntpb, "in_tokens": rshape(getattr(forward_batch, "input_ids", None)),
            "padding_reset": pbs is not None and pbs != raw_bs}


def draft_graph_snapshot(runner: Any, ev: dict[str, Any], label_of: Any) -> dict[str, Any]:
    """A draft graph runner's ``replay`` (``_around_draft_graph_replay``'s ``graph``)."""
    label, _cfm, ntpb, cbs = runner_info(runner, label_of)
    raw_bs = ev.get("bs") or 0
    pbs = _padded(cbs, raw_bs)
    n_in = (ev.get("input_ids") or [0])[0]
    mode = name_of(getattr(runner, "forward_mode", None)) or ("DECODE" if label == "draft_decode" else None)
    return {"runner": label, "capture_forward_mode": mode, "num_tokens_per_bs": ntpb, "raw_bs": raw_bs, "padded_bs": pbs,
            "padding_reset": (pbs != raw_bs) if label == "draft_decode" else (pbs is not None and pbs * ntpb != n_in)}
