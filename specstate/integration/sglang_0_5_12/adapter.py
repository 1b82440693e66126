"""sglang 0.5.12 as the integration core sees it (``integration/adapter.py``)."""

from __future__ import annotations

from specstate.integration.adapter import ReleaseAdapter

__all__ = ["FAMILY", "ADAPTER"]

FAMILY = "sglang-0.5.12"

#: its recorder, counts and patch are still top-level files of integration/ (named in ``parts``)
ADAPTER = ReleaseAdapter(FAMILY, __package__, ("specstate-sglang-rec/1", "specstate-sglang-rec/2"), "fixed-threshold",
                         parts={"counts": "specstate.integration.analyze:analyze_records"},
                         header_agrees=(("topk", "speculative_eagle_topk"), ("speculative_num_steps", "speculative_num_steps"),
                                        ("speculative_num_draft_tokens", "speculative_num_draft_tokens"),
                                        # EAGLEWorker.page_size = server_args.page_size (eagle_worker.py)
                                        ("page_size", "page_size")))
