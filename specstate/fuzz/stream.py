"""One stream per seed: what Hypothesis draws for specstate does not depend on which modules
the process happens to have imported.

Hypothesis (6.131 and later) mixes literals mined from every *local* module in ``sys.modules``
into about one draw in twenty (``hypothesis/internal/conjecture/providers.py``:
``_get_local_constants``, ``HypothesisProvider._maybe_draw_constant``). Under ``derandomize``
that makes the stream a function of the import set: ``pytest tests`` collects every test
module (and through them most of specstate) before the first fuzz test runs, so the same
fuzz test drew other workloads in the full suite than alone, and a witness it reached alone
was missed in CI. A seed or a ``ci`` run must name one stream, whoever imported what.

:func:`import_independent_draws` pins the local pool to empty while specstate runs Hypothesis
(``fuzz.runner.fuzz_variant``, ``integration.oracle_fuzz.fuzz``): Hypothesis's own global constants
(``GLOBAL_CONSTANTS``: 0, -1, NaN, boundary values) still come, the mined ones do not. On a
Hypothesis without that pool the context does nothing. Re-entrant; process-wide while active
(specstate runs Hypothesis on one thread).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

__all__ = ["import_independent_draws"]

_LOCK = threading.Lock()
_depth = 0
_saved: object = None


def _providers():  # noqa: ANN202  (Hypothesis's internal module, or ``None``)
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover - a Hypothesis without the module
        return None
    if not (hasattr(providers, "_get_local_constants") and hasattr(providers, "Constants")
            and hasattr(providers, "CONSTANTS_CACHE")):
        return None
    return providers


def _clear(providers) -> None:  # noqa: ANN001
    cache = providers.CONSTANTS_CACHE
    getattr(cache, "cache", cache).clear()  # a LRUCache wraps its dict in ``.cache``


@contextlib.contextmanager
def import_independent_draws() -> Iterator[None]:
    """While active, Hypothesis draws no literal mined from the imported modules (module doc)."""
    global _depth, _saved
    providers = _providers()
    if providers is None:
        yield
        return
    with _LOCK:
        if _depth == 0:
            empty = providers.Constants()
            _saved = providers._get_local_constants
            providers._get_local_constants = lambda: empty
            _clear(providers)  # the cache holds (global, local) pools per choice kind
        _depth += 1
    try:
        yield
    finally:
        with _LOCK:
            _depth -= 1
            if _depth == 0:
                providers._get_local_constants = _saved
                _saved = None
                _clear(providers)
