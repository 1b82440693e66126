"""The sglang 0.5.17 adapter (the v2 family): the recorder, the engine arguments, the conformance
of its recordings with ``specstate.model.v2`` (``recorder``, ``engine``, ``conformance``)."""
