"""The seed's ``speculative_disable_batch_threshold`` patch, for real, on sglang 0.5.12's v1
``EAGLEWorker.forward_batch_generation`` (installed as a HookRegistry AROUND hook by the
plugin, inside the scheduler process).

Selected by environment variables read in the scheduler process:

- ``SPECSTATE_PATCH=none|naive|fixed|agreed`` (default ``none``: no hook is registered; ``agreed``
  is ``fixed`` on one rank and the corrected multi-rank patch under DP attention: ``dp_patch``);
- ``SPECSTATE_DP_ALLOW=1``: run ``naive`` / ``fixed`` under DP attention (each rank deciding on its
  own batch) instead of refusing;
- ``SPECSTATE_THRESHOLD`` (default 5): a DECODE batch with ``batch_size() > threshold``
  takes the fallback;
- ``SPECSTATE_NAIVE_PATH=graph|eager|carried|carried-alloc`` (default ``graph``): which
  target forward the naive fallback uses, on which batch.

``naive`` is the seed's first attempt (docs in ../shared/gpu/naive-crash-on-real-worker.md):
plain-decode preparation (``input_ids`` = bonus tokens, one ``out_cache_loc`` slot per
request written into ``req_to_token`` at ``seq_lens``, ``seq_lens += 1``), a single-token
target forward, a ``GenerationBatchResult`` with one token per request, and ``batch.spec_info``
left attached. ``graph``: through ``self.forward_target_extend`` (capture FULL: the
TARGET_VERIFY graph accepts the DECODE batch and ``replay_prepare`` sizes it 16 tokens per
request); ``eager``: through ``self.target_worker.forward_batch_generation(
batch.get_model_worker_batch())`` (the stale ``EagleDraftInput`` asks for capture LAST, so
``can_run`` is False, and the triton backend reads ``spec_info.kv_indptr``, None).

``carried`` and ``carried-alloc`` are the seed's patch as the seed describes it (the model's
``seed-patch`` variants; ../shared/reference/every-rank.md T5 and T4): above the threshold the
target forward (``self.forward_target_extend``, capture FULL, the TARGET_VERIFY graph) runs on
the DECODE batch **as the scheduler handed it**: ``input_ids`` not rebuilt (under v1
speculation ``ScheduleBatch.prepare_for_decode`` returns before it sets them, and
``ScheduleBatch.merge_batch`` keeps the running batch's own), ``spec_info`` attached.
``carried`` touches nothing (``out_cache_loc`` is ``None`` after ``merge_batch``: 0.5.10+'s
batched copy ``cuda_graph_runner.py::_grouped_foreach_copy_`` raises ``AttributeError`` on it;
0.5.9's sequential copies raise ``160 vs 2`` first); ``carried-alloc`` allocates one
``out_cache_loc`` slot per request and grows ``seq_lens`` as a plain decode would, leaving
``input_ids`` as carried (then every release raises ``The size of tensor a (160) must match the
size of tensor b (2)`` when the batch carried 2 input ids).

``fixed`` treats the fallback as "a verify that accepted zero drafts": see
``fixed_fallback``.
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from specstate.integration._hookstate import phase, set_path

__all__ = ["PatchRefused", "refuse_v2_worker", "refuse_dp_attention", "PatchConfig", "config_from_env", "choose_path", "around_fbg", "around_fbg_dp", "plain_idle", "fixed_fallback", "naive_fallback", "install"]

PATCHES = ("none", "naive", "fixed", "agreed")
NAIVE_PATHS = ("graph", "eager", "carried", "carried-alloc")


@dataclass(frozen=True)
class PatchConfig:
    patch: str = "none"
    threshold: int = 5
    naive_path: str = "graph"
    #: ``SPECSTATE_DP_ALLOW=1``: run ``naive`` / ``fixed`` under DP attention anyway, each rank deciding
    #: on its own batch (the known-wrong forms, run to compare with the model: ``dp_patch``)
    allow_dp: bool = False

    def __post_init__(self) -> None:
        if self.patch not in PATCHES:
            raise ValueError(f"SPECSTATE_PATCH must be one of {PATCHES}, got {self.patch!r}")
        if self.naive_path not in NAIVE_PATHS:
            raise ValueError(f"SPECSTATE_NAIVE_PATH must be one of {NAIVE_PATHS}, got {self.naive_path!r}")
        if self.threshold < 0:
            raise ValueError("threshold must be >= 0")


def config_from_env(env: dict[str, str] | None = None) -> PatchConfig:
    env = dict(os.environ if env is None else env)
    return PatchConfig(
        patch=env.get("SPECSTATE_PATCH", "none").strip().lower() or "none",
        threshold=int(env.get("SPECSTATE_THRESHOLD", "5")),
        naive_path=env.get("SPECSTATE_NAIVE_PATH", "graph").strip().lower() or "graph",
        allow_dp=env.get("SPECSTATE_DP_ALLOW", "0").strip().lower() not in ("", "0", "false", "no"),
    )


def choose_path(cfg: PatchConfig, *, is_extend: bool, is_idle: bool, is_decode: bool, bs: int, return_logprob: bool = False) -> str:
    """Which path a ``forward_batch_generation`` call takes on one attention-TP group (pure; tested on
    CPU). ``agreed`` is ``fixed`` there: its gathered list is the rank's own batch size."""
    if is_extend:
        return "extend"
    if is_idle:
        return "idle"
    if cfg.patch != "none" and is_decode and bs > cfg.threshold:
        if cfg.patch == "naive":
            return "naive"
        if return_logprob:
            # the fixed fallback does not produce logprobs (v1 adds them inside verify);
            # such batches keep speculating rather than return wrong outputs
            return "spec"
        return "fallback"
    return "spec"


CFG = config_from_env() if os.environ.get("SPECSTATE_PATCH") else PatchConfig()


def around_fbg(original: Callable, worker: Any, batch: Any, *args: Any, **kwargs: Any) -> Any:
    if getattr(getattr(worker, "server_args", None), "enable_dp_attention", False):
        return around_fbg_dp(original, worker, batch, *args, **kwargs)
    mode = batch.forward_mode
    path = choose_path(
        CFG,
        is_extend=bool(mode.is_extend() or getattr(batch, "is_extend_in_batch", False)),
        is_idle=bool(mode.is_idle()),
        is_decode=bool(mode.is_decode()),
        bs=batch.batch_size(),
        return_logprob=bool(getattr(batch, "return_logprob", False)),
    )
    if path == "naive":
        set_path("naive", naive_path=CFG.naive_path, threshold=CFG.threshold)
        return naive_fallback(worker, batch, CFG.naive_path)
    if path == "fallback":
        set_path("fallback", threshold=CFG.threshold)
        return fixed_fallback(worker, batch)
    set_path(path)
    return original(worker, batch, *args, **kwargs)


# ---------------------------------------------------------------------------------------
# shared helpers (GPU side; sglang imported lazily)
# ---------------------------------------------------------------------------------------


def _plain_decode_prepare(batch: Any, bonus_tokens: Any) -> None:
    """What ``ScheduleBatch.prepare_for_decode`` does without speculation (page size 1):
    the input is each request's bonus token, one KV slot per request is allocated and
    written into ``req_to_token`` at position ``seq_lens``, then ``seq_lens += 1``."""
    import torch
    from sglang.srt.mem_cache.common import alloc_for_decode

    batch.input_ids = bonus_tokens.to(torch.int64)
    batch.out_cache_loc = alloc_for_decode(batch, token_per_req=1)
    batch.seq_lens.add_(1)
    batch.seq_lens_cpu.add_(1)
    batch.seq_lens_sum = int(batch.seq_lens_cpu.sum().item())


def _alloc_decode_slots(batch: Any) -> None:
    """The half of a plain decode's preparation the seed's patch may have written: one KV slot
    per request written into ``req_to_token`` at ``seq_lens``, ``seq_lens += 1``; ``input_ids``
    left as the batch carries them."""
    from sglang.srt.mem_cache.common import alloc_for_decode

    batch.out_cache_loc = alloc_for_decode(batch, token_per_req=1)
    batch.seq_lens.add_(1)
    batch.seq_lens_cpu.add_(1)
    batch.seq_lens_sum = int(batch.seq_lens_cpu.sum().item())


@contextlib.contextmanager
def _eager_only(model_runner: Any) -> Iterator[None]:
    """Make ``ModelRunner._forward_raw`` run eager for one call: the target's CUDA graphs are
    TARGET_VERIFY-only and ``CudaGraphRunner.can_run`` never compares forward modes, so a
    DECODE batch must not reach them."""
    saved = model_runner.graph_runner
    model_runner.graph_runner = None
    try:
        yield
    finally:
        model_runner.graph_runner = saved


def _draft_ctx(worker: Any):
    from sglang.srt.layers.moe.utils import (
        speculative_moe_a2a_backend_context,
        speculative_moe_backend_context,
    )

    stack = contextlib.ExitStack()
    stack.enter_context(worker.draft_tp_context(worker.draft_model_runner.tp_group))
    stack.enter_context(speculative_moe_backend_context())
    stack.enter_context(speculative_moe_a2a_backend_context())
    return stack


def _result_cls():
    try:
        from sglang.srt.managers.utils import GenerationBatchResult
    except ImportError:  # pragma: no cover
        from sglang.srt.managers.scheduler import GenerationBatchResult
    return GenerationBatchResult


# ---------------------------------------------------------------------------------------
# naive
# ---------------------------------------------------------------------------------------


def naive_fallback(worker: Any, batch: Any, naive_path: str) -> Any:
    """The seed's first attempt (crashes on the real worker, by design)."""
    old = batch.spec_info  # left attached
    with phase("naive_prepare"):
        if naive_path == "carried-alloc":
            _alloc_decode_slots(batch)
        elif naive_path != "carried":
            _plain_decode_prepare(batch, old.bonus_tokens)
    with phase("naive_target_forward"):
        if naive_path != "eager":  # graph, carried, carried-alloc: the seed's forward_target_extend
            logits_output, next_token_ids, _seq_lens_cpu, can_run = worker.forward_target_extend(batch)
        else:
            res = worker.target_worker.forward_batch_generation(batch.get_model_worker_batch())
            logits_output, next_token_ids, can_run = res.logits_output, res.next_token_ids, res.can_run_cuda_graph
    return _result_cls()(
        logits_output=logits_output,
        next_token_ids=next_token_ids,
        num_correct_drafts=0,
        can_run_cuda_graph=can_run,
    )


# ---------------------------------------------------------------------------------------
# fixed
# ---------------------------------------------------------------------------------------


def fixed_fallback(worker: Any, batch: Any, dp_attention: bool = False) -> Any:
    """Plain decode for a DECODE batch above the threshold, as "a verify that accepted zero
    drafts":

    1. keep the old ``EagleDraftInput`` aside, ``batch.spec_info = None``;
    2. plain-decode preparation (input = old bonus tokens, positions = ``seq_lens``, one KV
       slot per request written at ``seq_lens``, ``seq_lens += 1``);
    3. ONE target forward in DECODE mode, eager (never through the TARGET_VERIFY graphs),
       capture FULL (the EAGLE-3 aux hidden states ``[bs, 3 * hidden]`` for the draft);
       sample one token per request;
    4. update the requests as ``EagleVerifyInput.verify`` does for accept length 1;
    5. catch the draft KV up and build the next ``EagleDraftInput`` by the normal
       ``forward_draft_extend_after_decode`` on an ``EagleDraftExtendInput`` of one accepted
       token per unfinished request (``num_correct_drafts = 0``); finished requests are
       dropped from it as verify's ``has_finished`` branch does; all finished:
       ``_draft_preprocess_idle`` (under DP attention, ``dp_attention``: the draft extend on an empty
       input, as ``EAGLEWorker.forward_batch_generation`` does when ``enable_dp_attention``);
    6. return ``num_correct_drafts=0``, ``num_correct_drafts_per_req_cpu=[0] * bs``.
    """
    bs = batch.batch_size()
    _fallback_prepare(batch)
    tres, hidden = _fallback_target_decode(worker, batch, bs)
    next_token_ids = tres.next_token_ids
    unfinished = _fallback_update_reqs(batch, next_token_ids)
    _fallback_draft(worker, batch, hidden, next_token_ids, unfinished, bs, dp_attention)
    return _result_cls()(
        logits_output=tres.logits_output,
        next_token_ids=next_token_ids,
        num_correct_drafts=0,
        num_correct_drafts_per_req_cpu=[0] * bs,
        can_run_cuda_graph=bool(tres.can_run_cuda_graph),
    )


def _fallback_prepare(batch: Any) -> None:
    """Step 1-2 of ``fixed_fallback``: the old draft input set aside, plain-decode preparation."""
    import torch

    old = batch.spec_info
    with phase("fallback_prepare"):
        batch.spec_info = None
        batch.return_hidden_states = False
        for req in batch.reqs:
            req.decode_batch_idx += 1
        if batch.sampling_info.penalizer_orchestrator.is_required:
            batch.sampling_info.penalizer_orchestrator.cumulate_output_tokens(old.bonus_tokens.to(torch.int64))
        _plain_decode_prepare(batch, old.bonus_tokens)


def _fallback_target_decode(worker: Any, batch: Any, bs: int) -> tuple[Any, Any]:
    """Step 3: one eager target DECODE forward capturing FULL hidden states; its result and hidden states."""
    from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode

    with phase("fallback_target_decode"):
        mwb = batch.get_model_worker_batch()
        mwb.capture_hidden_mode = CaptureHiddenMode.FULL
        tmr = worker.target_worker.model_runner
        with _eager_only(tmr):
            tres = worker.target_worker.forward_batch_generation(mwb)
        hidden = tres.logits_output.hidden_states
        if hidden is None or hidden.shape[0] != bs:
            raise RuntimeError(f"fallback: target hidden states {None if hidden is None else tuple(hidden.shape)} for bs {bs}")
    return tres, hidden


def _fallback_update_reqs(batch: Any, next_token_ids: Any) -> list[int]:
    """Step 4: every request takes its one token as verify does for accept length 1; the
    indices of those still unfinished."""
    with phase("fallback_update_reqs"):
        ids_cpu = next_token_ids.tolist()
        think_end_id = getattr(batch.model_config, "think_end_id", None)
        return [i for i, req in enumerate(batch.reqs) if not _accept_one(req, int(ids_cpu[i]), think_end_id)]


def _accept_one(req: Any, tok: int, think_end_id: Any) -> bool:
    """One request takes ``tok`` (``EagleVerifyInput.verify``'s per-request update, no draft
    accepted); whether it finished."""
    req.output_ids.append(tok)
    if getattr(req, "require_reasoning", False) and think_end_id is not None:
        req.update_reasoning_tokens(tok, think_end_id)
    req.check_finished()
    if not req.finished() and req.grammar is not None:
        req.grammar.accept_token(tok)
        req.check_finished()
    req.kv_committed_len += 1
    req.kv_allocated_len = req.kv_committed_len
    finished = bool(req.finished())
    req.spec_verify_ct += 1
    req.spec_num_correct_drafts += 0
    req.update_spec_correct_drafts_histogram(0)
    return finished


def _fallback_draft(worker: Any, batch: Any, hidden: Any, next_token_ids: Any, unfinished: list[int], bs: int,
                    dp_attention: bool = False) -> None:
    """Step 5: the draft KV caught up and the next ``EagleDraftInput`` built (all finished:
    ``_draft_preprocess_idle``; under DP attention the draft extend runs on an empty input instead,
    as upstream's ``forward_batch_generation`` keeps every rank's draft forward)."""
    with _draft_ctx(worker):
        if not unfinished and dp_attention:
            with phase("fallback_draft_idle"):
                batch.spec_info = _empty_draft_extend(worker, batch)
                batch.spec_info = worker.forward_draft_extend_after_decode(batch)
            return
        if not unfinished:
            with phase("fallback_draft_idle"):
                worker._draft_preprocess_idle(batch)
            return
        batch.spec_info = _draft_extend_input(batch, hidden, next_token_ids, unfinished, bs)
        next_draft_input = worker.forward_draft_extend_after_decode(batch)
        batch.spec_info = next_draft_input


def _draft_extend_input(batch: Any, hidden: Any, next_token_ids: Any, unfinished: list[int], bs: int) -> Any:
    """An ``EagleDraftExtendInput`` of one accepted token per unfinished request (finished rows
    dropped as verify's ``has_finished`` branch does, ``out_cache_loc`` with them)."""
    import torch
    from sglang.srt.speculative.eagle_info import EagleDraftExtendInput

    dev = batch.seq_lens.device
    k = len(unfinished)
    zeros = torch.zeros((k,), dtype=torch.int32, device=dev)
    if k == bs:
        return EagleDraftExtendInput(
            hidden_states=hidden, num_correct_drafts=zeros, num_accept_tokens=zeros + 1, num_accept_tokens_cpu=[1] * k,
            input_ids=next_token_ids, seq_lens=batch.seq_lens, seq_lens_cpu=batch.seq_lens_cpu,
            req_pool_indices=batch.req_pool_indices)
    idx = torch.tensor(unfinished, dtype=torch.int64, device=dev)
    batch.out_cache_loc = batch.out_cache_loc[idx]
    return EagleDraftExtendInput(
        hidden_states=hidden[idx], num_correct_drafts=zeros, num_accept_tokens=zeros + 1, num_accept_tokens_cpu=[1] * k,
        input_ids=next_token_ids[idx], seq_lens=batch.seq_lens[idx], seq_lens_cpu=batch.seq_lens_cpu[unfinished],
        req_pool_indices=batch.req_pool_indices[idx])


# ---------------------------------------------------------------------------------------
# DP attention (``dp_patch`` decides; GPU side, sglang imported lazily)
# ---------------------------------------------------------------------------------------


def around_fbg_dp(original: Callable[..., Any], worker: Any, batch: Any, *args: Any, **kwargs: Any) -> Any:
    """AROUND ``EAGLEWorker.forward_batch_generation`` when the engine runs DP attention."""
    from specstate.integration.dp_patch import dp_choose_path, gathered_from_batch, trace

    cfg = CFG
    g = gathered_from_batch(batch)
    dp = getattr(getattr(worker, "server_args", None), "dp_size", None)
    if cfg.patch == "agreed" and dp is not None and len(g.global_num_tokens) != dp:
        # without require_mlp_tp_gather the batch carries its own count only (``_update_gather_batch``):
        # a decision from it would be each rank's own, the one this patch exists to avoid
        raise PatchRefused(f"specstate: the agreed patch needs every DP rank's count in batch.global_num_tokens "
                           f"(require_mlp_tp_gather) but got {list(g.global_num_tokens)} for dp_size {dp}")
    path = dp_choose_path(cfg.patch, cfg.threshold, g)
    trace({"ev": "decide", "patch": cfg.patch, "path": path, "gnt": list(g.global_num_tokens),
            "ext": g.is_extend_in_batch, "mode": g.local_mode, "bs": g.local_bs})
    if path == "naive":
        set_path("naive", naive_path=cfg.naive_path, threshold=cfg.threshold)
        return naive_fallback(worker, batch, cfg.naive_path)
    if path == "fallback":
        set_path("fallback", threshold=cfg.threshold, dp=list(g.global_num_tokens))
        return fixed_fallback(worker, batch, dp_attention=True)
    if path == "idle-plain":
        set_path("idle-plain", threshold=cfg.threshold, dp=list(g.global_num_tokens))
        return plain_idle(worker, batch)
    set_path(path)
    return original(worker, batch, *args, **kwargs)


def plain_idle(worker: Any, batch: Any) -> Any:
    """The agreed plain path on a rank without requests: what a plain (non-speculative) IDLE
    iteration runs, the DP gathers of the target forward at width 1 (no spec input:
    ``ForwardBatch.init_new`` keeps the gathered list as is) and eager, as every busy rank's
    fallback is; then the draft side as upstream's idle verify leaves it: an empty
    ``EagleDraftExtendInput`` through ``forward_draft_extend_after_decode`` (its idle branch,
    ``create_idle_input``), whose result is the next ``spec_info``."""
    with phase("plain_idle_target"):
        batch.spec_info = None
        batch.return_hidden_states = False
        mwb = batch.get_model_worker_batch()
        with _eager_only(worker.target_worker.model_runner):
            tres = worker.target_worker.forward_batch_generation(mwb)
    with _draft_ctx(worker), phase("plain_idle_draft"):
        batch.spec_info = _empty_draft_extend(worker, batch)
        batch.spec_info = worker.forward_draft_extend_after_decode(batch)
    return _result_cls()(logits_output=tres.logits_output, next_token_ids=tres.next_token_ids, num_correct_drafts=0,
                         num_correct_drafts_per_req_cpu=[], can_run_cuda_graph=bool(tres.can_run_cuda_graph))


def _empty_draft_extend(worker: Any, batch: Any) -> Any:
    """``EagleDraftExtendInput.create_idle_input`` (0 rows): ``forward_draft_extend_after_decode``
    takes its idle branch on it, as upstream's DP path does for an idle or all-finished batch."""
    from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode
    from sglang.srt.speculative.eagle_info import EagleDraftExtendInput

    return EagleDraftExtendInput.create_idle_input(
        device=worker.device, hidden_size=EagleDraftExtendInput.hidden_size_for(worker),
        dtype=EagleDraftExtendInput.dtype_for(worker), capture_hidden_mode=CaptureHiddenMode.LAST)


class PatchRefused(RuntimeError):
    """The threshold patch was loaded into an engine whose worker it does not patch."""


def refuse_v2_worker(result: Any, worker: Any, *args: Any, **kwargs: Any) -> None:
    """AFTER ``EAGLEWorkerV2.__init__``: the overlap scheduler's v2 worker never calls
    ``EAGLEWorker.forward_batch_generation``, so the patch would silently do nothing."""
    raise PatchRefused(
        f"specstate: the {CFG.patch} threshold patch patches sglang's v1 EAGLEWorker, but this engine runs "
        "EAGLEWorkerV2 (overlap scheduler); start it with disable_overlap_schedule=True, or use sglang's own "
        "--speculative-adaptive switch")


def refuse_dp_attention(result: Any, worker: Any, *args: Any, **kwargs: Any) -> None:
    """AFTER ``EAGLEWorker.__init__``: ``naive`` and ``fixed`` decide on one rank's batch, which under
    DP attention puts ranks into different collectives (``dp_patch``); refused unless
    ``SPECSTATE_DP_ALLOW`` asks to run them anyway. ``agreed`` is the DP form."""
    sa = getattr(worker, "server_args", None)
    if getattr(sa, "enable_dp_attention", False) and CFG.patch != "agreed" and not CFG.allow_dp:
        raise PatchRefused(
            f"specstate: the {CFG.patch} threshold patch does not support DP attention "
            "(enable_dp_attention=True): each rank would decide on its own batch; use SPECSTATE_PATCH=agreed "
            "(one decision from the gathered MLP-sync record), or SPECSTATE_DP_ALLOW=1 to run it anyway")


def install(register: Callable[..., Any] | None = None) -> str | None:
    """Register the AROUND hook (when ``SPECSTATE_PATCH`` is naive, fixed or agreed)."""
    global CFG
    CFG = config_from_env()
    if CFG.patch == "none":
        return None
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    reg = register or HookRegistry.register
    target = "sglang.srt.speculative.eagle_worker.EAGLEWorker.forward_batch_generation"
    reg(target, around_fbg, HookType.AROUND)
    # refuse, at worker start, the workers this patch does not patch (it would do nothing)
    reg("sglang.srt.speculative.eagle_worker.EAGLEWorker.__init__", refuse_dp_attention, HookType.AFTER)
    reg("sglang.srt.speculative.eagle_worker_v2.EAGLEWorkerV2.__init__", refuse_v2_worker, HookType.AFTER)
    print(
        f"[specstate] patch {CFG.patch} (threshold {CFG.threshold}"
        + (f", naive path {CFG.naive_path}" if CFG.patch == "naive" else "")
        + (", DP attention allowed" if CFG.allow_dp else "")
        + f") registered in pid {os.getpid()}",
        file=sys.stderr,
        flush=True,
    )
    return target
