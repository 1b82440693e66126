"""sglang 0.5.17 as the integration core sees it (``integration/adapter.py``)."""

from __future__ import annotations

from specstate.integration.adapter import ReleaseAdapter

__all__ = ["FAMILY", "ADAPTER"]

FAMILY = "sglang-0.5.17"

#: no switching patch: upstream's own adaptive speculation switches, as ``upstream-adaptive`` models
ADAPTER = ReleaseAdapter(FAMILY, __package__, ("specstate-sglang17-rec/1",), "upstream-adaptive", patch="none",
                         engine_variant="upstream-adaptive", header_agrees=(("max_prefill_tokens", "max_prefill_tokens"),),
                         adaptive_header=True, record_counter="loop", takes_threshold=False)
