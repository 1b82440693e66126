"""The v2 family: sglang 0.5.17's ``EAGLEWorkerV2`` under the overlap scheduler, with
upstream's batch-size-aware adaptive speculation.

Layout: ``adaptive`` (the controller's slots and routing), ``runtime`` (one set of graph
runners per candidate step count), ``state`` (``OverlapState``: the result in flight, the active
runtime state, the slots), ``spec_info`` (``EagleDraftInput`` with ``future_indices``),
``scheduler`` (``event_loop_overlap``, decode over-allocation, retraction order, results one
iteration late), ``worker`` (draft / trivial verify / verify / draft extend), ``identities``
(what the shared invariants check on v2 states), ``variants`` (the family, ``upstream-adaptive``
and known bugs). Everything else (``step``, ``Ops``, admission, the radix cache, records,
invariants) is shared with the v1 family (``specstate.model.families``).
"""

#: besides this folder, the files whose citations are 0.5.17's (``specstate/model/releases.py``):
#: the family's scenarios and provenance invariants, kept beside the shared ones, and its page
CITED_OUTSIDE = ("specstate/scenarios_v2.py", "specstate/invariants/_provenance.py", "docs/model-v2.md")

#: the module that registers this release's family and variants (``releases.Release.load``)
REGISTERS = ("variants",)

#: the old package path of this folder (issue 26), still importable with a deprecation warning
#: (``specstate/model/v2/``, which asks ``releases.formerly_at``; docs/variants.md "Renamed names")
FORMERLY = ("specstate.model.v2",)

#: the sglang wheels this folder pins (release -> (the wheel's file name, its sha256), from the package
#: index: ``pip download --no-deps sglang==X`` and ``sha256sum``, checked against the index's published
#: hash): its own release; read as text by ``specstate/model/releases.py`` (``Release.wheels``), asked by
#: ``specstate/upstream.py``
WHEELS = {
    "0.5.17": ("sglang-0.5.17-cp311-cp311-manylinux_2_34_x86_64.whl",
                "575e38f5683624ded3b4bb267f637a098e5ed37d13a1d1ff5ea09bd781a04d16"),
}
