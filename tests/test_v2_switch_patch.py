"""The seed's switch on sglang 0.5.17's ``EAGLEWorkerV2`` as a real patch
(``specstate/integration/sglang_0_5_17/switch_patch.py``): what each form sets on the worker and
its draft worker, that it stays out of an adaptive launch, and that a recording's header names
the variant and threshold the conformance then uses."""

from __future__ import annotations

import types

import pytest

from specstate.integration.sglang_0_5_17 import switch_patch
from specstate.integration.sglang_0_5_17.conformance import (config_from_header, crash_verdict, message_sizes,
                                                              variant_from_header)


def _worker(adaptive: bool = False) -> types.SimpleNamespace:
    sa = types.SimpleNamespace(speculative_num_steps=3, speculative_num_draft_tokens=4)
    return types.SimpleNamespace(server_args=sa, speculative_num_steps=3, speculative_num_draft_tokens=4,
                                 adaptive_controller=object() if adaptive else None,
                                 _draft_worker=types.SimpleNamespace(speculative_num_steps=3, speculative_num_draft_tokens=4))


def _counts(w: types.SimpleNamespace) -> tuple[int, int, int, int]:
    return (w.speculative_num_steps, w.speculative_num_draft_tokens, w._draft_worker.speculative_num_steps,
            w._draft_worker.speculative_num_draft_tokens)


def _never(*a: object) -> None:
    raise AssertionError("the original ran")


@pytest.mark.parametrize("patch, above", [("v2-switch-naive", (0, 4, 3, 4)), ("v2-switch", (0, 1, 0, 1))])
def test_each_form_sets_what_its_variant_models(monkeypatch: pytest.MonkeyPatch, patch: str,
                                                above: tuple[int, int, int, int]) -> None:
    monkeypatch.setenv("SPECSTATE_PATCH", patch)
    monkeypatch.setenv("SPECSTATE_THRESHOLD", "5")
    w = _worker()
    switch_patch.around_activate_step_by_batch(_never, w, 6)
    assert _counts(w) == above
    switch_patch.around_activate_step_by_batch(_never, w, 5)
    assert _counts(w) == (3, 4, 3, 4)


def test_an_adaptive_launch_keeps_upstreams_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECSTATE_PATCH", "v2-switch")
    calls: list[int] = []
    w = _worker(adaptive=True)
    switch_patch.around_activate_step_by_batch(lambda worker, bs: calls.append(bs), w, 9)
    assert calls == [9] and _counts(w) == (3, 4, 3, 4)


def test_install_registers_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    got: list[str] = []
    kinds = types.SimpleNamespace(AROUND="around")
    monkeypatch.setenv("SPECSTATE_PATCH", "none")
    assert switch_patch.install(lambda t, f, k: got.append(t), kinds) is None and got == []
    monkeypatch.setenv("SPECSTATE_PATCH", "v2-switch-naive")
    assert switch_patch.install(lambda t, f, k: got.append(t), kinds) is not None
    assert got == [switch_patch.TARGET]


def test_the_header_picks_variant_and_threshold() -> None:
    static = {"server_args": {"speculative_adaptive": False, "speculative_num_steps": 3}}
    patched = {**static, "patch": switch_patch.SwitchConfig("v2-switch-naive", 7).header()}
    assert variant_from_header(static) == "upstream-static"
    assert (variant_from_header(patched), config_from_header(patched).disable_batch_threshold) == ("v2-static-switch-naive", 7)
    adaptive = {"server_args": {"speculative_num_steps": 3}, "patch": patched["patch"]}
    assert variant_from_header(adaptive) == "upstream-adaptive" and config_from_header(adaptive).disable_batch_threshold is None


def test_a_crash_is_judged_by_class_and_sizes() -> None:
    msg = "The size of tensor a (10) must match the size of tensor b (40) at non-singleton dimension 0"
    real = ("RuntimeError", message_sizes(msg))
    assert real == ("RuntimeError", (40, 10))
    assert crash_verdict(real, ("RuntimeError", (40, 10)))["verdict"] == "as-predicted"  # type: ignore[index]
    assert crash_verdict(real, ("RuntimeError", (40, 10)), mismatches=1)["verdict"] == "differs"  # type: ignore[index]
    assert crash_verdict(real, ("RuntimeError", (24, 6)))["verdict"] == "differs"  # type: ignore[index]
    assert crash_verdict(real, ("IndexError", (40, 10)))["verdict"] == "differs"  # type: ignore[index]
    assert crash_verdict(real, None)["verdict"] == "unpredicted"  # type: ignore[index]
    assert crash_verdict(None, real)["verdict"] == "predicted-not-seen"  # type: ignore[index]
    assert crash_verdict(None, None) is None
    tb = {"error": {"msg": msg, "tb_tail": ['  File "x/eagle_draft_extend_cuda_graph_runner.py", line 525, in execute']}}
    v = crash_verdict(real, real, tb, "speculative/eagle_draft_extend_cuda_graph_runner.py::EAGLEDraftExtendCudaGraphRunner.execute")
    assert v is not None and v["where_seen"] is True
