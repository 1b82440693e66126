"""The worker's CUDA graphs: the capture plan, its dummy batches, and the per-step dispatch.

- ``v1/worker/gpu/cudagraph_utils.py::CudaGraphManager.__init__``: the decode descriptors (FULL, one
  per uniform query length ``q`` of ``config/vllm.py::VllmConfig.get_decode_cudagraph_query_lens``
  and request count ``n`` up to the most requests ``q`` runs at) and the token-keyed ones (the
  mixed mode's, ``prefill_cudagraph_capture_token_sizes``).
- ``v1/worker/gpu/input_batch.py::InputBatch.make_dummy``: each capture's dummy batch asserts
  ``0 < num_reqs <= num_tokens`` (vllm#48494 fails here: a negative width).
- ``v1/worker/gpu/model_runner.py::GPUModelRunner.gather_batch_req_state``: the batch's uniform
  query length and ``decode_graph_eligible`` (no row still prefilling).
- ``v1/worker/gpu/cudagraph_utils.py::CudaGraphManager.dispatch``: a uniform decode batch takes the
  smallest decode graph of its ``q`` holding its requests, else the smallest compatible token-keyed
  graph (``_is_compatible``), else eager (NONE).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import TYPE_CHECKING

from specstate.model import tensors as T
from specstate.model.vllm_0_34_0.config import DEFAULT_CAPTURE_SIZES, VllmEngineConfig, cdiv, decode_cudagraph_query_lens
from specstate.model.vllm_0_34_0.state import Dispatch

if TYPE_CHECKING:
    from specstate.model.vllm_0_34_0.state import StepRecord, VState

__all__ = ["Desc", "CapturePlan", "capture_plan", "make_dummy", "gather_batch", "dispatch", "BatchShape",
           "MODES", "decode_capture_shapes"]

#: ``config/compilation.py::CUDAGraphMode``: (decode_mode, mixed_mode, separate_routine)
MODES: dict[str, tuple[str, str, bool]] = {
    "FULL_AND_PIECEWISE": ("FULL", "PIECEWISE", True),
    "FULL_DECODE_ONLY": ("FULL", "NONE", True),
    "PIECEWISE": ("PIECEWISE", "PIECEWISE", False),
    "FULL": ("FULL", "FULL", False),
    "NONE": ("NONE", "NONE", False),
}


@dataclass(frozen=True)
class Desc:
    """``v1/worker/gpu/cudagraph_utils.py::BatchExecutionDescriptor``."""

    mode: str
    num_tokens: int
    num_reqs: int | None
    uniform_token_count: int | None = None
    runner: str = "target"


@dataclass(frozen=True)
class CapturePlan:
    decode: dict[int, tuple[Desc, ...]]  #: q -> its FULL decode graphs, by request count
    token_keyed: tuple[Desc, ...]  #: the mixed mode's graphs, by token count
    draft: tuple[Desc, ...] = ()  #: the speculator's one-token draft-decode graphs
    query_lens: tuple[tuple[int, int], ...] = ()  #: the target's ``get_decode_cudagraph_query_lens``

    def describe(self) -> str:
        qs = ", ".join(f"q={q}: {len(d)} graphs up to {d[-1].num_reqs} reqs" for q, d in sorted(self.decode.items()) if d)
        return f"decode graphs [{qs or 'none'}]; {len(self.token_keyed)} token-keyed; {len(self.draft)} draft"


def make_dummy(num_reqs: int, num_tokens: int) -> tuple[int, ...]:
    """``v1/worker/gpu/input_batch.py::InputBatch.make_dummy``: ``assert 0 < num_reqs <= num_tokens``
    (an ``AssertionError`` as upstream's), then the dummy's query lengths spread evenly."""
    assert 0 < num_reqs <= num_tokens, f"make_dummy: 0 < num_reqs ({num_reqs}) <= num_tokens ({num_tokens})"
    base, extra = divmod(num_tokens, num_reqs)
    return tuple([base] * (num_reqs - extra) + [base + 1] * extra)


def _sizes(config: VllmEngineConfig) -> tuple[int, ...]:
    return config.capture_sizes if config.capture_sizes is not None else DEFAULT_CAPTURE_SIZES


def decode_capture_shapes(sizes: tuple[int, ...], query_lens: dict[int, int], max_tokens: int) -> list[tuple[int, int]]:
    """``config/compilation.py::decode_cudagraph_capture_shapes``: the ``(num_reqs, q)`` decode graphs,
    for each q up to ``min(max_reqs, max_tokens // q)`` requests; the first size above that limit is
    captured at the limit, larger ones are unreachable."""
    ordered = sorted(set(sizes))
    shapes: set[tuple[int, int]] = set()
    for q, max_reqs in query_lens.items():
        limit = min(max_reqs, max_tokens // q)
        reachable = ordered[: bisect.bisect_left(ordered, limit) + 1]
        shapes.update((min(n, limit), q) for n in reachable if limit >= 1)
    return sorted(shapes, key=lambda shape: (shape[1], shape[0]))


def capture_plan(config: VllmEngineConfig, *, guard: bool = True) -> CapturePlan:
    """The graphs ``CudaGraphManager`` captures for the target (``decode_query_len = K + 1``,
    ``GPUModelRunner.load_model``) and for the speculator's draft decodes (one token a request), each
    capture's dummy batch built (``make_dummy``)."""
    decode_mode, mixed_mode, separate = MODES[config.cudagraph_mode]
    sizes = _sizes(config)
    k = config.num_speculative_tokens
    qlens = decode_cudagraph_query_lens(config, k + 1)
    decode: dict[int, tuple[Desc, ...]] = {}
    if separate and decode_mode != "NONE":
        # ``CudaGraphManager.__init__``: request counts capped at ``max_num_seqs``; the token cap is
        # ``decode_cudagraph_capture_max_tokens``, taken here as the largest capture size within the budget
        max_tokens = max((t for t in sizes if t <= config.max_num_batched_tokens), default=0)
        capped = {q: min(r, config.max_num_seqs) for q, r in qlens.items()}
        for n, q in decode_capture_shapes(sizes, capped, max_tokens):
            make_dummy(n, n * q)
            decode[q] = decode.get(q, ()) + (Desc(decode_mode, n * q, n, q),)
    token_keyed: tuple[Desc, ...] = ()
    if mixed_mode != "NONE":
        token_keyed = tuple(Desc(mixed_mode, t, min(t, config.max_num_seqs) if mixed_mode == "FULL" else None)
                            for t in sizes if t <= config.max_num_batched_tokens)
    draft: tuple[Desc, ...] = ()
    if k >= 2 and decode_mode == "FULL":
        # ``config/vllm.py::VllmConfig.get_draft_decode_cudagraph_request_sizes``: the draft runner's
        # one-token decodes; its query lengths through the same width formula (``guard``)
        dq = decode_cudagraph_query_lens(config, 1, guard=guard)
        out = []
        for q, max_reqs in sorted(dq.items()):
            for n in sizes:
                if n <= min(max_reqs, config.max_num_seqs):
                    make_dummy(n, n * q)
                    out.append(Desc("FULL", n * q, n, q, runner="draft"))
        draft = tuple(out)
    return CapturePlan(decode, token_keyed, draft, tuple(sorted(qlens.items())))


@dataclass(frozen=True)
class BatchShape:
    num_reqs: int
    num_tokens: int
    max_query_len: int
    uniform_token_count: int | None
    decode_graph_eligible: bool


def gather_batch(state: "VState", rec: "StepRecord") -> BatchShape:
    """``GPUModelRunner.gather_batch_req_state`` + ``v1/worker/utils.py::get_uniform_decode_token_count``:
    ``decode_graph_eligible`` unless a row is still in its prompt (a one-token extension of a
    computed prefill excepted); uniform when every row has the same query length."""
    n = len(rec.scheduled)
    toks = sum(t for _, t in rec.scheduled)
    mql = max((t for _, t in rec.scheduled), default=0)
    spec = dict(rec.spec)
    eligible = True
    for rid, t in rec.scheduled:
        req = state.req(rid)
        before = req.num_computed_tokens - t  # ``_update_after_schedule`` already advanced it
        prefilling = before < req.num_prompt_tokens
        if prefilling and not (t - spec.get(rid, 0) == 1 and before > 0):
            eligible = False
    uniform = mql if (eligible and n > 0 and toks == n * mql) else None
    return BatchShape(n, toks, mql, uniform, eligible)


def dispatch(plan: CapturePlan, state: "VState", rec: "StepRecord", eligible: bool) -> Dispatch | None:
    """``CudaGraphManager.dispatch`` for the step's batch (``eligible``: the runner's
    ``decode_graph_eligible``, an operation a variant replaces); ``None`` for an empty step. The
    chosen graph's rows hold the batch: its input buffer slice takes the batch's tokens
    (``tensors.copy_into``, torch's error where it cannot)."""
    if not rec.scheduled:
        return None
    shape = gather_batch(state, rec)
    uniform = shape.max_query_len if (eligible and shape.num_tokens == shape.num_reqs * shape.max_query_len) else None
    chosen = None
    if uniform is not None and uniform in plan.decode:
        table = plan.decode[uniform]
        need = cdiv(shape.num_tokens, uniform)
        chosen = next((d for d in table if (d.num_reqs or 0) >= need), None)
    if chosen is None:
        chosen = next((d for d in plan.token_keyed if d.num_tokens >= shape.num_tokens
                       and (d.num_reqs is None or d.num_reqs >= shape.num_reqs)), None)
    if chosen is None:
        return Dispatch("NONE", shape.num_tokens, shape.num_reqs, None, shape.num_tokens, shape.num_reqs,
                        shape.decode_graph_eligible)
    T.copy_into(T.take_rows((chosen.num_tokens,), shape.num_tokens), (shape.num_tokens,))
    return Dispatch(chosen.mode, chosen.num_tokens, chosen.num_reqs, chosen.uniform_token_count, shape.num_tokens,
                    shape.num_reqs, shape.decode_graph_eligible)
