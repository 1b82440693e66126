"""How the driver runs sglang 0.5.12: the engine arguments seen working on the H200 (EAGLE-3,
3 steps, topk 4, 16 draft tokens, the overlap scheduler off: the v1 ``EAGLEWorker``; triton
attention, ``cuda_graph_max_bs=16``, dummy weights)."""

from __future__ import annotations

import os
from typing import Any

__all__ = ["engine_kwargs", "engine_env"]

ASSETS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "sglang_assets")


def engine_kwargs(overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The sglang 0.5.12 Engine arguments that ran on the H200 (../shared/gpu/README.md)."""
    kw: dict[str, Any] = dict(
        model_path=os.path.join(ASSETS, "models", "target"),
        speculative_algorithm="EAGLE3",
        speculative_draft_model_path=os.path.join(ASSETS, "models", "draft"),
        speculative_num_steps=3,
        speculative_eagle_topk=4,
        speculative_num_draft_tokens=16,
        disable_overlap_schedule=True,
        attention_backend="triton",
        sampling_backend="pytorch",
        cuda_graph_max_bs=16,
        mem_fraction_static=0.3,
        load_format="dummy",
        skip_tokenizer_init=True,
        random_seed=0,
        log_level="info",
    )
    kw.update(overrides or {})
    return kw


def engine_env() -> dict[str, str]:
    """Nothing beyond the driver's own environment."""
    return {}
