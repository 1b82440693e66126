"""The releases the oracle runs: one line per release module (``sglang_0_5_12.py``, ...), each
declaring its ``ORACLE`` (``_core.OracleRelease``: the release, the variant it is compared with,
whether its loop is the overlap one). A new release adds its module and one line here; ``wheels.py``,
``differential.py`` and ``strategies.py`` read the releases from here. Importing this imports no
sglang (the release modules import it inside their functions).
"""

from __future__ import annotations

from types import ModuleType

from specstate.oracle import sglang_0_5_12, sglang_0_5_17, sglang_0_5_23

__all__ = ["MODULES", "RELEASES", "VARIANTS", "is_overlap"]

#: every release module, the oldest first
MODULES: tuple[ModuleType, ...] = (sglang_0_5_12, sglang_0_5_17, sglang_0_5_23)
RELEASES: tuple[str, ...] = tuple(m.ORACLE.release for m in MODULES)
#: the model variant each release is compared with
VARIANTS: dict[str, str] = {m.ORACLE.release: m.ORACLE.variant for m in MODULES}
_OVERLAP = {m.ORACLE.release for m in MODULES if m.ORACLE.overlap}


def is_overlap(release: str) -> bool:
    """Does ``release``'s oracle run the overlap loop (the v2 worker)?"""
    return release in _OVERLAP
