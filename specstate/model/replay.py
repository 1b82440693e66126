"""Graph replay: ``replay_prepare`` and the attention backend's replay-metadata step.

Both are named, replaceable operations (``Ops.replay_prepare``,
``Ops.init_forward_metadata_replay``). ``replay_prepare`` copies the batch into the runner's
static buffers (sized at capture: a too-small or mis-sized buffer fails inside the copy with
PyTorch's own error; the copies are ``tensors.py``'s shape ops, torch only where one fails),
then updates what each buffer row holds (:mod:`specstate.model.graph_buffers`) and returns a
:class:`GraphUse` with what the graph reads. Mirrors:

- target: ``cuda_graph_runner.py::CudaGraphRunner.replay_prepare`` ->
  ``cuda_graph_runner.py::DecodeInputBuffers.populate_from_forward_batch`` (``if bs != raw_bs:
  seq_lens.fill_; out_cache_loc.zero_``, then one ``cuda_graph_runner.py::_grouped_foreach_copy_``,
  which reads every source's ``dtype`` first: a ``None`` source, as ``merge_batch`` leaves
  ``out_cache_loc``, is Python's ``AttributeError`` before any copy), then
  ``triton_backend.py::TritonAttnBackend.init_forward_metadata_replay_cuda_graph``. A release
  that copies otherwise passes its own ``copy_target`` to :func:`prepare_static_buffers`;
- draft decode: ``eagle_draft_cuda_graph_runner.py::EAGLEDraftCudaGraphRunner.replay``
  (resets seq_lens, out_cache_loc, positions, topk_p, topk_index, hidden_states,
  req_pool_indices when ``bs != raw_bs``); its multi-step backend builds its own metadata;
- draft extend: ``eagle_draft_extend_cuda_graph_runner.py::EAGLEDraftExtendCudaGraphRunner.replay``
  (resets when ``bs * num_tokens_per_bs != num_tokens``; copies ``extend_seq_lens``,
  ``num_accept_tokens``, ``req_pool_indices``; skips the ``hidden_states`` copy, silently,
  when the widths differ).
"""

from __future__ import annotations

import functools
from itertools import chain, repeat
from typing import TYPE_CHECKING, Any, Callable, Iterable, NamedTuple

from specstate.model.config import SpecConfig
from specstate.model.graph_buffers import BufferRead, BufferSpec, GraphBuffers, Row, Writer
from specstate.model.modes import ForwardMode, Worker
from specstate.model.records import GraphUse
from specstate.model.runner import ForwardBatch, GraphRunner, check_once, guarded, guarded_once, sglang_assert
from specstate.model.spec_info import EagleDraftExtendInput, EagleDraftInput
from specstate.model.tensors import Shape, assign_prefix, copy_into, cumsum, grouped_foreach_copy, once, sliced

if TYPE_CHECKING:
    from specstate.model.ops_table import Ops

__all__ = ["Copy", "BACKEND", "CopyTarget", "replay_prepare", "prepare_static_buffers", "grouped_target_copy",
           "init_forward_metadata_replay"]

_BACKEND = "triton_backend.py::TritonAttnBackend.init_forward_metadata_replay_cuda_graph"
#: where the attention backend's replay metadata raises (inside ``replay_prepare``, after the copies)
BACKEND = _BACKEND


class Copy(NamedTuple):
    """``buffers.<name>[:extent].copy_(source)`` (a named tuple: a replay makes one per buffer)."""

    name: str
    extent: int  #: rows of the buffer this batch's data occupies
    source: Shape | None  #: ``None``: the batch's field is ``None`` (``merge_batch``'s ``out_cache_loc``)
    owners: tuple[int, ...]  #: request id per copied row
    skip: bool = False  #: the runner silently skips this copy


#: how a release copies the target runner's sources: ``(runner, copies, dst)`` with ``dst(copy)``
#: the buffer slice's shape; raises (``guarded``) where the release raises
CopyTarget = Callable[[GraphRunner, "list[Copy]", Callable[[Copy], Shape]], None]


def replay_prepare(ops: "Ops", runner: GraphRunner, fb: ForwardBatch, graphs: GraphBuffers, iteration: int,
                   config: SpecConfig) -> GraphUse:
    """The runner's replay preparation with the padding-row reset (upstream)."""
    return prepare_static_buffers(ops, runner, fb, graphs, iteration, config, reset_padding=True)


def prepare_static_buffers(ops: "Ops", runner: GraphRunner, fb: ForwardBatch, graphs: GraphBuffers, iteration: int,
                           config: SpecConfig, *, reset_padding: bool, copy_target: CopyTarget | None = None) -> GraphUse:
    """Copy (shape ops), update the buffers' rows, run the backend's replay metadata
    (``copy_target``: the release's copy of the target runner's sources; default 0.5.12's one
    ``_grouped_foreach_copy_``, :func:`grouped_target_copy`)."""
    raw_bs, bs = fb.batch_size, runner.padded_bs(fb.batch_size)
    copies = _copies(runner, fb, config)
    _run_copies(runner, copies, copy_target or grouped_target_copy)
    reset = reset_padding and _needs_reset(runner, fb, bs)
    by_name = {c.name: c for c in copies}
    writers = _Writers(iteration)  # one ``Writer`` per request, shared by every buffer
    reads: list[BufferRead] = []
    writes: list[tuple[str, tuple[Row, ...]]] = []
    dirty = False
    for spec in runner.buffers:
        padded = bs * spec.per_bs
        before = graphs.rows(spec)
        c = by_name.get(spec.name)
        raw = c.extent if c is not None else 0
        if spec.resets and not dirty and raw < padded:
            pad = before[raw:padded]
            dirty = pad.count(None) != len(pad)
        rows = (None,) * len(before) if reset and spec.resets else before
        if c is not None and not c.skip:
            rows = writers.rows(c.owners) + rows[len(c.owners):]
        reads.append(BufferRead(spec.name, raw, spec.resets, rows[:padded]))
        writes.append((spec.key, rows))
    ops.init_forward_metadata_replay(ops, runner, fb, bs, config)
    return GraphUse(runner.name, runner.capture_forward_mode, runner.num_tokens_per_bs, raw_bs, bs,
                    padding_dirty=dirty, iteration=iteration, reads=tuple(reads), writes=tuple(writes))


class _Writers(dict):
    """``rid -> Writer(rid, iteration)``, each made once; ``rows(owners)``: the rows a copy
    writes, one tuple per distinct ``owners`` (buffers of one replay share them)."""

    def __init__(self, iteration: int) -> None:
        super().__init__()
        self.iteration = iteration
        self.by_owners: dict[tuple[int, ...], tuple[Writer, ...]] = {}

    def __missing__(self, rid: int) -> Writer:
        w = self[rid] = Writer(rid, self.iteration)
        return w

    def rows(self, owners: tuple[int, ...]) -> tuple[Writer, ...]:
        got = self.by_owners.get(owners)
        if got is None:
            got = self.by_owners[owners] = tuple(map(self.__getitem__, owners))
        return got


_EXTEND_MODES = (ForwardMode.DRAFT_EXTEND, ForwardMode.DRAFT_EXTEND_V2)


def _where(runner: GraphRunner) -> str:
    """The symbol a copy fails in: the runner's own (``GraphRunner.fails_in``, set by the release
    that built it: 0.5.12's ``CudaGraphRunner.replay_prepare``, 0.5.17's and 0.5.23's
    ``DecodeCudaGraphRunner.execute``, ...), so a crash cites the running release's code."""
    return runner.fails_in or runner.symbol


def _needs_reset(runner: GraphRunner, fb: ForwardBatch, bs: int) -> bool:
    if runner.capture_forward_mode in _EXTEND_MODES:
        return bs * runner.num_tokens_per_bs != fb.input_ids[0]  # ``bs * num_tokens_per_bs != num_tokens``
    return bs != fb.batch_size


def _run_copies(runner: GraphRunner, copies: list[Copy], copy_target: CopyTarget) -> None:
    """The copies (``tensors.py``'s shape ops), once per shape signature (``tensors.once``: the buffers are the
    runner's own, by identity, every copy's name, extent, source shape and skip, and the release's copy)."""
    buffers = runner.buffers
    key = ("replay-copies", id(buffers), copy_target, tuple([(c.name, c.extent, c.source, c.skip) for c in copies]))
    once(key, functools.partial(_copy_shapes, runner, copies, buffers, copy_target))


def _copy_shapes(runner: GraphRunner, copies: list[Copy], buffers: tuple[BufferSpec, ...],
                 copy_target: CopyTarget) -> tuple[BufferSpec, ...]:
    """The copies; returns ``buffers``, which the memo then holds: its id in the key is not
    reused while the entry lives."""
    specs = {s.name: s for s in runner.buffers}

    def dst(c: Copy) -> Shape:
        return _static_rows(specs[c.name], c.extent)

    if runner.worker == Worker.TARGET:
        copy_target(runner, copies, dst)
        return buffers
    where = _where(runner)
    for c in copies:
        if c.skip:
            continue
        d = guarded(where, {"field": c.name, "capacity": specs[c.name].capacity}, functools.partial(dst, c))
        shapes = {"field": c.name, "buffer": list(d), "source": list(c.source or ()), "raw_bs": len(set(c.owners))}
        guarded(where, shapes, functools.partial(copy_into, d, c.source))
    return buffers


def grouped_target_copy(runner: GraphRunner, copies: list[Copy], dst: Callable[[Copy], Shape]) -> None:
    """``DecodeInputBuffers.populate_from_forward_batch`` (0.5.10+): every source in one
    ``_grouped_foreach_copy_`` (a ``None`` source: ``AttributeError`` before any copy)."""
    first = copies[0]
    shapes = {"input_ids_buffer": [first.extent], "input_ids": list(first.source or ()),
              "num_tokens_per_bs": runner.num_tokens_per_bs, "raw_bs": len(copies[1].owners)}
    none = [c.name for c in copies if c.source is None]
    if none:
        shapes["none"] = none
    guarded(_where(runner), shapes,
            lambda: grouped_foreach_copy([dst(c) for c in copies], [c.source for c in copies]))


def _static_rows(spec: BufferSpec, extent: int) -> Shape:
    """``buffer[:extent]``'s shape, the buffer allocated at capture as ``torch.zeros((capacity,
    *trailing))`` (it only ever receives zeros: values never matter, shapes do)."""
    return sliced((spec.capacity,) + spec.trailing, 0, extent)


def _repeat(rids: tuple[int, ...], counts: Iterable[int]) -> tuple[int, ...]:
    """Each of ``rids`` repeated its count of times, in order."""
    return tuple(chain.from_iterable(map(repeat, rids, counts)))


def _copies(runner: GraphRunner, fb: ForwardBatch, config: SpecConfig) -> list[Copy]:
    if runner.capture_forward_mode in _EXTEND_MODES:
        return _draft_extend_copies(runner, fb)
    if runner.worker == Worker.DRAFT:
        return _draft_decode_copies(fb, config, runner.steps)
    return _target_copies(runner, fb)


def _target_copies(runner: GraphRunner, fb: ForwardBatch) -> list[Copy]:
    """``populate_from_forward_batch``: input_ids, req_pool_indices, seq_lens, out_cache_loc, positions."""
    raw_bs, n = fb.batch_size, runner.num_tokens_per_bs
    tok = _repeat(fb.rids, repeat(n, raw_bs))
    return [Copy("input_ids", raw_bs * n, fb.input_ids, tok), Copy("req_pool_indices", raw_bs, (raw_bs,), fb.rids),
            Copy("seq_lens", raw_bs, (len(fb.seq_lens),), fb.rids),
            Copy("out_cache_loc", raw_bs * n, fb.out_cache_loc, tok),
            Copy("positions", raw_bs * n, fb.positions or (0,), tok)]


def _draft_decode_copies(fb: ForwardBatch, config: SpecConfig, steps: int | None = None) -> list[Copy]:
    """``EAGLEDraftCudaGraphRunner.replay``: seq_lens, out_cache_loc, positions, topk_p/index, hidden
    (``steps``: the runner's own, for a v2 runtime state)."""
    info = fb.spec_info
    assert isinstance(info, EagleDraftInput)
    raw_bs, k = fb.batch_size, config.speculative_eagle_topk
    s = config.speculative_num_steps if steps is None else steps
    return [Copy("seq_lens", raw_bs, (len(fb.seq_lens),), fb.rids),
            Copy("out_cache_loc", raw_bs * k * s, fb.out_cache_loc or (0,), _repeat(fb.rids, repeat(k * s, raw_bs))),
            Copy("positions", raw_bs * k, fb.positions or (0,), _repeat(fb.rids, repeat(k, raw_bs))),
            Copy("topk_p", raw_bs, info.topk_p, fb.rids), Copy("topk_index", raw_bs, info.topk_index, fb.rids),
            Copy("hidden_states", raw_bs, info.hidden_states, fb.rids),
            Copy("req_pool_indices", raw_bs, (raw_bs,), fb.rids)]


def _draft_extend_copies(runner: GraphRunner, fb: ForwardBatch) -> list[Copy]:
    """``EAGLEDraftExtendCudaGraphRunner.replay``: copies ``input_ids.shape[0]`` tokens."""
    info = fb.spec_info
    assert isinstance(info, EagleDraftExtendInput)
    raw_bs, num_tokens = fb.batch_size, fb.input_ids[0]
    tok = _repeat(fb.rids, fb.extend_lens or ())
    width = next(s.trailing for s in runner.buffers if s.name == "hidden_states")
    hidden_skip = tuple(info.hidden_states[1:]) != width  # ``hidden_states.shape[1] == buffers.hidden_states.shape[1]``
    return [Copy("input_ids", num_tokens, fb.input_ids, tok), Copy("seq_lens", raw_bs, (len(fb.seq_lens),), fb.rids),
            Copy("extend_seq_lens", raw_bs, (len(fb.extend_lens or ()),), fb.rids),
            Copy("out_cache_loc", num_tokens, fb.out_cache_loc or (0,), tok),
            Copy("positions", num_tokens, fb.positions or (0,), tok),
            Copy("hidden_states", num_tokens, info.hidden_states, tok, skip=hidden_skip),
            Copy("num_correct_drafts", raw_bs, info.num_correct_drafts, fb.rids),
            Copy("num_accept_tokens", raw_bs, info.num_accept_tokens, fb.rids),
            Copy("req_pool_indices", raw_bs, info.req_pool_indices, fb.rids)]


def init_forward_metadata_replay(ops: "Ops", runner: GraphRunner, fb: ForwardBatch, bs: int, config: SpecConfig) -> None:
    """``TritonAttnBackend.init_forward_metadata_replay_cuda_graph`` with the runner's
    ``capture_forward_mode`` (not the batch's): DECODE builds ``kv_indptr`` from the padded
    ``seq_lens`` when ``spec_info is None``, else ``assert False``; TARGET_VERIFY copies
    ``spec_info.custom_mask`` into ``cuda_graph_custom_mask`` (``max_num_tokens *
    max_context_len`` entries). The draft-decode runner's multi-step backend builds its own."""
    mode, info = runner.capture_forward_mode, fb.spec_info
    if runner.worker == Worker.DRAFT and mode not in _EXTEND_MODES:
        return
    if mode.is_decode_or_idle():
        shapes = functools.partial(_decode_shapes, mode, info)
        if info is not None:
            guarded(_BACKEND, shapes(), lambda: sglang_assert(False, "Multi-step cuda graph init is not done here."))
        # kv_indptr[1 : bs + 1] = torch.cumsum(seq_lens[:bs], dim=0)
        check_once(_BACKEND, ("kv_indptr", bs), shapes, lambda: cumsum((bs,), 0))
    elif mode == ForwardMode.TARGET_VERIFY:
        mask, cap = getattr(info, "custom_mask", None), runner.custom_mask_capacity
        if mask is not None:
            guarded_once(_BACKEND, ("custom_mask", cap, mask),
                         lambda: {"cuda_graph_custom_mask": [cap], "custom_mask": list(mask)},
                         functools.partial(_copy_mask, cap, mask))


def _decode_shapes(mode: ForwardMode, info: Any) -> dict[str, Any]:
    return {"forward_mode": mode.value, "spec_info": type(info).__name__ if info is not None else None}


def _copy_mask(capacity: int, mask: Shape) -> bool:
    # the buffer's first min(capacity, len + 1) entries: ``buf[:len]`` has the same size as on
    # the full ``max_num_tokens * max_context_len`` buffer (hundreds of MB at real sizes)
    # ``custom_mask[: spec_info.custom_mask.shape[0]] = spec_info.custom_mask`` (uint8)
    assign_prefix((min(capacity, mask[0] + 1),), mask[0], mask, "uint8")
    return True
