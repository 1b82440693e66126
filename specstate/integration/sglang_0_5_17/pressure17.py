"""GPU workloads and engine configs that drive sglang 0.5.17 through every abort path, retraction
under overlap and the adaptive switch both ways, plus engine-start probes (configs upstream starts
or refuses at start).

``python -m specstate.integration.sglang_0_5_17.pressure17 DIR`` writes into ``DIR``:

- ``*.json`` workloads (``docs/gpu.md``'s workload JSON): ``chunk-abort-*`` (prompts of many
  64-token chunks, aborted a few ms after sending, beside short requests), ``retract-*`` (bursts
  that outgrow a 2,048-slot pool while decoding: ``retract_decode`` under overlap, late joiners),
  ``oom-*`` (one request that cannot fit its decode reservation even alone: the out-of-memory
  abort), ``tiny`` (one short request: what a start probe sends), ``solo-0`` / ``duo-0`` (long
  decodes of one and two requests);
- ``adaptive-*.json`` adaptive configs, ``plan.txt`` and ``plan-flip.txt``: one line per engine,
  ``NAME|driver arguments`` (``gpu_run_v17.sh`` with ``V17_PLAN=pressure17`` or ``pressure17-flip``).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from specstate.integration.plan_files import write_json, write_plan

__all__ = ["workloads", "adaptive_configs", "plan", "write_all"]


def _req(rid: str, prompt: int, new: int, *, abort: float | None = None, delay: float = 0.0) -> dict[str, Any]:
    return {"rid": rid, "prompt_len": prompt, "max_new_tokens": new, "abort_after_s": abort, "delay_s": delay,
            "ignore_eos": True, "temperature": 0.0}


def _chunk_abort(i: int, abort_s: float) -> dict[str, Any]:
    """A 900-token prompt (15 chunks of 64) aborted ``abort_s`` after sending, beside three short
    requests; then a second long prompt left to finish."""
    p = f"ca{i}"
    return {"name": f"chunk-abort-{i}", "waves": [
        [_req(f"{p}long0", 900, 8, abort=abort_s), _req(f"{p}shrt1", 40, 24), _req(f"{p}shrt2", 30, 24),
         _req(f"{p}shrt3", 20, 16, delay=0.01)],
        [_req(f"{p}long4", 700, 8, abort=abort_s * 2), _req(f"{p}long5", 500, 6)]]}


def _retract(i: int, n: int, new: int) -> dict[str, Any]:
    """``n`` requests of 60-90 tokens with ``new`` outputs each, a third of them late: admitted on
    ``new_token_ratio`` 0.7, they outgrow the pool (2,048) while decoding."""
    p = f"rt{i}"
    reqs = [_req(f"{p}r{j:03d}", 60 + (j * 7) % 31, new, delay=0.05 if j % 3 == 2 else 0.0) for j in range(n)]
    return {"name": f"retract-{i}", "waves": [reqs, [_req(f"{p}tail", 16, 12)]]}


def _oom(i: int, prompt: int, new: int) -> dict[str, Any]:
    return {"name": f"oom-{i}", "waves": [[_req(f"om{i}solo", prompt, new)]]}


def workloads(pool: int) -> list[dict[str, Any]]:
    """The recorded workloads for a pool of ``pool`` slots."""
    scale = pool / 2048
    return ([_chunk_abort(i, s) for i, s in enumerate((0.005, 0.015, 0.03, 0.06))]
            + [_retract(0, int(16 * scale), 150), _retract(1, int(24 * scale), 100)]
            + [_oom(0, int(pool * 0.5), pool)])


def adaptive_configs() -> dict[str, dict[str, Any]]:
    """``b``: the second recorded config (2 steps up to batch size 3, steps 0 from 4); the start
    probes: ``above`` (a candidate above the startup steps), ``missing`` (startup steps not a
    candidate), ``nokey`` (no integer BS key), ``low`` (candidates 1 and 3, steps 0 from 6)."""
    return {"b": {"1": {"candidate_steps": [2]}, "4": {"candidate_steps": [0]}},
            "above": {"1": {"candidate_steps": [2, 3]}, "4": {"candidate_steps": [0]}},
            "above5": {"1": {"candidate_steps": [3, 5]}},
            "missing": {"1": {"candidate_steps": [1, 2]}},
            "nokey": {"default": {"candidate_steps": [3]}},
            "low": {"1": {"candidate_steps": [1, 3]}, "6": {"candidate_steps": [0]}},
            "flip": {"1": {"candidate_steps": [0, 3], "warmup_batches": 0, "update_interval": 1, "ema_alpha": 1.0},
                     "6": {"candidate_steps": [0]}}}


def plan_flip(folder: str) -> list[str]:
    """``plan-flip.txt``: one engine whose slot 1 switches between 3 steps and 0 on its own EMA
    (alpha 1, a recompute after every batch): the EMA gate of ``AdaptiveStepSlot.update`` meets
    results launched under the other step count (``invariants/_provenance.py``)."""
    names = ["solo-0", "duo-0", "chunk-abort-2", "retract-0"]
    wl = " ".join(f"--scenario {os.path.join(folder, n + '.json')}" for n in names)
    return [f"flip|--agree {wl} --random 3 --engine-arg max_total_tokens=2048 --engine-arg chunked_prefill_size=64 "
            f"--engine-arg speculative_adaptive_config={os.path.join(folder, 'adaptive-flip.json')}"]


def plan(folder: str) -> list[str]:
    """One line per engine: ``NAME|driver arguments`` (``--engine sglang-0.5.17 --patch none`` and
    ``--out`` are added by ``gpu_run_v17.sh``)."""
    def cfg(name: str) -> str:
        return os.path.join(folder, f"adaptive-{name}.json")

    def wl(names: list[str]) -> str:
        return " ".join(f"--scenario {os.path.join(folder, n + '.json')}" for n in names)
    rec = ["chunk-abort-0", "chunk-abort-1", "chunk-abort-2", "chunk-abort-3", "retract-0", "retract-1", "oom-0"]
    tiny = wl(["tiny"])
    return [
        f"a|--agree {wl(rec)} --random 2 --engine-arg max_total_tokens=2048 --engine-arg chunked_prefill_size=64",
        f"b|--agree --threshold 3 {wl([r + '-4k' for r in rec])} --random 2 --engine-arg speculative_num_steps=2 "
        f"--engine-arg speculative_num_draft_tokens=3 --engine-arg speculative_adaptive_config={cfg('b')} "
        "--engine-arg max_total_tokens=4096 --engine-arg chunked_prefill_size=128",
        f"start-above|{tiny} --engine-arg speculative_num_steps=2 --engine-arg speculative_num_draft_tokens=3 "
        f"--engine-arg speculative_adaptive_config={cfg('above')}",
        f"start-missing|{tiny} --engine-arg speculative_adaptive_config={cfg('missing')}",
        f"start-above5|{tiny} --engine-arg cuda_graph_max_bs_decode=8 --engine-arg speculative_adaptive_config={cfg('above5')}",
        f"start-low|{tiny} --engine-arg cuda_graph_bs_decode=[1,2,4,8] --engine-arg cuda_graph_max_bs_decode=8 "
        f"--engine-arg speculative_adaptive_config={cfg('low')}",
        f"start-nokey|{tiny} --engine-arg speculative_adaptive_config={cfg('nokey')}",
    ]


def write_all(folder: str) -> list[str]:
    """Every workload, adaptive config and ``plan.txt`` into ``folder``; the paths written."""
    os.makedirs(folder, exist_ok=True)
    out = []
    items = {w["name"]: w for w in workloads(2048)}
    items.update({f"{w['name']}-4k": {**w, "name": f"{w['name']}-4k"} for w in workloads(4096)})
    items["tiny"] = {"name": "tiny", "waves": [[_req("tiny0", 8, 4)]]}
    items["solo-0"] = {"name": "solo-0", "waves": [[_req("so0solo", 64, 400)]]}
    items["duo-0"] = {"name": "duo-0", "waves": [[_req("du0a", 40, 300), _req("du0b", 90, 200, delay=0.2)]]}
    out += [write_json(folder, f"{name}.json", w) for name, w in items.items()]
    out += [write_json(folder, f"adaptive-{name}.json", c) for name, c in adaptive_configs().items()]
    out += [write_plan(folder, "plan.txt", plan(folder)), write_plan(folder, "plan-flip.txt", plan_flip(folder))]
    return out


if __name__ == "__main__":
    print("\n".join(write_all(sys.argv[1])))
