"""The boundary to the real SGLang worker (sglang==0.5.12, v1 ``EAGLEWorker``) on a GPU host.

Nothing here is imported by ``specstate.model``, ``specstate.invariants`` or
``specstate.fuzz``; sglang itself is imported lazily, only inside functions that run in the
engine or scheduler process. Modules:

- ``workloads``        waves of requests (pure): the seed sweep, random workloads, JSON I/O;
- ``agree``            weights under which target and EAGLE-3 draft agree (torch only);
- ``sglang_patch``     the ``speculative_disable_batch_threshold`` patch, naive and fixed;
- ``sglang_recorder``  the per-iteration JSONL recorder (schema in ``docs/gpu.md``);
- ``sglang_plugin``    the sglang plugin entry point that installs the three above;
- ``sglang_driver``    starts the Engine and runs workloads (``main(argv)``).
"""
