"""sglang 0.5.12's launch flags as the model reads them (``server_args``: ``FLAGS``, ``RULES``;
the row shape and the rows every release shares: ``specstate/model/launch_flags.py``)."""

from __future__ import annotations

from specstate.model.launch_flags import COMMON, DEEPSEEK, GPU_ROWS, SA, DeploymentRules, ModelledFlag, ReleaseRules

__all__ = ["FLAGS", "RULES", "DEPLOYMENT"]

#: ``cuda_graph_max_bs`` / ``cuda_graph_bs`` (one graph runner setting for all phases)
FLAGS: tuple[ModelledFlag, ...] = COMMON + (
    ModelledFlag(("--cuda-graph-max-bs",), "cuda_graph_max_bs", "int", None, f"{SA}.cuda_graph_max_bs"),
    ModelledFlag(("--cuda-graph-bs",), "cuda_graph_bs", "int+", None, f"{SA}.cuda_graph_bs"),
)

RULES = ReleaseRules("0.5.12", per_phase_graphs=False, adaptive_v2=False)

DEPLOYMENT = DeploymentRules(
    GPU_ROWS, "server_args.py::ServerArgs._handle_gpu_memory_settings", frozenset(DEEPSEEK),
    "server_args.py::ServerArgs._handle_model_specific_adjustments", "nsa", ("flashinfer", "fa3"),
    fixed_pages=(("flashmla", 64), ("cutlass_mla", 128)),
    snapped_pages=(("trtllm_mla", (32, 64)), ("tokenspeed_mla", (32, 64)), ("trtllm_mha", (16, 32, 64))))
