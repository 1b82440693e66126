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

#: the sglang wheels this folder pins (release -> (the wheel's file name, its sha256), from the package
#: index: ``pip download --no-deps sglang==X`` and ``sha256sum``, checked against the index's published
#: hash): its own release and the one more its family stands for (``Family.releases``); read as text by
#: ``specstate/model/releases.py`` (``Release.wheels``), asked by ``specstate/upstream.py``
WHEELS = {
    "0.5.12": ("sglang-0.5.12-cp311-cp311-manylinux_2_34_x86_64.whl",
                "4ed786a38655851fd055ef57380c34d29b87753b53f63457309f51e5bf48c2e6"),
    "0.5.12.post1": ("sglang-0.5.12.post1-cp311-cp311-manylinux_2_34_x86_64.whl",
                      "94b3f3cc6b97f1364f247b8d9c1d106ec63cf22c55d6b65bc40ff29b0206ef5f"),
}
