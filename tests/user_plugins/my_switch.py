"""A user's own sglang plugin, written the way an engineer with a patch would write it.

``specstate replay --engine sglang --plugin tests.user_plugins.my_switch:register`` loads it in
the engine's processes instead of specstate's built-in patch; specstate's recorder still wraps
it. Its switch rule is its own (speculate while the decode batch has at most
``MY_SWITCH_MAX_BS`` requests, default 5, as ``fixed-threshold``); for the plain decode it calls
``specstate.integration.sglang_patch.fixed_fallback``, the corrected fallback specstate
documents as a library function ("a verify that accepted zero drafts").
"""

from __future__ import annotations

import os
from typing import Any, Callable

TARGET = "sglang.srt.speculative.eagle_worker.EAGLEWorker.forward_batch_generation"


def max_bs() -> int:
    return int(os.environ.get("MY_SWITCH_MAX_BS", "5"))


def around(original: Callable[..., Any], worker: Any, batch: Any, *args: Any, **kwargs: Any) -> Any:
    mode = batch.forward_mode
    if mode.is_decode() and batch.batch_size() > max_bs() and not getattr(batch, "return_logprob", False):
        from specstate.integration.sglang_patch import fixed_fallback

        return fixed_fallback(worker, batch)
    return original(worker, batch, *args, **kwargs)


def register() -> None:
    """Entry point (group ``sglang.srt.plugins`` style): register the AROUND hook."""
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType  # type: ignore

    HookRegistry.register(TARGET, around, HookType.AROUND)
