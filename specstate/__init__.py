"""specstate: a formal state model and fuzzer for the batch state of an LLM inference
server while speculative decoding (EAGLE / EAGLE-3) is switched on and off.

General layout (one concept per module, public names re-exported here and in each
subpackage's ``__init__``):

- ``specstate.model``       the pure model of one SGLang scheduler process running the v1
                            non-overlap ``EAGLEWorker`` (sglang==0.5.12): frozen states,
                            ``step(state, action, ops) -> StepOutcome``, named operations,
                            variants (sets of overrides of those operations), scenarios.
- ``specstate.invariants``  named ``always`` properties and ``sometimes`` witnesses.
- ``specstate.fuzz``        Hypothesis strategies and state machine, traces, reproduction,
                            minimisation and exhaustive exploration.
- ``specstate.integration`` the boundary to the real SGLang worker on a GPU (imports sglang
                            lazily; nothing else in specstate imports it).
- ``specstate.cli``         the ``specstate`` command: every command module (``check``, ``fuzz``:
                            reproduce / fuzz / minimize / explore, ``graph``, ``prove``, ``replay``,
                            ``oracle``, ``engines``), above every library they drive.

``model``, ``invariants`` and ``fuzz`` import without sglang installed.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
