"""sglang 0.5.17's launch flags as the model reads them (``server_args``: ``FLAGS``, ``RULES``;
the row shape and the rows every release shares: ``specstate/model/launch_flags.py``)."""

from __future__ import annotations

from specstate.model.launch_flags import COMMON, DECODE_OFF, SA, ModelledFlag, ReleaseRules

__all__ = ["FLAGS", "RULES"]

#: per-phase graph settings; ``--cuda-graph-max-bs`` / ``--cuda-graph-bs`` are
#: ``DeprecatedAliasStoreAction`` aliases of the decode ones (``add_cli_args``)
FLAGS: tuple[ModelledFlag, ...] = COMMON + (
    ModelledFlag(("--cuda-graph-max-bs-decode", "--cuda-graph-max-bs"), "cuda_graph_max_bs_decode", "int", None,
                 f"{SA}.cuda_graph_max_bs_decode"),
    ModelledFlag(("--cuda-graph-bs-decode", "--cuda-graph-bs"), "cuda_graph_bs_decode", "int+", None,
                 f"{SA}.cuda_graph_bs_decode"),
)

RULES = ReleaseRules("0.5.17", per_phase_graphs=True, adaptive_v2=True, decode_graph_off=DECODE_OFF)
