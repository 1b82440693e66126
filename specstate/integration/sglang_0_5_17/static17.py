"""The GPU plan of static speculation on sglang 0.5.17's ``EAGLEWorkerV2`` and the seed's switch
written against it (``switch_patch.py``; the model's ``upstream-static``, ``v2-static-switch-naive``
and ``v2-static-switch``, ``specstate/model/sglang_0_5_17/static.py``).

``python -m specstate.integration.sglang_0_5_17.static17 DIR [--short]`` writes ``DIR/plan-static.txt``
(``NAME|driver arguments[|VAR=VALUE ...]``, run by ``V17_PLAN=static17 bash
specstate/integration/gpu_run_v17.sh OUT 300``): every engine is a static launch
(``speculative_adaptive=false``, no adaptive config; 3 steps, topk 1, 4 draft tokens, graphs up
to 16), one engine each, in this order:

- ``switch-naive``: the naive switch, threshold 5, the seed's sweep: the model predicts the
  crash at the first decode above 5 (``V17_EXPECT=crash``: the engine's crash is the result);
- ``switch``: the corrected switch, threshold 5, the seed's sweep and 3 random workloads crossing
  batch size 5: no crash, every recording conforms;
- ``static``: upstream as shipped, the seed's sweep and 2 random crossing workloads;
- ``probe-naive-eager``: the naive switch with graphs up to 4 only, so that its steps-0 draft
  extend runs eager (the model's ``IndexError``, read from the code, not run there); run last and
  only with time left (``PROBE_MIN_S``).

Every recording's header names its launch and patch, so the conformance (``conformance.py``)
picks the variant and threshold from it and judges a crash against the model's prediction
(``crash_verdict``). ``PREDICTIONS`` is the table of docs/gpu.md. ``--short`` (the CPU rehearsal,
``tests/test_gpu_run_v17.py``): a shorter sweep (``sweep-short.json``) and one random workload.
"""

from __future__ import annotations

import os
import sys

from specstate.integration.plan_files import write_json, write_plan

__all__ = ["THRESHOLD", "STATIC_ARGS", "PREDICTIONS", "plan", "write_all"]

THRESHOLD = 5
#: a static launch of the H200 engine (``engine.engine_kwargs`` less its adaptive flags)
STATIC_ARGS = "--engine-arg speculative_adaptive=false --engine-arg speculative_adaptive_config=null"
#: the short sweep of the CPU rehearsal: crosses the threshold both ways
SHORT_SWEEP = (1, 2, 5, 10, 30, 10, 5, 2, 1)

#: engine -> (model variant, what the model predicts on the GPU)
PREDICTIONS: dict[str, tuple[str, str]] = {
    "switch-naive": ("v2-static-switch-naive",
                     "the first decode of more than 5 requests (the sweep's wave of 10) crashes in "
                     "EAGLEDraftExtendCudaGraphRunner.execute: RuntimeError 'The size of tensor a (bs) must match "
                     "the size of tensor b (4*bs)' (positions: bs*(steps+1) against the verify's bs tokens); "
                     "the conformance judges the crash as-predicted when class and sizes agree at that iteration"),
    "switch": ("v2-static-switch", "no crash; steps 0 (path trivial, eager verify and draft extend) above 5 requests, "
               "3 steps at or below; every recording conforms, crossing the threshold both ways"),
    "static": ("upstream-static", "no crash; 3 steps on every decode (path spec), every recording conforms"),
    "probe-naive-eager": ("v2-static-switch-naive",
                          "graphs up to 4: above 5 requests the draft extend runs eager; the model flags "
                          "IndexError at next_token_logits[select_index] (read, not run: the draft forward may "
                          "fail first, or a CUDA index assert may be raised as a RuntimeError: the verdict says "
                          "'differs' then)"),
}


def _short_sweep(folder: str) -> str:
    from specstate.integration.workloads import seed_sweep

    return write_json(folder, "sweep-short.json", seed_sweep(SHORT_SWEEP, max_new_tokens=16, name="sweep-short").to_json())


def plan(folder: str, *, short: bool = False) -> list[str]:
    """One line per engine (``--engine sglang-0.5.17 --patch none`` and ``--out`` are added by
    ``gpu_run_v17.sh``; a later ``--patch`` wins)."""
    sweep = f"--scenario {os.path.join(folder, 'sweep-short.json')}" if short else "--scenario seed-sweep"
    rand = "--random 1" if short else "--random 3"
    switch = f"--threshold {THRESHOLD} {STATIC_ARGS}"
    rand_static = "--random 1" if short else "--random 2"
    return [  # the patches first: the cold start (about 82-114 s) goes to the engine that crashes soonest
        f"switch-naive|--agree {sweep} --patch v2-switch-naive {switch}|V17_EXPECT=crash",
        f"switch|--agree {sweep} {rand} --random-seed 1 --patch v2-switch {switch}|",
        f"static|--agree {sweep} {rand_static} {STATIC_ARGS}|",
        f"probe-naive-eager|--agree {sweep} --patch v2-switch-naive {switch} "
        "--engine-arg cuda_graph_max_bs_decode=4|V17_EXPECT=crash",
    ]


def write_all(folder: str, *, short: bool = False) -> list[str]:
    """``plan-static.txt`` (and the short sweep)."""
    os.makedirs(folder, exist_ok=True)
    out = [_short_sweep(folder)] if short else []
    return out + [write_plan(folder, "plan-static.txt", plan(folder, short=short))]


if __name__ == "__main__":
    print("\n".join(write_all(sys.argv[1], short="--short" in sys.argv[2:])))
