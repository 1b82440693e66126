"""Token ids for a workload: prompts with exactly the shared prefixes the actions name.

The model's prompts are symbolic (``Arrive.prefix_of`` / ``shared_len``: segments of owners); the
oracle needs real token ids. Prompt token ``j`` of owner ``o`` is ``3 + o * 2**20 + j`` (0, 1, 2
are pad, bos and EOS in the tiny configs), an output token of request ``r`` lives in a range of
its own, so two requests share exactly the prefix the actions say and nothing more (the radix
tree sees no accidental match). The oracle's model config declares a vocabulary that holds them.
"""

from __future__ import annotations

from typing import Any, Sequence

__all__ = ["EOS", "VOCAB", "prompts", "output_token"]

EOS = 2
_SPAN = 1 << 20
VOCAB = 1 << 30


def prompts(actions: Sequence[Any]) -> list[list[int]]:
    """The prompt of every ``Arrive`` in ``actions``, by arrival index."""
    from specstate.model import Arrive

    out: list[list[int]] = []
    for a in actions:
        if not isinstance(a, Arrive):
            continue
        rid = len(out)
        own = [3 + rid * _SPAN + j for j in range(a.prompt_len)]
        if a.prefix_of is not None and a.shared_len:
            n = min(a.shared_len, a.prompt_len, len(out[a.prefix_of]))
            own[:n] = out[a.prefix_of][:n]
        out.append(own)
    return out


def output_token(rid: int, index: int) -> int:
    """The ``index``-th output token of request ``rid`` (never EOS, never a prompt token)."""
    return 3 + (VOCAB >> 1) + rid * _SPAN + index % _SPAN
