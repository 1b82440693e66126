"""The CPU oracle's fuzzer varies every server flag the model reads (issue 41, item 3): for each
release the oracle runs, every ``ServerArgs`` field of the model's flag table
(``specstate/server_args/_tables.py::TABLES``, the flags whose value reaches a ``SpecConfig``
field) is either drawn with more than one value by the oracle's config strategy
(``specstate/oracle/strategies.py::configs_for``) and handed to upstream's ``ServerArgs``
(``differential.py::oracle_config``), or held fixed with a reason (``strategies.py::ORACLE_FIXED``).
A flag added to the model's table fails here until the oracle draws it or says why not: a model
that ignored such a flag would otherwise pass the oracle."""

from __future__ import annotations

import collections
import dataclasses
import functools
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from specstate.model import SpecConfig
from specstate.oracle.catalog import RELEASES, is_overlap
from specstate.integration.oracle_differential import oracle_config
from specstate.oracle.strategies import ORACLE_FIXED, configs_for
from specstate.server_args._tables import TABLES, release_of_family

#: ``ServerArgs`` field -> the ``SpecConfig`` field it sets, where the names differ
#: (``server_args/_derive.py::_memory``: ``--max-total-tokens`` sizes both pools, ``--context-length``)
SPEC_FIELD = {"max_total_tokens": "target_kv_pool_size", "context_length": "context_len"}


def _table(release: str) -> tuple[Any, ...]:
    """The flag table of ``release``'s model family (a family without its own reads its base's:
    0.5.9's is 0.5.12's)."""
    from specstate.model import get_variant
    from specstate.oracle.catalog import VARIANTS

    table_release = release_of_family(get_variant(VARIANTS[release]).family_name)
    assert table_release is not None
    return TABLES[table_release]


@functools.cache
def _varied(release: str) -> frozenset[str]:
    """The ``SpecConfig`` fields ``configs_for(release)`` draws with two values or more (300
    derandomized configs; once per release and process: two tests read it, and the module is one
    scheduling unit, ``tests/conftest.py::SHARED_FIXTURE_UNITS``)."""
    seen: dict[str, set[object]] = collections.defaultdict(set)

    @settings(max_examples=300, derandomize=True, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), deadline=None)
    @given(configs_for(release))
    def collect(cfg: SpecConfig) -> None:
        for f in dataclasses.fields(cfg):
            seen[f.name].add(getattr(cfg, f.name))

    collect()
    return frozenset(name for name, values in seen.items() if len(values) > 1)


def _fixed_reason(field: str, release: str) -> str | None:
    """``ORACLE_FIXED``'s reason for ``field`` where it applies to ``release``'s family."""
    reason = ORACLE_FIXED.get(field)
    if reason is None:
        return None
    family = "v2" if is_overlap(release) else "v1"
    scoped = [part for part in reason.split("; ") if part[:3] in ("v1:", "v2:")]
    if not scoped:
        return reason
    return next((part for part in scoped if part.startswith(family + ":")), None)


@pytest.mark.parametrize("release", RELEASES)
def test_every_model_read_flag_is_varied_by_the_oracle_or_fixed_with_a_reason(release: str) -> None:
    varied = _varied(release)
    passed = set(oracle_config(SpecConfig()))  # what reaches upstream's ServerArgs (``_core.server_args_kwargs``)
    spec_fields = {f.name for f in dataclasses.fields(SpecConfig)}
    rows = []
    missing = []
    for flag in _table(release):
        target = SPEC_FIELD.get(flag.field, flag.field)
        reason = _fixed_reason(flag.field, release)
        if target in varied:
            assert target in passed, f"{flag.flag}: drawn but never handed to upstream's ServerArgs (oracle_config)"
            assert reason is None, f"{flag.flag}: drawn, yet ORACLE_FIXED says it is fixed for {release}: {reason}"
            rows.append(f"{flag.flag:36} varied ({target})")
        elif reason is not None:
            rows.append(f"{flag.flag:36} fixed: {reason[:60]}")
        else:
            missing.append(f"{flag.flag} ({flag.field} -> SpecConfig.{target}"
                           f"{'' if target in spec_fields else ', no such field'})")
    assert not missing, (f"sglang {release}: model-read flags the oracle neither varies nor fixes with a reason "
                         f"(draw them in strategies.py or name them in ORACLE_FIXED): {missing}\n" + "\n".join(rows))


def test_the_flags_issue_41_named_are_varied_on_every_release() -> None:
    """The three the issue found fixed, and the context length, on every release's configs."""
    for release in RELEASES:
        varied = _varied(release)
        for field in ("schedule_conservativeness", "max_prefill_tokens", "disable_radix_cache", "context_len"):
            assert field in varied, (release, field)


def test_every_fixed_flag_names_a_model_read_flag() -> None:
    """No stale entry: each ``ORACLE_FIXED`` key is a ``ServerArgs`` field of some release's table."""
    known = {flag.field for rows in TABLES.values() for flag in rows}
    assert set(ORACLE_FIXED) <= known, set(ORACLE_FIXED) - known
