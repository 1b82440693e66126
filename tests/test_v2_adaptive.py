"""The model's adaptive controller (``specstate.model.sglang_0_5_17.adaptive``) against sglang 0.5.17's own
``adaptive_spec_params.py``, run here on CPU: the same routing, the same EMA values bit for
bit, the same step changes, for drawn configs, capture lists and acceptance sequences."""

from __future__ import annotations

import json
import sys
import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specstate.model.sglang_0_5_17.adaptive import DEFAULT_ADAPTIVE_CONFIG, H200_ADAPTIVE_CONFIG, candidate_steps, initial_params
from tests.sglang_source import SGLANG_V2_VERSION, sglang_source

pytestmark = pytest.mark.sglang_source


@pytest.fixture(scope="module")
def upstream() -> types.ModuleType:
    """``sglang/srt/speculative/adaptive_spec_params.py`` of 0.5.17, its one import stubbed."""
    src = (sglang_source(SGLANG_V2_VERSION) / "speculative" / "adaptive_spec_params.py").read_text()
    stub = types.ModuleType("sglang.srt.utils")
    stub.log_info_on_rank0 = lambda logger, msg: None  # type: ignore[attr-defined]
    saved = {k: sys.modules.get(k) for k in ("sglang", "sglang.srt", "sglang.srt.utils")}
    sys.modules.update({"sglang": types.ModuleType("sglang"), "sglang.srt": types.ModuleType("sglang.srt"),
                        "sglang.srt.utils": stub})
    try:
        mod = types.ModuleType("upstream_adaptive_spec_params")
        exec(compile(src, "adaptive_spec_params.py", "exec"), mod.__dict__)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    return mod


def _upstream_params(mod: types.ModuleType, text: str, initial: int, capture: tuple[int, ...] | None, tmp_path) -> object:  # noqa: ANN001
    path = tmp_path / "adaptive.json"
    path.write_text(text)
    p = mod.AdaptiveSpeculativeParams(initial_steps=initial, cfg_path=str(path))
    p.set_cuda_graph_bs(list(capture) if capture else None)
    return p


slot_configs = st.dictionaries(
    st.integers(1, 40).map(str),
    st.fixed_dictionaries({"candidate_steps": st.lists(st.integers(0, 7), min_size=1, max_size=4)},
                          optional={"up_hysteresis": st.sampled_from([0.0, 0.25, -0.25]),
                                    "down_hysteresis": st.sampled_from([0.0, -0.25, 0.5]),
                                    "ceiling_coeff": st.sampled_from([0, 1.5, 2]),
                                    "warmup_batches": st.integers(0, 3), "update_interval": st.integers(1, 3)}),
    min_size=1, max_size=4)
shared_knobs = st.fixed_dictionaries({}, optional={"ema_alpha": st.sampled_from([0.2, 0.5, 1.0])})
events = st.lists(st.tuples(st.integers(1, 48), st.lists(st.integers(0, 7), min_size=1, max_size=6)), max_size=40)


def _agree(upstream, tmp, text, initial, capture, evs) -> None:  # noqa: ANN001
    theirs = _upstream_params(upstream, text, initial, capture, tmp)
    ours = initial_params(text, initial, capture)
    assert list(candidate_steps(text)) == theirs.candidate_steps
    for bs, correct in evs:
        ours, changed = ours.on_verify_complete(tuple(correct), bs)
        assert changed == theirs.on_verify_complete(correct, bs)
        for key, slot in ours.slots:
            up = theirs._slots[key]
            assert (slot.current_steps, slot.ema_accept_len, slot.batch_count) == \
                (up.current_steps, up.ema_accept_len, up._batch_count)
        assert [ours.steps_for_batch(b) for b in range(1, 50)] == [theirs.get_steps_for_batch(b) for b in range(1, 50)]
    for step in range(8):
        got = ours.cuda_graph_bs_for_step(step)
        assert (list(got) if got is not None else None) == theirs.cuda_graph_bs_for_step(step)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(slots=slot_configs, knobs=shared_knobs, initial=st.integers(1, 7),
       capture=st.sampled_from([None, (1, 2, 4, 8, 16), (1, 3, 6, 12, 24, 48)]), evs=events)
def test_routing_and_ema_agree_with_sglang(upstream, tmp_path_factory, slots, knobs, initial, capture, evs) -> None:  # noqa: ANN001
    _agree(upstream, tmp_path_factory.mktemp("cfg"), json.dumps({**knobs, **slots}), initial, capture, evs)


EDGES = [
    # the drop to steps 0 at EMA 3/7 (drop threshold 0.5 when the lower candidate is 0)
    ({"ema_alpha": 1.0, "1": {"candidate_steps": [0, 1], "warmup_batches": 0, "update_interval": 1}}, 1,
     [(1, [0, 0, 0, 0, 1, 1, 1])]),
    # a rise past current - 0.5 + up_hysteresis, then the EMA ceiling capping a step that did not rise
    ({"ema_alpha": 0.5, "1": {"candidate_steps": [1, 3, 7], "warmup_batches": 0, "update_interval": 1,
                              "up_hysteresis": 0.25, "ceiling_coeff": 1.5}}, 3,
     [(1, [7, 7]), (1, [7]), (1, [0, 0, 1]), (1, [0]), (1, [2, 3])]),
    # an EMA of 8/3 stays below the rise threshold 3 - 0.5 + 0.25
    ({"ema_alpha": 0.5, "1": {"candidate_steps": [1, 3, 7], "warmup_batches": 0, "update_interval": 1,
                              "up_hysteresis": 0.25}}, 3, [(1, [3, 3, 4])]),
    # the zero-step probe: from steps 0 to the smallest positive candidate, EMA reset when negative
    ({"1": {"candidate_steps": [0, 2, 5], "warmup_batches": 1, "update_interval": 2}}, 0,
     [(1, [0]), (1, [0]), (1, [0]), (1, [1, 1]), (1, [4]), (1, [4]), (1, [4])]),
    # padding to the capture list moves a batch into the next slot
    ({"1": {"candidate_steps": [3]}, "6": {"candidate_steps": [0, 1], "warmup_batches": 0, "update_interval": 1}},
     3, [(5, [0, 0]), (6, [1]), (9, [1, 1])]),
]


@pytest.mark.parametrize("cfg,initial,evs", EDGES)
def test_edge_cases_agree_with_sglang(upstream, tmp_path, cfg, initial, evs) -> None:  # noqa: ANN001
    for capture in (None, (1, 2, 4, 8, 16)):
        _agree(upstream, tmp_path, json.dumps(cfg), initial, capture, evs)


def test_the_default_and_the_h200_configs_route_as_sglang(upstream, tmp_path) -> None:  # noqa: ANN001
    for text in (json.dumps(DEFAULT_ADAPTIVE_CONFIG), H200_ADAPTIVE_CONFIG):
        theirs = _upstream_params(upstream, text, 3, None, tmp_path)
        ours = initial_params(text, 3, None)
        assert [ours.steps_for_batch(b) for b in range(1, 100)] == [theirs.get_steps_for_batch(b) for b in range(1, 100)]
    h200 = initial_params(H200_ADAPTIVE_CONFIG, 3, None)
    assert [h200.steps_for_batch(b) for b in (1, 5, 6, 9, 16, 17, 250)] == [3, 3, 0, 0, 0, 0, 0]
    # with an explicit capture list a batch is padded first: 5 -> 8 routes to the steps-0 slot
    padded = initial_params(H200_ADAPTIVE_CONFIG, 3, (1, 2, 4, 8))
    assert [padded.steps_for_batch(b) for b in (4, 5)] == [3, 0]
