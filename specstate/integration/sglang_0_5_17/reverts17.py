"""Upstream's own reverted fixes (``debug_utils/pr_fix_toggle.py``, ``SGLANG_DEBUG_REVERT_PR``, sglang
PR #26802 / #27428): the six registered in 0.5.17 and 0.5.23, what each reverts, whether its
revert applies to each wheel, where the model stands, and the GPU plan that runs each.

``maybe_revert_pr_fix`` runs at ``Scheduler.__init__`` and reverse-applies the PR's YAML with
``debug_utils/source_patcher`` (``apply_edits``: every ``match`` must occur exactly once in the
target function's source, else ``PatchApplicationError``). Three of the six YAMLs no longer match
the code they target in the shipped wheels (the fixed code was refactored after the YAML was
written), so those engines refuse to start: ``check`` measures it with upstream's own
``source_editor.apply_edits`` on each wheel's source (``tests/test_reverts.py``), and the CPU oracle
confirms it on the real ``Scheduler.__init__``.

``python -m specstate.integration.sglang_0_5_17.reverts17 DIR`` writes the GPU plan into ``DIR``
(workloads, adaptive configs, ``plan-reverts.txt``: ``NAME|driver arguments|ENV=VALUE ...``, run by
``V17_PLAN=reverts17 bash specstate/integration/gpu_run_v17.sh OUT``); ``... --check RELEASE``
prints, as JSON, whether each revert applies to that release's pinned wheel (run in a process of
its own: it loads the wheel's ``source_patcher`` modules by path, under their own names).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from typing import Any

from specstate.integration.plan_files import write_json, write_plan

__all__ = ["Revert", "REVERTS", "check", "plan", "write_all"]


@dataclass(frozen=True)
class Revert:
    pr: int
    title: str
    target: str  #: the function the revert patches (``pr_fix_toggle.py``'s ``target``)
    applies: dict[str, bool]  #: release -> the YAML applies to that wheel (``check``; else start refused)
    model: str  #: where the model stands (docs/variants.md "Upstream's reverted fixes")
    predicts: str  #: what the model (or, outside it, the reading of upstream's code) predicts on the GPU


REVERTS: tuple[Revert, ...] = (
    Revert(25015, "draft positions", "speculative/eagle_worker_v2.py::EagleDraftWorker.draft_forward "
           "(+ eagle_draft_cuda_graph_runner.py::EAGLEDraftCudaGraphRunner.capture_one_shape)",
           {"0.5.17": True, "0.5.23": True},
           "outside: the values of positions (the model holds positions' rows, not their values)",
           "starts; every recording conforms with the model (scheduler state and shapes unchanged); the draft "
           "runs one position ahead; with real weights the accept lengths would drop (not predicted: the model "
           "takes accept lengths as input); with the agreeing weights, which zero attention, they do not "
           "(H100 run: equal to base's token for token)"),
    Revert(26329, "EAGLE prefill tail tokens", "speculative/eagle_utils.py::_eagle_prefill_tail_tokens",
           {"0.5.17": True, "0.5.23": True},
           "outside: a token value (the draft extend of a non-final chunk ends on the sampled token, not the "
           "next prompt token: one wrong draft-KV entry per chunk boundary, shared through the radix tree); "
           "the model holds how much draft KV is written (draft_kv_len), not what it was computed from",
           "starts; every recording conforms; with real weights chunk-prefilled prompts would accept fewer draft "
           "tokens (not predicted: a value); with the agreeing weights they do not (H100 run: equal to base's)"),
    Revert(27338, "multi-step draft kv_indices buffer without topk (FlashInfer)",
           "layers/attention/flashinfer_backend.py::FlashInferMultiStepDraftBackend.init_cuda_graph_state",
           {"0.5.17": False, "0.5.23": False},
           "start refused in both wheels: the YAML's match text is gone (0.5.17 sizes the buffer with "
           "spec_utils.py::draft_kv_indices_buffer_width); the buffer is the FlashInfer draft backend's "
           "(the model runs Triton's) and with topk 1 (the v2 family) the widths are equal",
           "the engine refuses to start: PatchApplicationError ('match text not found in source') from "
           "Scheduler.__init__ -> maybe_revert_pr_fix (confirmed on CPU by the oracle)"),
    Revert(27360, "FlashAttention backend CUDA-graph metadata",
           "layers/attention/flashattention_backend.py::FlashAttentionBackend._apply_cuda_graph_metadata",
           {"0.5.17": True, "0.5.23": True},
           "outside: the FA3 backend's draft-decode page table at page size > 1 with topk > 1 (the model: "
           "Triton's backend, page size 1, the v2 family topk 1)",
           "no model prediction; reading upstream: without the slice the num_steps-wide cache_loc meets the "
           "(decode_length + 1)-wide expand page table, so assert_buffer_fits fails at the first draft-decode "
           "replay with steps > 2 (or the scatter overflows the row)"),
    Revert(26972, "req_to_token headroom", "mem_cache/allocation_sizing.py::get_req_to_token_extra_context_len",
           {"0.5.17": False, "0.5.23": True},
           "0.5.17: start refused (the YAML matches an earlier form of the function); 0.5.23: the revert drops "
           "a headroom taken at page size > 1 (or UNO) only, so at page size 1 with EAGLE the row is the same "
           "(context_len + 4 + num_draft_tokens); the model holds that row "
           "(SpecConfig.req_to_token_row_width, kv-accounting), and it is outgrown at page size 1 too",
           "0.5.17: start refused (PatchApplicationError); 0.5.23: at page size 1 the same as without the revert; "
           "the page-1 overflow (the row-overflow engines) happens with or without it"),
    Revert(27460, "multi-step draft kv_indices buffer without topk (FlashInfer MLA)",
           "layers/attention/flashinfer_mla_backend.py::FlashInferMLAMultiStepDraftBackend.init_cuda_graph_state",
           {"0.5.17": False, "0.5.23": False},
           "start refused in both wheels (as #27338); an MLA model's backend: no MLA model is modelled",
           "the engine refuses to start: PatchApplicationError from Scheduler.__init__"),
)


# -- does each revert apply to a wheel (upstream's own source_editor) ------------------------------------

def _load(root: str) -> tuple[Any, Any]:
    """The wheel's ``source_patcher/types.py`` and ``source_editor.py``, run from their source under
    their own names (their package ``__init__``s, which import all of sglang, are empty modules
    here). Compiled here, not through a file loader, which would write Python's bytecode into the
    checked tree wherever ``PYTHONDONTWRITEBYTECODE`` is not set (the next check refuses the tree)."""
    import types

    for pkg in ("sglang", "sglang.srt", "sglang.srt.debug_utils", "sglang.srt.debug_utils.source_patcher"):
        sys.modules.setdefault(pkg, types.ModuleType(pkg))
    loaded = []
    for name in ("types", "source_editor"):
        full = f"sglang.srt.debug_utils.source_patcher.{name}"
        path = os.path.join(root, "sglang/srt/debug_utils/source_patcher", f"{name}.py")
        module = types.ModuleType(full)
        module.__file__ = path
        sys.modules[full] = module
        with open(path, encoding="utf-8") as f:
            exec(compile(f.read(), path, "exec"), module.__dict__)  # noqa: S102 - the checked wheel's own module
        loaded.append(module)
    return loaded[0], loaded[1]


def _function_source(root: str, target: str) -> str:
    """The source of ``target`` (``pkg.module.Class.method``) as ``inspect.getsource`` gives it,
    read with ``ast`` from the wheel's file (nothing imported)."""
    import ast

    parts = target.split(".")
    for i in range(len(parts), 0, -1):
        path = os.path.join(root, *parts[:i]) + ".py"
        if os.path.isfile(path):
            rest = parts[i:]
            break
    else:
        raise FileNotFoundError(target)
    text = open(path).read()
    body: list[Any] = ast.parse(text).body
    node: Any = None
    for name in rest:
        node = next(n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                    and n.name == name)
        body = node.body
    first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
    return "\n".join(text.splitlines()[first - 1:node.end_lineno]) + "\n"


def check(root: str) -> dict[int, tuple[bool, str]]:
    """For each PR ``pr_fix_toggle.py`` registers in the tree at ``root``: does its revert apply
    (``apply_edits`` on each target's source, as ``code_patcher.patch_function`` does), and the
    first ``PatchApplicationError`` line where it does not."""
    import ast

    import yaml

    types_mod, editor = _load(root)
    toggle = os.path.join(root, "sglang/srt/debug_utils/pr_fix_toggle.py")
    yamls = {}
    for node in ast.parse(open(toggle).read()).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            name = node.targets[0].id  # type: ignore[attr-defined]
            if name.startswith("_PR_REVERT_YAML_"):
                yamls[int(name.rsplit("_", 1)[1])] = node.value.value
    out: dict[int, tuple[bool, str]] = {}
    for pr, text in sorted(yamls.items()):
        config = types_mod.PatchConfig(**yaml.safe_load(text))
        out[pr] = (True, "")
        for spec in config.patches:
            try:
                editor.apply_edits(source=_function_source(root, spec.target), edits=spec.edits)
            except types_mod.PatchApplicationError as e:
                out[pr] = (False, f"{spec.target}: {str(e).splitlines()[0]}")
                break
    return out


# -- the GPU plan ---------------------------------------------------------------------------------------

def _req(rid: str, prompt: int, new: int | None, *, delay: float = 0.0) -> dict[str, Any]:
    return {"rid": rid, "prompt_len": prompt, "max_new_tokens": new, "abort_after_s": None, "delay_s": delay,
            "ignore_eos": True, "temperature": 0.0}


def workloads() -> dict[str, dict[str, Any]]:
    """``decode-*``: long decodes of one, two and four requests (the draft's positions: #25015);
    ``chunked-*``: prompts of many 64-token chunks, each then decoding (the prefill tail token at
    every chunk boundary: #26329); ``cap-*``: requests running to the context length's output cap
    (the req_to_token row at its end: #26972, the page-1 overflow); ``tiny``: a start probe."""
    return {
        "tiny": {"name": "tiny", "waves": [[_req("tiny0", 8, 4)]]},
        "decode-1": {"name": "decode-1", "waves": [[_req("dc1a", 64, 400)]]},
        "decode-4": {"name": "decode-4", "waves": [[_req(f"dc4{c}", 40 + 20 * i, 300) for i, c in enumerate("abcd")]]},
        "chunked-1": {"name": "chunked-1", "waves": [[_req("ch1a", 900, 200)]]},
        "chunked-2": {"name": "chunked-2", "waves": [[_req("ch2a", 700, 150), _req("ch2b", 500, 150, delay=0.05)]]},
        "cap-1": {"name": "cap-1", "waves": [[_req("cp1a", 40, None)]]},
        "cap-2": {"name": "cap-2", "waves": [[_req("cp2a", 40, None), _req("cp2b", 30, None)]]},
    }


#: the page-level and leak checks of upstream's scheduler (``oracle/_core.py::STRICT_CHECKS``)
CHECKS = "SGLANG_CHECK_KV_PAGE_INVARIANTS=1 SGLANG_ENABLE_STRICT_MEM_CHECK_DURING_BUSY=1"


def plan(folder: str) -> list[str]:
    """One line per engine: ``NAME|driver arguments|environment`` (``--engine sglang-0.5.17
    --patch none`` and ``--out`` are added by ``gpu_run_v17.sh``; a ``start-`` engine may be
    refused at start). Each revert runs the workloads that reach its path, beside a ``base`` engine
    with none, so that what the model does not predict (accept lengths) is compared with the same
    workloads unreverted."""
    def wl(names: list[str]) -> str:
        return " ".join(f"--scenario {os.path.join(folder, n + '.json')}" for n in names)
    pool = "--engine-arg max_total_tokens=8192 --engine-arg chunked_prefill_size=64"
    rows = "--engine-arg context_length=256 --engine-arg speculative_num_steps=9 " \
           "--engine-arg speculative_num_draft_tokens=10 " \
           f"--engine-arg speculative_adaptive_config={os.path.join(folder, 'adaptive-steps9.json')}"
    main = wl(["decode-1", "decode-4", "chunked-1", "chunked-2"])
    return [
        f"base|--agree {main} {pool}|{CHECKS}",
        f"revert-25015|--agree {wl(['decode-1', 'decode-4'])} {pool}|SGLANG_DEBUG_REVERT_PR=25015 {CHECKS}",
        f"revert-26329|--agree {wl(['chunked-1', 'chunked-2'])} {pool}|SGLANG_DEBUG_REVERT_PR=26329 {CHECKS}",
        f"start-revert-27338|{wl(['tiny'])}|SGLANG_DEBUG_REVERT_PR=27338",
        f"start-revert-27460|{wl(['tiny'])}|SGLANG_DEBUG_REVERT_PR=27460",
        f"start-revert-26972|{wl(['tiny'])}|SGLANG_DEBUG_REVERT_PR=26972",
        f"start-revert-27360|{wl(['tiny'])} --engine-arg attention_backend=fa3|SGLANG_DEBUG_REVERT_PR=27360",
        f"row-overflow|{wl(['cap-1'])} {rows}|{CHECKS}",
        f"row-overflow-unchecked|{wl(['cap-2'])} {rows}|",
    ]


def write_all(folder: str) -> list[str]:
    """The workloads, the adaptive config (9 steps for every batch size) and ``plan-reverts.txt``."""
    os.makedirs(folder, exist_ok=True)
    out = []
    out += [write_json(folder, f"{name}.json", w) for name, w in workloads().items()]
    out.append(write_json(folder, "adaptive-steps9.json", {"1": {"candidate_steps": [9]}}))
    out.append(write_plan(folder, "plan-reverts.txt", plan(folder)))
    return out


if __name__ == "__main__":
    if sys.argv[1] == "--check":
        from specstate.upstream import tree

        print(json.dumps({str(k): v for k, v in check(str(tree(sys.argv[2]))).items()}))
    else:
        print("\n".join(write_all(sys.argv[1])))
