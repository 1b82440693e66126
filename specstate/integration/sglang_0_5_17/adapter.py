"""sglang 0.5.17 as the integration core sees it (``integration/adapter.py``)."""

from __future__ import annotations

from specstate.integration.adapter import ReleaseAdapter

__all__ = ["FAMILY", "ADAPTER"]

FAMILY = "sglang-0.5.17"

ADAPTER = ReleaseAdapter(
    family=FAMILY,
    schemas=("specstate-sglang17-rec/1",),
    default_variant="upstream-adaptive",
    check_fn="specstate.integration.sglang_0_5_17.conformance:check_loaded",
    counts_fn="specstate.integration.sglang_0_5_17.conformance:recording_counts",
    engine_kwargs_fn="specstate.integration.sglang_0_5_17.engine:engine_kwargs",
    engine_env_fn="specstate.integration.sglang_0_5_17.engine:engine_env",
    observe_fn="specstate.integration.sglang_0_5_17.conformance:observe_actions",
    register_fn="specstate.integration.sglang_plugin:register_v17",
    patch="none",  # upstream's own adaptive speculation switches
    engine_variant="upstream-adaptive",
)
