"""What one sglang release brings to the engine-neutral integration core: a ``ReleaseAdapter``.

The core (``conform.py``: load, pair, check; ``sglang_driver.py``: engine arguments, the
environment, the recording's counts; ``sglang_plugin.py``: the hooks) never names a release: it
asks the catalog (``catalog.py``) for the adapter of a family or of a recording, and calls what
the adapter names. Each release folder (``sglang_0_5_12/adapter.py``, ``sglang_0_5_17/adapter.py``)
declares one adapter and nothing else; the adapter names its parts as ``"module:function"`` so
that reading the catalog imports no recorder, model or sglang code (the plugin reads it inside
every sglang process).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["ReleaseAdapter"]


@dataclass(frozen=True)
class ReleaseAdapter:
    """One sglang release, as the integration core sees it (every ``*_fn`` is ``"module:function"``)."""

    #: the model family that models this release (``specstate.model`` family name)
    family: str
    #: the recording schemas its recorder wrote (``specstate.schema._recording_checks.SCHEMAS``)
    schemas: tuple[str, ...]
    #: the variant a recording of this release is compared with when none is named
    default_variant: str
    #: ``(path, records, variant, threshold) -> report``: conformance of one loaded recording
    check_fn: str
    #: ``(records) -> counts``: what the driver's summary shows of one recording
    counts_fn: str
    #: ``(overrides) -> Engine kwargs``: the engine arguments seen working on the H200
    engine_kwargs_fn: str
    #: ``() -> env``: what the engine's processes need in their environment besides the driver's
    engine_env_fn: str
    #: ``(registry, kinds) -> None``: the sglang plugin's hooks for this release
    register_fn: str
    #: ``(config, actions, variant) -> (observations, violations)``: model actions through this
    #: release's conformance backend (the oracle's differential runs)
    observe_fn: str = ""
    #: the ``--patch`` the driver runs this release with when none is named (``None``: the driver's default)
    patch: str | None = None
    #: the variant that models a run of this release without a patch (``start_prediction``); ``None``: none
    engine_variant: str | None = None

    def part(self, name: str) -> Callable[..., Any]:
        """The function a ``*_fn`` field names, imported now."""
        mod, _, attr = getattr(self, f"{name}_fn").partition(":")
        return getattr(importlib.import_module(mod), attr)  # type: ignore[no-any-return]

    def check(self, path: Any, records: Any, variant: str, threshold: int | None) -> dict[str, Any]:
        return self.part("check")(path, records, variant, threshold)  # type: ignore[no-any-return]

    def counts(self, records: Any) -> dict[str, Any]:
        return self.part("counts")(records)  # type: ignore[no-any-return]

    def engine_kwargs(self, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.part("engine_kwargs")(overrides)  # type: ignore[no-any-return]

    def engine_env(self) -> dict[str, str]:
        return self.part("engine_env")()  # type: ignore[no-any-return]

    def observe(self, config: Any, actions: Any, variant: Any) -> tuple[list[Any], list[Any]]:
        return self.part("observe")(config, actions, variant)  # type: ignore[no-any-return]

    def register(self, registry: Any, kinds: Any) -> None:
        self.part("register")(registry, kinds)
