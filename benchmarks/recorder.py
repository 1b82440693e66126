"""The GPU recorder's own cost, on this CPU machine: its hooks around fake sglang objects.

The real figure is measured on the H200 (``gpu_run.sh OUT 480 overhead``; recorder off and on in
one engine, ``docs/results/gpu-replay.md``). This one needs no GPU: it drives the recorder's
real hooks (``specstate.integration.sglang_recorder``) through a simulated decode step of the
fixed patch's two regimes, with small stand-ins for sglang's objects (real CPU tensors where
sglang has tensors), and times the step with the recorder off (no output file: the hooks only
count) and in ``deferred`` mode, alternately, in one process:

- ``c4``: a speculative step at batch size 4: the draft-decode graph replay, the target verify
  forward (``ModelRunner.forward`` with the target graph's ``replay_prepare`` inside), the
  draft-extend graph replay, then ``Scheduler.process_batch_result``;
- ``c30``: a fallback step at batch size 30: the target decode forward and the draft extend
  forward (both ``ModelRunner.forward``, eager), then ``process_batch_result``.

The figure is the microseconds the recorder adds per simulated step (deferred less off, medians
of the alternating runs) beside the off step itself. The collector is off while timing (the
kept records are dropped after each run; on the GPU host the collector is timed apart, and its
share there is small: ``gc_ms_per_step``). This host's Python runs the hooks about 3-4x faster
than the scheduler process on the GPU host does (its caches are shared with sglang's own work),
so compare these figures with each other, before and after, not with the GPU's milliseconds.

Only names that older checkouts have too are used, so ``--before`` measures them there as well.
"""

from __future__ import annotations

import enum
import gc
import os
import statistics
import tempfile
import time
from types import SimpleNamespace
from typing import Any, Callable

__all__ = ["SHAPES", "step_us", "measure"]

#: regime -> batch size
SHAPES = {"c4": 4, "c30": 30}


class _Mode(enum.IntEnum):
    """sglang's ``ForwardMode`` is an ``IntEnum`` with these predicates."""

    EXTEND = 1
    DECODE = 2
    TARGET_VERIFY = 4
    DRAFT_EXTEND = 5

    def is_decode(self) -> bool:
        return self is _Mode.DECODE

    def is_extend(self) -> bool:
        return self is _Mode.EXTEND

    def is_idle(self) -> bool:
        return False


class EAGLEDraftCudaGraphRunner:
    """Named as sglang's: the recorder labels graph runners by class name."""

    num_tokens_per_bs = 1
    capture_bs = [1, 2, 4, 8, 16, 24, 32]


class EAGLEDraftExtendCudaGraphRunner:
    forward_mode = _Mode.DRAFT_EXTEND
    capture_forward_mode = _Mode.DRAFT_EXTEND
    num_tokens_per_bs = 4
    capture_bs = [1, 2, 4, 8, 16]


class _TargetGraphRunner:
    capture_forward_mode = _Mode.TARGET_VERIFY
    num_tokens_per_bs = 4
    capture_bs = [1, 2, 4, 8, 16]
    model_runner = SimpleNamespace(is_draft_worker=False)


class _Req:
    def __init__(self, i: int) -> None:
        self.rid = f"{i:032x}"
        self.output_ids = [1] * 20
        self.kv_committed_len = 84
        self.kv_allocated_len = 88
        self.finished_reason = None

    def finished(self) -> bool:
        return False


def _spec(torch: Any, bs: int) -> Any:
    return SimpleNamespace(topk_p=torch.zeros(bs, 1), topk_index=torch.zeros(bs, 1, dtype=torch.int64),
                           hidden_states=torch.zeros(bs, 64), bonus_tokens=torch.zeros(bs, dtype=torch.int64))


def _fb(torch: Any, mode: _Mode, bs: int, tokens: int, seq: Any) -> Any:
    return SimpleNamespace(forward_mode=mode, batch_size=bs, input_ids=torch.zeros(tokens, dtype=torch.int64),
                           out_cache_loc=torch.zeros(tokens, dtype=torch.int64), seq_lens_cpu=seq,
                           spec_info=_spec(torch, bs))


def _step(shape: str) -> Callable[[], None]:
    """One simulated decode step of ``shape`` through the recorder's hooks."""
    import torch

    from specstate.integration import sglang_recorder as rec
    from specstate.integration._hookstate import phase, set_path

    bs = SHAPES[shape]
    reqs = [_Req(i) for i in range(bs)]
    seq = torch.arange(bs, dtype=torch.int64) + 84
    batch = SimpleNamespace(reqs=reqs, spec_info=_spec(torch, bs), seq_lens_cpu=seq, forward_mode=_Mode.DECODE)
    result = SimpleNamespace(num_correct_drafts_per_req_cpu=[0] * bs)
    alloc = SimpleNamespace(available_size=lambda: 100_000)
    sched = SimpleNamespace(token_to_kv_pool_allocator=alloc, req_to_token_pool=alloc, waiting_queue=[],
                            running_batch=batch, chunked_req=None, new_token_ratio=0.4,
                            tree_cache=SimpleNamespace(evictable_size=lambda: 0, protected_size=lambda: 0))
    out = SimpleNamespace(can_run_graph=True, logits_output=SimpleNamespace(next_token_logits=torch.zeros(bs, 8),
                                                                             hidden_states=torch.zeros(bs, 64)))
    eager = SimpleNamespace(can_run_graph=False, logits_output=out.logits_output)
    target, draft = SimpleNamespace(is_draft_worker=False), SimpleNamespace(is_draft_worker=True)
    graphs = (EAGLEDraftCudaGraphRunner(), _TargetGraphRunner(), EAGLEDraftExtendCudaGraphRunner())
    replayed = (torch.zeros(bs, 1), torch.zeros(bs, 1), torch.zeros(bs, 64))
    draft_fb = _fb(torch, _Mode.DECODE, bs, bs, seq)
    verify_fb = _fb(torch, _Mode.TARGET_VERIFY, bs, 4 * bs, seq)
    extend_fb = _fb(torch, _Mode.DRAFT_EXTEND, bs, 4 * bs, seq)
    decode_fb = _fb(torch, _Mode.DECODE, bs, bs, seq)

    def graph_forward(runner: Any, fb: Any) -> Any:
        rec._around_replay_prepare(lambda r, f: None, graphs[1], fb)
        return out

    def speculative(worker: Any, b: Any) -> Any:
        set_path("spec")
        with phase("draft"):
            rec._around_draft_graph_replay(lambda r, f: replayed, graphs[0], draft_fb)
        with phase("verify"):
            rec._around_model_runner_forward(graph_forward, target, verify_fb)
        with phase("forward_draft_extend_after_decode"):
            rec._around_draft_graph_replay(lambda r, f: replayed, graphs[2], extend_fb)
        return result

    def fallback(worker: Any, b: Any) -> Any:
        set_path("fallback")
        with phase("fallback_target_decode"):
            rec._around_model_runner_forward(lambda r, f: eager, target, decode_fb)
        with phase("forward_draft_extend_after_decode"):
            rec._around_model_runner_forward(lambda r, f: eager, draft, extend_fb)
        return result

    inner = speculative if shape == "c4" else fallback

    def step() -> None:
        rec.RECORDER.around_fbg(inner, None, batch)
        rec._after_process_batch_result(None, sched, batch)

    return step


def step_us(shape: str, mode: str, steps: int = 2000, out_dir: str | None = None) -> float:
    """Microseconds per simulated step of ``shape`` with the recorder ``off`` or in ``deferred``
    mode (the collector off while timing; the records kept are dropped after)."""
    from specstate.integration import sglang_recorder as rec

    r = rec.RECORDER
    step = _step(shape)
    # off: no output file (whatever the mode, every hook then returns at its first check)
    r.mode = "deferred" if mode == "off" else mode
    r.out_path = None if mode == "off" else os.path.join(out_dir or tempfile.gettempdir(), "specstate-bench-rec.jsonl")
    r._header_written_for = r.out_path  # no header line: only the per-step work is timed
    enabled = gc.isenabled()
    gc.disable()
    try:
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        return (time.perf_counter() - t0) / steps * 1e6
    finally:
        r._buf.clear()
        r.out_path = r._header_written_for = None
        if enabled:
            gc.enable()


def measure(repeats: int = 15, steps: int = 2000, shapes: tuple[str, ...] = tuple(SHAPES)) -> dict[str, Any]:
    """Per shape of ``shapes``: off and deferred microseconds per step (alternating, ``repeats``
    each, the order flipping every round) and the recorder's added microseconds per pair."""
    res: dict[str, Any] = {}
    for shape in shapes:
        step_us(shape, "off", 200)
        step_us(shape, "deferred", 200)  # warm-up
        got: dict[str, list[float]] = {"off": [], "deferred": []}
        for i in range(repeats):
            for mode in (("off", "deferred") if i % 2 == 0 else ("deferred", "off")):
                got[mode].append(step_us(shape, mode, steps))
        added = [d - o for d, o in zip(got["deferred"], got["off"])]
        res[shape] = {m: _stats(v) for m, v in got.items()}
        res[shape]["added"] = _stats(added)
    return res


def _stats(xs: list[float]) -> dict[str, float]:
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs)}


if __name__ == "__main__":  # ``python -m benchmarks.recorder``: the figures of this checkout
    for shape, d in measure().items():
        print(f"{shape}: off {d['off']['median']:.2f} us/step, deferred {d['deferred']['median']:.2f}, "
              f"added {d['added']['median']:.2f} (min {d['added']['min']:.2f}, max {d['added']['max']:.2f})")
