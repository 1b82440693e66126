"""The sglang 0.5.17 adapter (the v2 family): the recorder, the engine arguments, the conformance
of its recordings with ``specstate.model.sglang_0_5_17`` (``recorder``, ``engine``, ``conformance``), and its CPU oracle (``oracle``)."""
