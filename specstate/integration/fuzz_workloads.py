"""Fuzzer-generated workloads for the real worker.

A fuzz trace is a list of actions at the granularity of scheduler iterations; the real
engine is driven by wall-clock time. ``workload_from_actions`` maps one onto the other: the
k-th ``Step`` happens at ``k * step_s`` seconds (``step_s`` ~ one real decode iteration on
the H200, 3-5 ms), an ``Arrive`` becomes a request sent at the time of the steps before it
(``delay_s``), an ``Abort`` an ``abort_after_s`` at its time. Accept lengths and EOS are the
real worker's own (greedy, ``ignore_eos``); conformance takes them from the recording.

``python -m specstate.integration.fuzz_workloads OUT_DIR [N] [SEED0]`` writes N workloads
from ``specstate.fuzz.generate`` seeds SEED0.. as JSON files for the driver's ``--scenario``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from specstate.fuzz.generate import generate_case
from specstate.integration.workloads import Request, Workload, dump_workload
from specstate.model import Abort, Action, Arrive, Step

__all__ = ["workload_from_actions", "fuzz_workload"]


def workload_from_actions(name: str, actions: list[Action], *, step_s: float = 0.004, seed: int = 0) -> Workload:
    steps = 0
    arrivals: list[tuple[float, Arrive]] = []
    aborts: dict[int, float] = {}
    for a in actions:
        if isinstance(a, Step):
            steps += 1
        elif isinstance(a, Arrive):
            arrivals.append((steps * step_s, a))
        elif isinstance(a, Abort) and a.rid < len(arrivals):
            aborts.setdefault(a.rid, max(steps * step_s, arrivals[a.rid][0] + 0.005))
    reqs = tuple(
        Request(rid=f"{name}r{i:03d}", prompt_len=a.prompt_len, max_new_tokens=a.max_new_tokens,
                delay_s=round(t, 4), abort_after_s=round(aborts[i], 4) if i in aborts else None,
                prefix_of=f"{name}r{a.prefix_of:03d}" if a.prefix_of is not None else None,
                shared_len=a.shared_len if a.prefix_of is not None else 0)
        for i, (t, a) in enumerate(arrivals))
    return Workload(name=name, waves=(reqs,), seed=seed, meta={"generator": "specstate.fuzz.generate", "step_s": step_s})


def fuzz_workload(seed: int, *, length: int = 300) -> Workload:
    _, actions = generate_case(seed, length=length)
    return workload_from_actions(f"f{seed:03d}", actions, seed=seed)


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    n = int(argv[1]) if len(argv) > 1 else 20
    seed0 = int(argv[2]) if len(argv) > 2 else 0
    out.mkdir(parents=True, exist_ok=True)
    for seed in range(seed0, seed0 + n):
        w = fuzz_workload(seed)
        dump_workload(w, str(out / f"{w.name}.json"))
    print(f"wrote {n} fuzzer-generated workloads to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
