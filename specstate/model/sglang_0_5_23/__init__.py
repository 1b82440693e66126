"""The sglang 0.5.23 family: the 0.5.17 family (``specstate.model.sglang_0_5_17``) with only what changed
on the way to 0.5.23 and reaches the state the model holds.

Layout: ``finish`` (``Req.update_finish_state``'s new order and cap, 0.5.18; ``Req.owned_kv_len``
on release, 0.5.21), ``scheduler`` (finished rows filtered at the start of every scheduling
step, 0.5.23; ``enable_skip_finishing_decode`` under overlap, 0.5.22), ``admission`` (a
continuing chunk's row counted back into the admission bound, 0.5.23), ``tree`` (the tree
insert's split at the prompt boundary, 0.5.20 / 0.5.22), ``runtime`` (the
draft-extend graph captured at each runtime state's own width, 0.5.18: read from code, not run;
the choice is the ``runtime_states`` operation, which a variant flips), ``start`` (the engine
start: the shared logits buffer sized for every candidate, 0.5.19; draft extend one logits row
per request, 0.5.20), ``ledger`` (the base's citations: gone, reviewed, open), ``family`` (the
upstream default adaptive config of 0.5.20, the family, its release range, its ledger of the
base's citations that changed, its variants). Everything else is the 0.5.17 family's.
"""

from specstate.model.sglang_0_5_23.family import (
    DEFAULT_ADAPTIVE_CONFIG_0_5_23, FAMILY, OVERRIDES, STARTUP_WIDTH, UPSTREAM, prepare_v23)

__all__ = ["FAMILY", "OVERRIDES", "UPSTREAM", "STARTUP_WIDTH", "DEFAULT_ADAPTIVE_CONFIG_0_5_23", "prepare_v23"]
