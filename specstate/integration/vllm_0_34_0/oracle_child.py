"""The vLLM 0.34.0 oracle's child process: vLLM's real ``Scheduler`` / ``AsyncScheduler`` driven by a
fake runner (``specstate/integration/vllm_0_34_0/oracle.py`` starts it; it reads one JSON job on stdin and
writes one JSON line of observations per engine step on stdout).

Run with the unpacked wheel and its pure-Python dependencies on ``PYTHONPATH`` and
``VLLM_TARGET_DEVICE=cpu``; ``vllm.triton_utils.HAS_TRITON`` is set to ``True`` before the scheduler
is imported (the scheduler runs no kernel). The engine loop mirrored is
``v1/engine/core.py::EngineCore.step`` + ``EngineCore.post_step`` (sync) and
``v1/engine/core.py::EngineCore.step_with_batch_queue`` with a queue of two (async).
"""

from __future__ import annotations

import json
import sys
from typing import Any

TOKEN = 7  #: every sampled and drafted token (never the EOS: the config has none set on requests)


_CONFIG: dict[str, Any] = {}


def _scheduler(job: dict[str, Any]) -> Any:  # noqa: ANN401
    """A fresh scheduler for one workload (the engine config is built once: its model inspection is
    the slow part)."""
    import vllm.triton_utils

    vllm.triton_utils.HAS_TRITON = True
    import torch
    from vllm.engine.arg_utils import EngineArgs
    from vllm.v1.core.sched.async_scheduler import AsyncScheduler
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec, KVCacheTensor
    from vllm.v1.structured_output import StructuredOutputManager

    c = job["config"]
    spec: dict[str, Any] = {"method": c["method"], "model": job["draft"], "num_speculative_tokens": c["num_speculative_tokens"]}
    if c["schedule"] is not None:
        spec["num_speculative_tokens_per_batch_size"] = c["schedule"]
    ea = EngineArgs(model=job["model"], skip_tokenizer_init=True, max_num_seqs=c["max_num_seqs"],
                    max_num_batched_tokens=c["max_num_batched_tokens"], max_model_len=c["max_model_len"],
                    block_size=c["block_size"], enable_prefix_caching=False, async_scheduling=c["async_scheduling"],
                    long_prefill_token_threshold=c["long_prefill_token_threshold"],
                    enable_chunked_prefill=c["enable_chunked_prefill"],
                    speculative_config=spec if c["num_speculative_tokens"] > 0 else None)
    if "vc" not in _CONFIG:
        _CONFIG["vc"] = ea.create_engine_config()
    vc = _CONFIG["vc"]
    vc.cache_config.num_gpu_blocks = c["num_gpu_blocks"]
    layer_spec = FullAttentionSpec(block_size=c["block_size"], num_kv_heads=1, head_size=8, dtype=torch.float32)
    kv = KVCacheConfig(num_blocks=c["num_gpu_blocks"],
                       kv_cache_tensors=[KVCacheTensor(size=1, layers=["l0"], layer_stride=1, block_stride=1)],
                       kv_cache_groups=[KVCacheGroupSpec(["l0"], layer_spec)])
    cls = AsyncScheduler if c["async_scheduling"] else Scheduler
    return cls(vllm_config=vc, kv_cache_config=kv, structured_output_manager=StructuredOutputManager(vc),
               block_size=c["block_size"])


def _observe(s: Any, out: Any, samples: list[str], n_reqs: int) -> dict[str, Any]:  # noqa: ANN401
    reqs: list[list[Any] | None] = []
    for i in range(n_reqs):
        r = s.requests.get(str(i))
        if r is None or r.is_finished():
            reqs.append(None)
            continue
        blocks = s.kv_cache_manager.get_blocks(str(i)).get_block_ids()[0]
        reqs.append([r.num_computed_tokens, r.num_output_tokens, r.num_output_placeholders, len(r.spec_token_ids),
                     len(blocks), "R" if r in s.running else "W"])
    rec = None if out is None else {
        "scheduled": {k: v for k, v in out.num_scheduled_tokens.items()},
        "spec": {k: len(v) for k, v in out.scheduled_spec_decode_tokens.items()},
        "k": out.num_spec_tokens_to_schedule, "samples": samples, "skip_drafts": out.skip_drafts}
    return {"rec": rec, "reqs": reqs, "free": s.kv_cache_manager.block_pool.get_num_free_blocks()}


def _run(s: Any, workload: list[dict[str, Any]], async_: bool) -> list[dict[str, Any]]:  # noqa: ANN401
    from vllm.sampling_params import SamplingParams
    from vllm.v1.outputs import DraftTokenIds, ModelRunnerOutput
    from vllm.v1.request import Request

    n = 0
    obs = []
    queue: list[tuple[Any, list[str], dict[str, int]]] = []

    def output(out: Any, samples: list[str], accept: dict[str, int]) -> Any:  # noqa: ANN401
        ids = list(out.num_scheduled_tokens)
        sampled = [[TOKEN] * (1 + min(accept[r], len(out.scheduled_spec_decode_tokens.get(r, ()))))
                   if r in samples else [] for r in ids]
        return ModelRunnerOutput(req_ids=ids, sampled_token_ids=sampled)

    for action in workload:
        for prompt, max_tokens in action["arrive"]:
            s.add_request(Request(str(n), [11] * prompt, SamplingParams(max_tokens=max_tokens), None))
            n += 1
        acc = action["accept"]
        accept = {str(i): acc[i % len(acc)] for i in range(n)}
        out = None
        samples: list[str] = []
        if not async_:
            if s.has_requests():
                out = s.schedule()
                samples = [r for r in out.num_scheduled_tokens if not s.requests[r].is_prefill_chunk]
                s.update_from_output(out, output(out, samples, accept))
                if out.total_num_scheduled_tokens > 0 and not out.skip_drafts:
                    ids = list(out.num_scheduled_tokens)
                    s.update_draft_token_ids(DraftTokenIds(ids, [[TOKEN] * out.num_spec_tokens_to_schedule
                                                                 for _ in ids]))
            obs.append(_observe(s, out, samples, n))
            continue
        executed = False
        if s.has_requests():
            out = s.schedule()
            samples = [r for r in out.num_scheduled_tokens if not s.requests[r].is_prefill_chunk]
            executed = out.total_num_scheduled_tokens > 0
            queue.insert(0, (out, samples, accept))
        if not (out is not None and len(queue) < 2 and (executed or s.has_requests())) and queue:
            old, old_samples, old_accept = queue.pop()
            s.update_from_output(old, output(old, old_samples, accept))
        obs.append(_observe(s, out, samples, n))
    return obs


def main() -> None:
    import os

    job = json.loads(sys.stdin.read())
    sys.dont_write_bytecode = True  # nothing of Python's own in the cached trees, checked or not (_bytecode.install)
    if job.get("checked"):  # the checked trees: loaded from source or signed bytecode, never a __pycache__
        from specstate import _bytecode

        for root, manifest in job["checked"]:
            _bytecode.install(root, {k: (v[0], v[1]) for k, v in manifest.items()})
    result = os.fdopen(os.dup(1), "w")  # vLLM logs on stdout: the answers go to the saved descriptor
    os.dup2(2, 1)
    for workload in job["workloads"]:
        s = _scheduler(job)
        try:
            obs = _run(s, workload, job["config"]["async_scheduling"])
            result.write(json.dumps({"ok": True, "steps": obs}) + "\n")
        except Exception as e:  # noqa: BLE001 - reported to the parent, which compares it
            result.write(json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}"}) + "\n")
        result.flush()


if __name__ == "__main__":
    main()
