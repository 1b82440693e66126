"""The proof's verdicts against concrete exploration one bound further (slow: ``-m fuzz``)."""

from __future__ import annotations

import pytest

from tests.test_prove import V1_VARIANTS, assert_abstract_verdict_equals_exploration

pytestmark = pytest.mark.fuzz


@pytest.mark.parametrize("variant", V1_VARIANTS)
def test_the_abstract_verdict_equals_concrete_exploration_at_bs_3(variant: str) -> None:
    assert_abstract_verdict_equals_exploration(variant, 3, 7)
