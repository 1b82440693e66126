"""The oracle: sglang's real scheduler on CPU against the model (specstate/oracle, docs/oracle.md).

The tests that run the oracle need the release's wheel (``pip download --no-deps``, cached in
``~/.cache/specstate/wheels``, pinned by sha256); without it and without a package registry they skip
with one line.
"""

from __future__ import annotations

import pytest

from specstate.model import Abort, Arrive, SpecConfig, Step
from specstate.oracle import stubs
from specstate.oracle.tokens import EOS, output_token, prompts

RELEASE = "0.5.12"


@pytest.fixture
def oracle(oracle_of):  # noqa: ANN001, ANN201
    return oracle_of(RELEASE)  # the session's 0.5.12 oracle process (tests/conftest.py)


def _config(**kw: object) -> SpecConfig:
    base = dict(speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4,
                disable_batch_threshold=None, target_kv_pool_size=4096, draft_kv_pool_size=4096,
                chunked_prefill_size=16, max_running_requests=4)
    base.update(kw)
    return SpecConfig(**base)  # type: ignore[arg-type]


def test_every_stub_says_why_it_is_safe() -> None:
    assert set(stubs.STUBBED) >= {"sgl_kernel", "flashinfer", "transformers"}
    assert all(len(why) > 20 for why in stubs.STUBBED.values())


def test_prompts_share_exactly_the_named_prefix() -> None:
    ps = prompts([Arrive(8, 1), Arrive(6, 1, prefix_of=0, shared_len=3), Arrive(5, 1, prefix_of=1, shared_len=5)])
    assert ps[1][:3] == ps[0][:3] and ps[1][3] != ps[0][3]
    assert ps[2][:5] == ps[1][:5] and ps[2][3] != ps[0][3]
    assert len({output_token(0, 0), output_token(1, 0), EOS} | set(ps[0])) == 3 + len(ps[0])


def test_a_chunked_prefill_with_aborts_conforms(oracle) -> None:  # noqa: ANN001
    from specstate.integration.oracle_differential import differential

    acts = [Arrive(40, 6), Step(), Abort(0), Arrive(10, 8, prefix_of=0, shared_len=8), Arrive(30, 4),
            Arrive(12, 9), Step(), Abort(3), Step(), Step(accept=(2, 3), eos=(2,)), Abort(1)] + [Step()] * 8
    d = differential(RELEASE, _config(), acts, oracle=oracle)
    assert d.ok, d.describe()
    assert {o.kind for o in d.model} == {"prefill", "decode"}
    assert {"chunked-prefill", "abort-chunked", "abort-waiting", "abort-running", "prefix-hit"} <= set(d.oracle.reached)


def test_a_model_mutation_is_caught(oracle) -> None:  # noqa: ANN001
    """kv-leak-spec-tail never frees the rejected draft slots of a request finishing in verify:
    the oracle's allocator says otherwise."""
    from specstate.integration.oracle_differential import differential

    acts = [Arrive(10, 2), Arrive(12, 9), Step(), Step(accept=(1, 1)), Step(), Step()]
    d = differential(RELEASE, _config(), acts, oracle=oracle, variant="kv-leak-spec-tail")
    assert d.mismatches and d.mismatches[0].field == "kv_after", d.describe()


def test_an_over_long_prompt_is_prefilled_as_one_token(oracle) -> None:  # noqa: ANN001
    """``validate_input_length`` + ``Req.set_finish_with_abort``: queued as one token, prefilled, finished."""
    from specstate.integration.oracle_differential import differential

    cfg = _config(speculative_num_steps=1, speculative_num_draft_tokens=2, target_kv_pool_size=12,
                  draft_kv_pool_size=12, max_running_requests=1)
    d = differential(RELEASE, cfg, [Arrive(25, 1), Step()], oracle=oracle)
    assert d.oracle.observations and d.oracle.observations[0].extend_lens == (1,)  # upstream: one prefill of 1 token
    assert d.ok, d.describe()


def test_aborting_one_request_leaves_a_request_whose_id_extends_it(oracle) -> None:  # noqa: ANN001
    """``abort_request`` matches ids by prefix; the oracle's ids are fixed-width (``rid_name``)."""
    from specstate.integration.oracle_differential import differential
    from specstate.oracle.driver import rid_name

    assert not rid_name(10).startswith(rid_name(1))
    cfg = _config(speculative_num_steps=1, speculative_num_draft_tokens=2, max_running_requests=1)
    d = differential(RELEASE, cfg, [Arrive(1, 1)] * 11 + [Abort(1), Step()], oracle=oracle)
    assert d.ok, d.describe()
    assert d.oracle.observations[0].waiting_after == tuple(range(2, 11))


def test_without_the_registry_the_error_names_the_release_and_the_folder(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    import subprocess

    from specstate import upstream
    from specstate.oracle import wheels

    monkeypatch.setenv("SPECSTATE_SGLANG_CACHE", str(tmp_path))
    monkeypatch.setattr(upstream.subprocess, "run",
                        lambda *a, **k: subprocess.CompletedProcess(a, 1, "", "no index"))
    with pytest.raises(wheels.OracleUnavailable) as e:
        wheels.unpacked("0.5.17")
    assert "sglang 0.5.17" in str(e.value) and str(tmp_path / "wheels") in str(e.value)
    assert "\n" not in str(e.value)
