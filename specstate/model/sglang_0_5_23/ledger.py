"""The 0.5.17 family's citations as the 0.5.23 family inherits them (``specstate/citations.py``).

A 0.5.17 citation the 0.5.23 family cites again (same file name and symbol, in its own modules or
``docs/model-0.5.23.md``) was re-read in 0.5.23's source: reviewed. The rest are inherited as
they are; ``tests/test_release_ranges.py`` fails on any that changed between 0.5.17 and a release
of the family's range unless it is listed here:

- ``GONE``: 0.5.17 symbols that 0.5.23 removed, replaced by what the family's overrides cite;
- ``UNREVIEWED``: symbols whose AST (docstrings stripped) differs between 0.5.17 and 0.5.23 and
  that nobody has yet read for a change reaching the modelled state. Each is an open question,
  not a verdict: review one, cite it in the family's docs with what changed, and drop it here.

``(file, symbol)`` pairs, written apart so they are not citations of 0.5.23 themselves.
"""

from __future__ import annotations

__all__ = ["GONE", "UNREVIEWED"]

GONE: tuple[tuple[str, str], ...] = (
    ("radix_cache.py", "RadixCache.cache_finished_req"),
    ("radix_cache.py", "RadixCache.cache_unfinished_req"),
)

UNREVIEWED: tuple[tuple[str, str], ...] = (
)
