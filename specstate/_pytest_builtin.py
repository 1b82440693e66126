"""The test the pytest plugin adds for ``--specstate-variant`` when no collected test takes the
``specstate_variant`` fixture: a repository with only a variant module runs
``pytest -m fuzz --specstate-variant mypatch:Variant``."""

from __future__ import annotations

from typing import Callable

import pytest


@pytest.mark.fuzz
def test_specstate_variant_fuzz(specstate_variant: str, specstate_fuzz: Callable[..., object]) -> None:
    """The fuzzer finds no violation of ``specstate_variant`` and reaches every wanted witness."""
    specstate_fuzz(specstate_variant)
