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

#: the sglang wheels this folder pins (release -> (the wheel's file name, its sha256), from the package
#: index: ``pip download --no-deps sglang==X`` and ``sha256sum``, checked against the index's published
#: hash): its own release and those between its base and it, whose changes its family dates
#: (``Family.changes``) and its ledger reviewed; read as text by ``specstate/model/releases.py``
#: (``Release.wheels``), asked by ``specstate/upstream.py``
WHEELS = {
    "0.5.18": ("sglang-0.5.18-cp311-cp311-manylinux_2_34_x86_64.whl",
                "e97b585dd2d5db2802599feba47c84cce972f5e1231a6816fef996200207b5cf"),
    "0.5.19": ("sglang-0.5.19-cp311-cp311-manylinux_2_34_x86_64.whl",
                "425e87377e725d03db8262382008f3fd9561a6cf5d82f485f8b9929f02ffe12b"),
    "0.5.20": ("sglang-0.5.20-cp311-cp311-manylinux_2_34_x86_64.whl",
                "1573527042f4f6b4ead838302818595fc77fdc611dbcc2e40cd150fbc8f8513c"),
    "0.5.21": ("sglang-0.5.21-cp311-cp311-manylinux_2_34_x86_64.whl",
                "96c029f75dec99baa33a5db3d41b1bebefdd6bcfba3a2f7c807fe1cf49a87c20"),
    "0.5.22": ("sglang-0.5.22-cp311-cp311-manylinux_2_34_x86_64.whl",
                "cc9a0f15bd8f877a0584fdb7a1702240177a1f1cc8d17c978715161717b9037b"),
    "0.5.23": ("sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl",
                "00b3cd5b265ac76c64185fbb6b95424f324ddd9f428d0306b77bc9db9d859937"),
}
