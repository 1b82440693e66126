"""The sglang 0.5.9 family: the 0.5.12 family (the shared core, ``specstate.model.sglang_0_5_12``)
with only what differs on the way back to 0.5.9 and reaches what the model holds.

The seed's release (``../shared/reference/every-rank.md`` §0: the first wheel with
``models/kimi_k25.py``; the v1 ``eagle_worker.py`` is in every release 0.5.8-0.5.12). What matters
for the seed's crash: 0.5.9 copies a batch into the target's CUDA-graph buffers one ``copy_`` at a
time, ``input_ids`` first (``replay.py``), where 0.5.10+ batch the copies and read every source's
dtype first. So a batch that carries 2 ``input_ids`` and ``out_cache_loc = None`` (the seed's patch
on the batch as ``merge_batch`` left it) raises ``160 vs 2`` here and an ``AttributeError`` on
0.5.12.

Layout: ``replay`` (the sequential copy, the ``replay_prepare`` override), ``ledger`` (the base's
citations whose 0.5.9 source differs: not reviewed), ``family`` (the family, its release range,
its variants: each v1 policy again over 0.5.9's copy, named ``NAME@sglang-0.5.9``).
"""

#: the family this release derives from (read as text by ``specstate/model/releases.py``: an older
#: release over a newer base is not the shared core's family)
BASE = "sglang-0.5.12"

from specstate.model.sglang_0_5_9.family import FAMILY, OVERRIDES, VARIANTS  # noqa: E402

__all__ = ["BASE", "FAMILY", "OVERRIDES", "VARIANTS"]

#: the sglang wheels this folder pins (release -> (the wheel's file name, its sha256), from the package
#: index: ``pip download --no-deps sglang==X`` and ``sha256sum``, checked against the index's published
#: hash): its own release; read as text by ``specstate/model/releases.py`` (``Release.wheels``), asked by
#: ``specstate/upstream.py``
WHEELS = {
    "0.5.9": ("sglang-0.5.9-py3-none-any.whl",
               "8a936c4d25fea605f44254e533cff2144c73ceffbc1f8738aba393461bbb64d1"),
}
