"""sglang 0.5.12 as the integration core sees it (``integration/adapter.py``)."""

from __future__ import annotations

from specstate.integration.adapter import ReleaseAdapter

__all__ = ["FAMILY", "ADAPTER"]

FAMILY = "sglang-0.5.12"

ADAPTER = ReleaseAdapter(
    family=FAMILY,
    schemas=("specstate-sglang-rec/1", "specstate-sglang-rec/2"),
    default_variant="fixed-threshold",
    check_fn="specstate.integration.sglang_0_5_12.conformance:check_loaded",
    counts_fn="specstate.integration.analyze:analyze_records",
    engine_kwargs_fn="specstate.integration.sglang_driver:v1_engine_kwargs",
    engine_env_fn="specstate.integration.sglang_0_5_12.adapter:engine_env",
    observe_fn="specstate.integration.sglang_0_5_12.conformance:observe_actions",
    register_fn="specstate.integration.sglang_plugin:register_v1",
)


def engine_env() -> dict[str, str]:
    """Nothing beyond the driver's own environment."""
    return {}
