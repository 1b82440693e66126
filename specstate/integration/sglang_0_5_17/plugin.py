"""The sglang plugin's hooks for sglang 0.5.17 (``sglang_plugin.register`` calls ``register``)."""

from __future__ import annotations

from typing import Any

from specstate.integration.sglang_plugin import _safe_after_load_model, agree_requested, load_user_plugin, recording_requested

__all__ = ["register"]


def register(registry: Any, kinds: Any) -> None:
    """No switching patch (upstream's own adaptive speculation switches), the agree weights
    (guarded), a user plugin, the 0.5.17 recorder (``recorder.py``)."""
    from specstate.integration.sglang_0_5_12.plugin import AGREE_TARGET
    from specstate.integration.sglang_0_5_17 import recorder

    if agree_requested():
        registry.register(AGREE_TARGET, _safe_after_load_model, kinds.AFTER)
    load_user_plugin()
    if recording_requested():
        recorder.install(registry.register, kinds)
