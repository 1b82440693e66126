"""sglang 0.5.17's launch flags as the model reads them (``server_args``: ``FLAGS``, ``RULES``;
the row shape and the rows every release shares: ``specstate/model/launch_flags.py``)."""

from __future__ import annotations

from specstate.model.launch_flags import (COMMON, DEEPSEEK, DECODE_OFF, GPU_ROWS, SA, DeploymentRules, ModelledFlag,
                                          ReleaseRules)

__all__ = ["FLAGS", "RULES", "DEPLOYMENT"]

#: per-phase graph settings; ``--cuda-graph-max-bs`` / ``--cuda-graph-bs`` are
#: ``DeprecatedAliasStoreAction`` aliases of the decode ones (``add_cli_args``)
FLAGS: tuple[ModelledFlag, ...] = COMMON + (
    ModelledFlag(("--cuda-graph-max-bs-decode", "--cuda-graph-max-bs"), "cuda_graph_max_bs_decode", "int", None,
                 f"{SA}.cuda_graph_max_bs_decode"),
    ModelledFlag(("--cuda-graph-bs-decode", "--cuda-graph-bs"), "cuda_graph_bs_decode", "int+", None,
                 f"{SA}.cuda_graph_bs_decode"),
)

RULES = ReleaseRules("0.5.17", per_phase_graphs=True, adaptive_v2=True, decode_graph_off=DECODE_OFF,
                     adaptive_reader="specstate.model.sglang_0_5_17.adaptive",
                     dp_adaptive_unsupported="enable_dp_attention=True is not supported (adaptive tier decisions are "
                                             "not synchronized across DP ranks)",
                     spec_v2_env="it only warns it was removed (arg_groups/speculative_hook.py)")

#: 0.5.17 on: the MLA page constraints grew (``_mla_backend_page_constraints``: ``hpc_ops``, ``cutedsl_mla``,
#: ``trtllm_mha`` at 128 too)
SNAPPED_PAGES: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("trtllm_mla", (32, 64)), ("tokenspeed_mla", (32, 64)), ("trtllm_mha", (16, 32, 64, 128)), ("cutedsl_mla", (32, 64)))
DEEPSEEK_0_5_17 = DEEPSEEK + ("LongcatFlashForCausalLM", "LongcatFlashForCausalLMNextN")

DEPLOYMENT = DeploymentRules(
    GPU_ROWS, "ServerArgs._handle_gpu_memory_settings of 0.5.17", frozenset(DEEPSEEK_0_5_17),
    "_deepseek_family_overrides of 0.5.17's arg_groups/overrides.py", "dsa", ("flashinfer", "fa3", "triton"),
    fixed_pages=(("flashmla", 64), ("cutlass_mla", 128), ("hpc_ops", 64)), snapped_pages=SNAPPED_PAGES)
