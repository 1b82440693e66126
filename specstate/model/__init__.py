"""The pure model of one SGLang scheduler process running the v1 EAGLE worker.

Layout: ``config`` (ServerArgs), ``modes``, ``tensors`` (shapes in states, shape rules at
operations, torch's own error where one fails), ``request`` (Req), ``spec_info`` (EagleDraftInput / EagleVerifyInput /
EagleDraftExtendInput), ``batch`` (ScheduleBatch), ``state`` (ModelState), ``kv``
(allocator), ``runner`` (graph runners, attention metadata, one forward), ``records``
(forward records, crashes), ``actions``, ``tx``, ``scheduler`` and ``sglang_0_5_12/worker`` (the default
operations), ``ops`` (the table of named operations), ``step``, ``variants`` with
``sglang_0_5_12/policies`` and ``known_bugs``, ``scenarios``.
"""

from specstate._lazy import lazy_exports

#: imported on first use (``specstate/_lazy.py``): ``from specstate.model.config import SpecConfig``
#: (the file schema, the CLI's arguments) does not import the operations and their tensors
_FROM = {
    'actions': ('Abort', 'Action', 'Arrive', 'Step', 'action_from_json', 'action_to_json',),  # action_from_json: deprecated
    'batch': ('ScheduleBatch',),
    'config': ('SpecConfig',),
    'modes': ('CaptureHiddenMode', 'ForwardMode', 'Worker',),
    'ops': ('DEFAULT_OPS', 'OP_NAMES', 'Ops',),
    'records': ('Crash', 'Event', 'ForwardRecord', 'GraphUse',),
    'request': ('FinishReason', 'Req', 'ReqStatus',),
    'spec_info': ('EagleDraftExtendInput', 'EagleDraftInput', 'EagleVerifyInput',),
    'state': ('Decision', 'ModelState',),
    'step': ('StepOutcome', 'step', 'initial_state',),
    'tx': ('Tx',),
    'variants': ('Variant', 'as_variant', 'get_variant', 'load_variant', 'register', 'variant_names',),
}
__getattr__, __dir__ = lazy_exports(__name__, {n: f"specstate.model.{m}" for m, ns in _FROM.items() for n in ns})

__all__ = [
    "Abort", "Action", "Arrive", "Step", "action_to_json",
    "ScheduleBatch", "SpecConfig", "CaptureHiddenMode", "ForwardMode", "Worker",
    "DEFAULT_OPS", "OP_NAMES", "Ops", "Crash", "Event", "ForwardRecord", "GraphUse",
    "FinishReason", "Req", "ReqStatus", "EagleDraftExtendInput", "EagleDraftInput", "EagleVerifyInput",
    "Decision", "ModelState", "initial_state", "StepOutcome", "step", "Tx",
    "Variant", "as_variant", "get_variant", "load_variant", "register", "variant_names",
]
