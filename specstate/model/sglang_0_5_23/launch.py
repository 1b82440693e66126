"""sglang 0.5.23's launch flags as the model reads them (``server_args``: ``FLAGS``, ``RULES``;
the row shape and the rows every release shares: ``specstate/model/launch_flags.py``)."""

from __future__ import annotations

from specstate.model.launch_flags import COMMON, DECODE_OFF, GPU_ROWS, DeploymentRules, ModelledFlag, ReleaseRules
from specstate.model.sglang_0_5_17.launch import DEEPSEEK_0_5_17, SNAPPED_PAGES

__all__ = ["FLAGS", "RULES", "DEPLOYMENT"]


def _ns(module: str, cls: str, name: str) -> str:
    """A 0.5.23 field's citation: ``arg_groups/fields/<module>.py::<Namespace>.<field>`` (0.5.23
    declares ``ServerArgs``' fields in namespace classes, merged by ``_INPUT_NAMESPACES``)."""
    return f"arg_groups/fields/{module}.py::{cls}.{name}"


_WHERE = {  # field -> (module, namespace class), as 0.5.23 declares them
    "speculative_algorithm": ("spec", "Spec"), "speculative_num_steps": ("spec", "Spec"),
    "speculative_eagle_topk": ("spec", "Spec"), "speculative_num_draft_tokens": ("spec", "Spec"),
    "speculative_adaptive": ("spec", "Spec"), "speculative_adaptive_config": ("spec", "Spec"),
    "max_running_requests": ("schedule", "Schedule"), "max_total_tokens": ("schedule", "Schedule"),
    "chunked_prefill_size": ("schedule", "Schedule"), "max_prefill_tokens": ("schedule", "Schedule"),
    "schedule_conservativeness": ("schedule", "Schedule"), "page_size": ("schedule", "Schedule"),
    "enable_mixed_chunk": ("schedule", "Schedule"), "disable_overlap_schedule": ("schedule", "Schedule"),
    "context_length": ("model", "Model"), "disable_radix_cache": ("memory", "Memory"),
}
#: 0.5.17's rows, each re-read in 0.5.23's namespace classes (same names, types, defaults); the
#: ``--cuda-graph-max-bs`` / ``--cuda-graph-bs`` aliases are gone (``add_cli_args`` no longer declares
#: them: argparse then reads them as ambiguous abbreviations of the decode and prefill flags)
FLAGS: tuple[ModelledFlag, ...] = tuple(
    ModelledFlag(m.names, m.field, m.type, m.default, _ns(*_WHERE[m.field], m.field), m.choices) for m in COMMON) + (
    ModelledFlag(("--cuda-graph-max-bs-decode",), "cuda_graph_max_bs_decode", "int", None,
                 _ns("exec_", "ExecGraph", "cuda_graph_max_bs_decode")),
    ModelledFlag(("--cuda-graph-bs-decode",), "cuda_graph_bs_decode", "int+", None,
                 _ns("exec_", "ExecGraph", "cuda_graph_bs_decode")),
)

RULES = ReleaseRules("0.5.23", per_phase_graphs=True, adaptive_v2=True, mixed_chunk_with_eagle=True,
                     decode_graph_off=DECODE_OFF, adaptive_reader="specstate.model.sglang_0_5_17.adaptive",
                     dp_adaptive_unsupported="attention DP is not supported (adaptive tier decisions are not "
                                             "synchronized across DP ranks)",
                     default_adaptive_config="specstate.model.sglang_0_5_23.family:DEFAULT_ADAPTIVE_CONFIG_0_5_23")

#: 0.5.23 has no ``cutlass_mla``; the 20-35 GB row grew to 4096 tokens and 48 / 160 graphs
DEPLOYMENT = DeploymentRules(
    (GPU_ROWS[0], (35 * 1024, 4096, (48, 160)), *GPU_ROWS[2:]),
    "handle_gpu_memory_settings of 0.5.23's arg_groups/memory_hook.py",
    frozenset(DEEPSEEK_0_5_17 + ("Glm5NextForConditionalGeneration", "HYV4ForCausalLM", "HYV4ForCausalLMNextN",
                                 "Dots3NoteForCausalLM")),
    "_deepseek_family_overrides of 0.5.23's arg_groups/model_overrides/deepseek_v2.py", "dsa",
    ("flashinfer", "fa3", "triton"), fixed_pages=(("flashmla", 64), ("hpc_ops", 64)), snapped_pages=SNAPPED_PAGES,
    dsa_index_kpool=True)
