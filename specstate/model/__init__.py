"""The pure model of one SGLang scheduler process running the v1 EAGLE worker.

Layout: ``config`` (ServerArgs), ``modes``, ``tensors`` (shapes in states, real torch at
operations), ``request`` (Req), ``spec_info`` (EagleDraftInput / EagleVerifyInput /
EagleDraftExtendInput), ``batch`` (ScheduleBatch), ``state`` (ModelState), ``kv``
(allocator), ``runner`` (graph runners, attention metadata, one forward), ``records``
(forward records, crashes), ``actions``, ``tx``, ``scheduler`` and ``worker`` (the default
operations), ``ops`` (the table of named operations), ``step``, ``variants`` with
``policies`` and ``known_bugs``, ``scenarios``.
"""

from specstate.model.actions import Abort, Action, Arrive, Step, action_from_json, action_to_json
from specstate.model.batch import ScheduleBatch
from specstate.model.config import SpecConfig
from specstate.model.modes import CaptureHiddenMode, ForwardMode, Worker
from specstate.model.ops import DEFAULT_OPS, OP_NAMES, Ops
from specstate.model.records import Crash, Event, ForwardRecord, GraphUse
from specstate.model.request import FinishReason, Req, ReqStatus
from specstate.model.spec_info import EagleDraftExtendInput, EagleDraftInput, EagleVerifyInput
from specstate.model.state import Decision, ModelState, initial_state
from specstate.model.step import StepOutcome, step
from specstate.model.tx import Tx
from specstate.model.variants import Variant, get_variant, load_variant, register, variant_names

__all__ = [
    "Abort", "Action", "Arrive", "Step", "action_from_json", "action_to_json",
    "ScheduleBatch", "SpecConfig", "CaptureHiddenMode", "ForwardMode", "Worker",
    "DEFAULT_OPS", "OP_NAMES", "Ops", "Crash", "Event", "ForwardRecord", "GraphUse",
    "FinishReason", "Req", "ReqStatus", "EagleDraftExtendInput", "EagleDraftInput", "EagleVerifyInput",
    "Decision", "ModelState", "initial_state", "StepOutcome", "step", "Tx",
    "Variant", "get_variant", "load_variant", "register", "variant_names",
]
