"""The vLLM 0.34.0 CPU oracle: vLLM's real ``v1/core/sched/scheduler.py::Scheduler`` (and
``v1/core/sched/async_scheduler.py::AsyncScheduler``), unmodified, with ``KVCacheManager`` and
``BlockPool``, driven by a fake runner in a child process (``oracle_child.py``), compared step
by step with the model (``specstate/model/vllm_0_34_0/``) on the same workloads.

What runs: ``vllm==0.34.0``'s wheel, unpacked (``pip download --no-deps vllm==0.34.0``: sha256
``WHEEL_SHA256``), its pure-Python dependencies in a separate folder (never the project's
environment), torch from the environment (2.13.0+cpu), ``VLLM_TARGET_DEVICE=cpu``, a one-file
tiny-llama ``config.json`` and an EAGLE3 draft ``config.json`` written at run time (no weights, no
tokenizer: ``skip_tokenizer_init=True``), and one monkeypatch: ``vllm.triton_utils.HAS_TRITON =
True`` (the scheduler runs no kernel). Where: ``$SPECSTATE_VLLM_PATH`` (the two folders,
``:``-separated), else fetched on first use and checked on every use by ``specstate/upstream.py``
(``vllm_tree``: the pinned wheel's ``vllm/``; ``vllm_deps``: the dependencies pinned by sha256 in
``specstate/pins/vllm-0.34.0-deps.txt``); docs/vllm.md, 'The CPU oracle'.

Compared after every engine step: the step's ``num_scheduled_tokens``, ``scheduled_spec_decode_tokens``
(their number per request), ``num_spec_tokens_to_schedule``, which requests sample, ``skip_drafts``;
every request's ``num_computed_tokens``, output tokens, ``num_output_placeholders``, drafts held,
blocks held, queue; the pool's free blocks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from specstate.errors import EnvironmentProblem
from specstate.model.vllm_0_34_0 import RELEASE
from specstate.model.vllm_0_34_0.config import VllmEngineConfig
from specstate.model.vllm_0_34_0.engine import VOps, start, step
from specstate.model.vllm_0_34_0.state import FINISHED, VAction
from specstate.upstream import VLLM_PINS

__all__ = ["WHEEL_SHA256", "oracle_paths", "available", "model_observations", "run_oracle", "Mismatch",
           "compare", "differential"]

WHEEL_SHA256 = VLLM_PINS[RELEASE][1]

_LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
          "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 2, "vocab_size": 1000,
          "max_position_embeddings": 65536, "rms_norm_eps": 1e-6, "torch_dtype": "float32", "bos_token_id": 1,
          "eos_token_id": 2}
_EAGLE3 = {**_LLAMA, "architectures": ["LlamaForCausalLMEagle3"], "num_hidden_layers": 1, "draft_vocab_size": 1000}


def oracle_paths() -> list[Path]:
    """The folders the child imports vLLM and its dependencies from: ``$SPECSTATE_VLLM_PATH`` (taken
    as it is, unchecked), else the pinned wheel's checked tree and the pinned dependencies' checked
    tree, fetched on first use (``upstream.vllm_tree``, ``upstream.vllm_deps``; raises
    ``UpstreamUnavailable``, ``UpstreamOffline`` where no registry answers)."""
    chosen = os.environ.get("SPECSTATE_VLLM_PATH")
    if chosen:
        return [Path(p) for p in chosen.split(":") if p]
    from specstate import upstream

    return [upstream.vllm_tree(RELEASE), upstream.vllm_deps(RELEASE)]


def _checked() -> list[tuple[str, dict[str, tuple[str, int]]]]:
    """The fetched trees and their manifests, for the child's bytecode hook (none for
    ``$SPECSTATE_VLLM_PATH``)."""
    if os.environ.get("SPECSTATE_VLLM_PATH"):
        return []
    from specstate import upstream

    deps = upstream.vllm_deps(RELEASE)
    return [(str(upstream.vllm_tree(RELEASE)), upstream.vllm_manifest(RELEASE)),
            (str(deps), upstream.vllm_deps_manifest(RELEASE, deps))]


def available() -> bool:
    """Whether the oracle can run (fetching vLLM and its dependencies on first use)."""
    from specstate.upstream import UpstreamUnavailable

    try:
        paths = oracle_paths()
    except UpstreamUnavailable:
        return False
    return bool(paths) and (paths[0] / "vllm" / "v1" / "core" / "sched" / "scheduler.py").is_file() and \
        all(p.is_dir() for p in paths)


def _obs_config(c: VllmEngineConfig) -> dict[str, Any]:
    d = asdict(c)
    d["schedule"] = None if c.schedule is None else [list(e) for e in c.schedule]
    return d


def model_observations(config: VllmEngineConfig, ops: VOps, workload: tuple[VAction, ...]) -> list[dict[str, Any]]:
    """The model's observations of ``workload``, in the child's format."""
    started = start(config, ops)
    state = started.state
    out = []
    for a in workload:
        before = state.step
        state = step(state, a, ops, started.config, started.plan)
        rec = None
        if state.step != before:
            r = state.records[-1]
            rec = {"scheduled": {str(k): v for k, v in r.scheduled}, "spec": {str(k): v for k, v in r.spec},
                   "k": r.k, "samples": [str(x) for x in r.samples], "skip_drafts": r.skip_drafts}
        reqs = [None if q.status == FINISHED else
                [q.num_computed_tokens, q.num_output_tokens, q.num_output_placeholders, q.num_spec_tokens, q.blocks,
                 "R" if q.rid in state.running else "W"] for q in state.reqs]
        out.append({"rec": rec, "reqs": reqs, "free": state.free_blocks})
    return out


def run_oracle(config: VllmEngineConfig, workloads: list[tuple[VAction, ...]], timeout_s: float = 1800) -> list[dict[str, Any]]:
    """vLLM's scheduler on each workload (one child process for all): one answer per workload."""
    paths = oracle_paths()  # UpstreamUnavailable (one line) where they cannot be fetched
    if not available():
        raise EnvironmentProblem(f"the vLLM oracle needs vllm==0.34.0 unpacked and its dependencies in "
                                 f"{', '.join(map(str, paths))} (docs/vllm.md, 'The CPU oracle')")
    with tempfile.TemporaryDirectory(prefix="specstate-vllm-") as tmp:
        model, draft = Path(tmp) / "llama", Path(tmp) / "eagle3"
        for d, cfg in ((model, _LLAMA), (draft, _EAGLE3)):
            d.mkdir()
            (d / "config.json").write_text(json.dumps(cfg))
        job = {"model": str(model), "draft": str(draft), "config": _obs_config(config), "checked": _checked(),
               "workloads": [[a.to_json() for a in w] for w in workloads]}
        root = Path(__file__).resolve().parents[3]
        env = {**os.environ, "PYTHONPATH": ":".join([str(root)] + [str(p) for p in paths]),
               "VLLM_TARGET_DEVICE": "cpu", "VLLM_LOGGING_LEVEL": "ERROR", "TOKENIZERS_PARALLELISM": "false"}
        proc = subprocess.run([sys.executable, "-m", f"{__package__}.oracle_child"], input=json.dumps(job),
                              capture_output=True, text=True, env=env, timeout=timeout_s, cwd=tmp)
    answers = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or len(answers) != len(workloads):
        tail = "\n".join(proc.stderr.splitlines()[-8:])
        raise EnvironmentProblem(f"the vLLM oracle child exited {proc.returncode} after {len(answers)} of "
                                 f"{len(workloads)} workloads:\n{tail}")
    return answers


def _norm(rec: dict[str, Any] | None) -> dict[str, Any] | None:
    """An empty scheduled step (sent only to flush finished ids) is compared by its empty batch alone."""
    if rec is None or not rec["scheduled"]:
        return None
    return rec


@dataclass(frozen=True)
class Mismatch:
    workload: int
    step: int
    field: str
    model: Any
    vllm: Any

    def describe(self) -> str:
        return f"workload {self.workload} step {self.step}: {self.field}: model {self.model}, vLLM {self.vllm}"


def compare(index: int, model: list[dict[str, Any]], real: dict[str, Any]) -> Mismatch | None:
    """The first step whose observations differ."""
    if not real.get("ok"):
        return Mismatch(index, 0, "error", None, real.get("error"))
    for i, (m, r) in enumerate(zip(model, real["steps"]), 1):
        if _norm(m["rec"]) != _norm(r["rec"]):
            return Mismatch(index, i, "scheduler output", _norm(m["rec"]), _norm(r["rec"]))
        for rid, (a, b) in enumerate(zip(m["reqs"], r["reqs"])):
            if a != b:
                return Mismatch(index, i, f"request {rid} [computed, output, placeholders, drafts, blocks, queue]",
                                a, b)
        if m["free"] != r["free"]:
            return Mismatch(index, i, "free blocks", m["free"], r["free"])
    return None


def differential(config: VllmEngineConfig, ops: VOps, workloads: list[tuple[VAction, ...]],
                 real: list[dict[str, Any]] | None = None) -> list[Mismatch]:
    """Every workload's first mismatch between the model (``ops``) and vLLM's scheduler (``real``:
    its answers from an earlier ``run_oracle`` on the same workloads, so one vLLM run judges several
    models, a mutant's included)."""
    real = run_oracle(config, workloads) if real is None else real
    out = []
    for i, (w, r) in enumerate(zip(workloads, real)):
        mm = compare(i, model_observations(config, ops, w), r)
        if mm is not None:
            out.append(mm)
    return out


def _no_lookahead(state: Any, config: VllmEngineConfig, req: Any, num_new: int, lookahead: int,  # noqa: ANN401
                  **kw: bool) -> int | None:
    """The mutant allocation: EAGLE's K lookahead slots forgotten."""
    from specstate.model.vllm_0_34_0.engine import allocate_slots

    return allocate_slots(state, config, req, num_new, 0, **kw)


def _mutants() -> dict[str, VOps]:
    """Model mutations the oracle must catch (``tests/test_vllm_oracle.py``): the allocation without
    EAGLE's lookahead slots, and K keyed on the drafting rows (the correction, not what 0.34.0 ships)."""
    from dataclasses import replace

    from specstate.model.vllm_0_34_0.engine import UPSTREAM_OPS, choose_k_decode_rows

    return {"no-lookahead": replace(UPSTREAM_OPS, allocate_slots=_no_lookahead),
            "k-decode-rows": replace(UPSTREAM_OPS, choose_k=choose_k_decode_rows)}


#: the configs the oracle fuzz runs: small engines whose limits the workloads reach (chunks, a
#: three-range DSD schedule, preemption with 20 blocks: under async, stale in-flight output), sync
#: and async
ORACLE_CONFIGS: dict[str, VllmEngineConfig] = {
    "sync-scarce-blocks": VllmEngineConfig(max_num_seqs=8, max_num_batched_tokens=48, max_model_len=256,
                                           num_gpu_blocks=20, num_speculative_tokens=3,
                                           schedule=((1, 2, 3), (3, 4, 1), (5, 4096, 0))),
    "async": VllmEngineConfig(max_num_seqs=8, max_num_batched_tokens=48, max_model_len=256, num_gpu_blocks=200,
                              num_speculative_tokens=3, schedule=((1, 2, 3), (3, 4, 1), (5, 4096, 0)),
                              async_scheduling=True),
    "async-scarce-blocks": VllmEngineConfig(max_num_seqs=8, max_num_batched_tokens=48, max_model_len=256,
                                            num_gpu_blocks=20, num_speculative_tokens=3,
                                            schedule=((1, 2, 3), (3, 4, 1), (5, 4096, 0)), async_scheduling=True),
}


def main(argv: list[str] | None = None) -> int:
    """``python -m specstate.integration.vllm_0_34_0.oracle [--workloads N] [--seed S] [--config NAME] [--mutant M]``:
    N random workloads (``integration/vllm_0_34_0/check.py::random_workload``) on the model and on vLLM's
    scheduler; prints the figures and the first mismatches. Exit 1 on a mismatch (0 for a mutant
    that is caught)."""
    import argparse
    import random
    import time

    from specstate.integration.vllm_0_34_0.check import random_workload
    from specstate.model.vllm_0_34_0.engine import UPSTREAM_OPS

    p = argparse.ArgumentParser(prog="python -m specstate.integration.vllm_0_34_0.oracle")
    p.add_argument("--workloads", type=int, default=200)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--config", choices=sorted(ORACLE_CONFIGS), default="sync-scarce-blocks")
    p.add_argument("--mutant", choices=sorted(_mutants()), default=None)
    args = p.parse_args(argv)
    config = ORACLE_CONFIGS[args.config]
    ops = UPSTREAM_OPS if args.mutant is None else _mutants()[args.mutant]
    rng = random.Random(args.seed)
    workloads = [random_workload(rng, config, args.steps) for _ in range(args.workloads)]
    t0 = time.monotonic()
    found = differential(config, ops, workloads)
    steps = sum(len(w) for w in workloads)
    print(f"vllm 0.34.0 oracle ({args.config}{', mutant ' + args.mutant if args.mutant else ''}): "
          f"{len(workloads)} workloads, {steps} engine steps, {len(found)} mismatching workloads, "
          f"{time.monotonic() - t0:.1f} s")
    for m in found[:3]:
        print(f"  {m.describe()}")
    return (0 if found else 1) if args.mutant else (1 if found else 0)


if __name__ == "__main__":
    raise SystemExit(main())
