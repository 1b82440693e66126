"""The sglang 0.5.12 family's own code (the v1 family):

- ``family``: the ``Family`` (``FAMILY``; ``specstate.model.families.V1_FAMILY``), its release
  range and the seed patch's flag every variant of it takes;
- ``worker``: the v1 ``EAGLEWorker`` (draft, verify, draft extend, the fallback decode); its
  functions are also the shared ``Ops`` table's defaults (``specstate/model/ops.py``), so the
  other families reach some of them through ``ops`` (``forward_target_extend`` for a prefill);
- ``policies``: the switching policies over the seed's patch (``fixed-threshold``, ...);
- ``known_bugs``: one variant per row of ``known-bugs.md``.

Everything else (``step``, ``Ops``, admission, the radix cache, the runners, records) is the
shared core in ``specstate/model/``.
"""

#: besides this folder, the files whose citations are 0.5.12's (``specstate/model/releases.py``;
#: the shared core's are too: its functions are the ``Ops`` table's defaults)
CITED_OUTSIDE = ("docs/model.md",)

#: the modules that register this release's family and variants (``releases.Release.load``)
REGISTERS = ("family", "known_bugs", "policies")
