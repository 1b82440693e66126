"""The sglang 0.5.12 family's own code (the v1 family; the registry's ``V1_FAMILY``):

- ``worker``: the v1 ``EAGLEWorker`` (draft, verify, draft extend, the fallback decode); its
  functions are also the shared ``Ops`` table's defaults (``specstate/model/ops.py``), so the
  other families reach some of them through ``ops`` (``forward_target_extend`` for a prefill);
- ``policies``: the switching policies over the seed's patch (``fixed-threshold``, ...);
- ``known_bugs``: one variant per row of ``known-bugs.md``.

Everything else (``step``, ``Ops``, admission, the radix cache, the runners, records) is the
shared core in ``specstate/model/``. The old paths ``specstate.model.worker`` / ``policies`` /
``known_bugs`` still import, as these modules, with a deprecation warning.
"""
