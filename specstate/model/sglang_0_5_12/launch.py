"""sglang 0.5.12's launch flags as the model reads them (``server_args``: ``FLAGS``, ``RULES``;
the row shape and the rows every release shares: ``specstate/model/launch_flags.py``)."""

from __future__ import annotations

from specstate.model.launch_flags import COMMON, SA, ModelledFlag, ReleaseRules

__all__ = ["FLAGS", "RULES"]

#: ``cuda_graph_max_bs`` / ``cuda_graph_bs`` (one graph runner setting for all phases)
FLAGS: tuple[ModelledFlag, ...] = COMMON + (
    ModelledFlag(("--cuda-graph-max-bs",), "cuda_graph_max_bs", "int", None, f"{SA}.cuda_graph_max_bs"),
    ModelledFlag(("--cuda-graph-bs",), "cuda_graph_bs", "int+", None, f"{SA}.cuda_graph_bs"),
)

RULES = ReleaseRules("0.5.12", per_phase_graphs=False, adaptive_v2=False)
