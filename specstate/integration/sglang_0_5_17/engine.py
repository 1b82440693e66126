"""How the driver runs sglang 0.5.17: the engine arguments, the environment, the workloads.

The arguments and environment are the ones seen working on the H200
(``../shared/gpu/sglang-0.5.17/README.md``): EAGLE-3 with 3 steps, topk 1, 4 draft tokens, the
overlap scheduler (``disable_overlap_schedule=False``: the v2 worker), ``--speculative-adaptive``
with ``sglang_assets/adaptive_config_h200.json`` (3 steps up to batch size 5, steps 0 from 6),
triton attention, ``cuda_graph_max_bs_decode=16``, prefill graphs off, dummy weights;
``HF_HUB_OFFLINE=1`` and ``SGLANG_ENABLE_JIT_DEEPGEMM=0``.

Workloads: the seed's sweep, random workloads crossing batch size 5 both ways, and workloads
from the seeded generator under the H200 config of the v2 family
(``specstate.fuzz.generate.generate_case(family="sglang-0.5.17")``).
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["ENGINE", "ADAPTIVE_CONFIG_PATH", "engine_kwargs", "engine_env", "fuzz_v2_workloads", "THRESHOLD"]

ENGINE = "sglang-0.5.17"
HERE = os.path.dirname(os.path.abspath(__file__))
ASSETS = os.path.join(os.path.dirname(HERE), "sglang_assets")
ADAPTIVE_CONFIG_PATH = os.path.join(ASSETS, "adaptive_config_h200.json")
THRESHOLD = 5  #: the largest batch size the H200 config drafts at


def engine_kwargs(overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``Engine(...)`` arguments of the H200 run (0.5.17 names)."""
    kw: dict[str, Any] = dict(
        model_path=os.path.join(ASSETS, "models", "target"), speculative_algorithm="EAGLE3",
        speculative_draft_model_path=os.path.join(ASSETS, "models", "draft"), speculative_num_steps=3,
        speculative_eagle_topk=1, speculative_num_draft_tokens=4, speculative_adaptive=True,
        speculative_adaptive_config=ADAPTIVE_CONFIG_PATH, disable_overlap_schedule=False, attention_backend="triton",
        sampling_backend="pytorch", cuda_graph_max_bs_decode=16, disable_prefill_cuda_graph=True,
        mem_fraction_static=0.1, load_format="dummy", skip_tokenizer_init=True, random_seed=0, log_level="info")
    kw.update(overrides or {})
    return kw


def engine_env() -> dict[str, str]:
    """Environment of the engine's processes (the plugin reads ``SPECSTATE_ENGINE``)."""
    return {"SPECSTATE_ENGINE": ENGINE, "HF_HUB_OFFLINE": "1", "SGLANG_ENABLE_JIT_DEEPGEMM": "0"}


def fuzz_v2_workloads(n: int, seed0: int = 0, *, length: int = 300) -> list[Any]:
    """``n`` workloads from the seeded generator's v2 cases under the H200 config."""
    from specstate.fuzz.generate import generate_case
    from specstate.integration.fuzz_workloads import workload_from_actions
    from specstate.model.sglang_0_5_17.variants import H200_CONFIG

    out = []
    for seed in range(seed0, seed0 + n):
        _, actions = generate_case(seed, config=H200_CONFIG, length=length, family=ENGINE)
        out.append(workload_from_actions(f"g{seed:03d}", actions, seed=seed))
    return out
