"""Every malformed launch flag or flags file (``tests/bad_inputs_flags.py``), to every command that
takes server flags, is exit 2 and one clear line naming the flag, no traceback; and every
mistake of the table is tried on ``check`` at least once."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from tests.bad_inputs import Case, judge
from tests.bad_inputs_flags import ADAPTIVE_FLAGS, ADAPTIVE_MISTAKES, FILE_MISTAKES, FLAG_MISTAKES, cases

MAX_SECONDS = 5.0


@settings(max_examples=150, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(cases())
def test_every_bad_launch_is_one_clear_line(case: Case) -> None:
    v = judge(case, limit_s=30.0)
    assert v.kind == "clean", f"{case!r}: {v.kind}, exit {v.code}, stderr: {v.stderr.strip()[-500:]}"
    assert v.seconds < MAX_SECONDS, f"{case!r} took {v.seconds:.1f} s"


@pytest.mark.parametrize("flags,needle,what", FLAG_MISTAKES, ids=[m[2] for m in FLAG_MISTAKES])
def test_each_flag_mistake_on_check(flags: list[str], needle: str, what: str) -> None:
    v = judge(Case(["check", "--parts", "sweep", "--"] + flags, needle=needle, what=what))
    assert v.kind == "clean", f"{what}: {v.kind}, exit {v.code}, stderr: {v.stderr.strip()[-500:]}"


@pytest.mark.parametrize("name,content,needle,what", FILE_MISTAKES, ids=[m[3] for m in FILE_MISTAKES])
def test_each_file_mistake_on_check(name: str, content: bytes, needle: str, what: str) -> None:
    v = judge(Case(["check", "--parts", "sweep", "--config", name], {name: content}, needle=needle, what=what))
    assert v.kind == "clean", f"{what}: {v.kind}, exit {v.code}, stderr: {v.stderr.strip()[-500:]}"


def test_server_flags_on_a_command_that_takes_none() -> None:
    v = judge(Case(["variants", "--", "--speculative-num-steps", "3"], needle="takes no server flags"))
    assert v.kind == "clean", v.stderr


@pytest.mark.parametrize("content,needle,what", ADAPTIVE_MISTAKES, ids=[m[2] for m in ADAPTIVE_MISTAKES])
def test_each_adaptive_config_mistake_on_check(content: bytes, needle: str, what: str) -> None:
    v = judge(Case(ADAPTIVE_FLAGS, {"a.json": content}, needle=needle, what=what))
    assert v.kind == "clean", f"{what}: {v.kind}, exit {v.code}, stderr: {v.stderr.strip()[-500:]}"
    assert "--speculative-adaptive-config a.json" in v.stderr, v.stderr


def test_a_good_adaptive_config_still_starts() -> None:
    good = b'{"1": {"candidate_steps": [1, 3], "ema_alpha": 0.5, "update_interval": 1, "warmup_batches": 0}}'
    v = judge(Case(ADAPTIVE_FLAGS, {"a.json": good}, what="a good adaptive config"))
    assert v.code == 0, v.stderr
