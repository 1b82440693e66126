"""What sglang 0.5.17 and 0.5.23 do at start with adaptive speculation under DP attention.

Owns ``adaptive_start`` (the reason upstream gives, in its own order of checks, and the warning it
logs) and ``V2_DP_NOTE``. Neither release refuses the launch: its speculative arg hook
(``arg_groups/speculative_hook.py``: ``if server_args.speculative_adaptive:
_maybe_disable_adaptive(server_args)``) asks ``adaptive_spec_params.py``'s ``adaptive_unsupported_reason``
and, on a reason, logs ``speculative_adaptive disabled: <reason>. Falling back to static
speculative params.`` and turns ``speculative_adaptive`` off: the server starts with static
speculation. The reasons, in upstream's order (0.5.17; 0.5.23 adds the platform worker, absent on
CUDA, and reads attention DP as ``attn_dp_size > 1``):

1. ``speculative_algorithm`` not EAGLE / EAGLE3;
2. ``speculative_eagle_topk`` given and not 1 (the seed's launch, topk 4, stops here: the DP reason
   is never reached);
3. DP attention: 0.5.17 "enable_dp_attention=True is not supported (adaptive tier decisions are not
   synchronized across DP ranks)", 0.5.23 "attention DP is not supported (...)";
4. ``enable_multi_layer_eagle``, 5. ``enable_two_batch_overlap``, 6. ``enable_pdmux``.

Read from the wheels' source (``adaptive_spec_params.py`` of each release); written here without
their file::symbol form where the citation checks read 0.5.12, which has neither.
"""

from __future__ import annotations

from typing import Sequence

__all__ = ["adaptive_start", "V2_DP_NOTE"]

#: why the multi-rank model does not run the overlap releases' ranks (``core``: the shared core's family)
V2_DP_NOTE = ("the multi-rank model composes the {core} family's ranks only: the overlap scheduler and the "
              "v2 worker of sglang {release} on several ranks are not modelled")


def _value(tokens: Sequence[str], *names: str) -> str | None:
    out = None
    for i, t in enumerate(tokens):
        name, eq, inline = t.partition("=")
        if name in names:
            out = inline if eq else (tokens[i + 1] if i + 1 < len(tokens) else "")
    return out


def _flag(tokens: Sequence[str], name: str) -> bool:
    return any(t == name or t.startswith(name + "=") for t in tokens)


def adaptive_start(tokens: Sequence[str], dp_reason: str | None) -> str | None:
    """The warning a release's ``_maybe_disable_adaptive`` logs for a DP-attention launch (``tokens``,
    DP flags included) that asks ``--speculative-adaptive``, its DP reason being ``dp_reason`` (the
    release's ``ReleaseRules.dp_adaptive_unsupported``); ``None`` when it does not ask (or the
    release has no adaptive speculation to turn off: no reason)."""
    if dp_reason is None or not _flag(tokens, "--speculative-adaptive"):
        return None
    algo = _value(tokens, "--speculative-algorithm", "--speculative-algo")
    topk = _value(tokens, "--speculative-eagle-topk")
    if algo not in ("EAGLE", "EAGLE3"):
        reason = f"speculative_algorithm={algo} (only EAGLE/EAGLE3 are supported)"
    elif topk is not None and topk != "1":
        reason = f"speculative_eagle_topk={topk} (only topk=1 is supported)"
    else:
        reason = dp_reason
    return f"speculative_adaptive disabled: {reason}. Falling back to static speculative params."
