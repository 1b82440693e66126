"""What one sglang release brings to the engine-neutral integration core: a ``ReleaseAdapter``.

The core (``conform.py``: load, pair, check; ``sglang_driver.py``: engine arguments, the
environment, the recording's counts; ``sglang_plugin.py``: the hooks) never names a release: it
asks the catalog (``catalog.py``) for the adapter of a family or of a recording, and calls what
the adapter names. Each release folder (``sglang_0_5_12/adapter.py``, ``sglang_0_5_17/adapter.py``)
declares one adapter and nothing else; its parts are found by name when first used, so that
reading the catalog imports no recorder, model or sglang code (the plugin reads it inside every
sglang process).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

__all__ = ["ReleaseAdapter"]


#: where a part lives in the release folder unless the adapter names it elsewhere
_DEFAULT_PARTS = {
    "conformance": "conformance:CONFORMANCE", "counts": "conformance:recording_counts",
    "engine_kwargs": "engine:engine_kwargs", "engine_env": "engine:engine_env", "register": "plugin:register",
    "record_models": "recording:model_for",
}


@dataclass(frozen=True)
class ReleaseAdapter:
    """One sglang release, as the integration core sees it. Its parts are functions of its folder
    (``package``) by convention (``_DEFAULT_PARTS``); ``parts`` names any kept elsewhere as
    ``{"part": "module:function"}``:

    - ``conformance``: what it brings to the shared route from a recording to a comparison
      (``integration/walk.py``: a ``walk.Conformance``, ``CONFORMANCE`` of its ``conformance.py``),
      which ``check`` (conformance of one loaded recording), ``observe`` (model actions through its
      model side: the oracle's differential runs) and ``workload`` (a loaded recording as the
      workload the model replays: ``graph --from-recording``) walk;
    - ``counts(records) -> counts``: what the driver's summary shows of one recording;
    - ``engine_kwargs(overrides) -> kwargs`` and ``engine_env() -> env``: the engine arguments seen
      working on the H200 and what its processes need in their environment;
    - ``register(registry, kinds)``: the sglang plugin's hooks for this release;
    - ``record_models`` (``model_for(record) -> {ev: pydantic model}``): the models its recordings'
      lines are validated by (``recording.py``; the loader is ``specstate.schema.read_recording``).
    """

    #: the model family that models this release (``specstate.model`` family name)
    family: str
    #: its folder, ``specstate.integration.sglang_X_Y_Z``
    package: str
    #: the recording schemas its recorder wrote (``catalog.RECORDING_SCHEMAS``)
    schemas: tuple[str, ...]
    #: the variant a recording of this release is compared with when none is named
    default_variant: str
    #: parts kept outside the folder: ``{"part": "module:function"}``
    parts: Mapping[str, str] = field(default_factory=dict)
    #: the ``--patch`` the driver runs this release with (``None``: the one asked for)
    patch: str | None = None
    #: the variant that models a run of this release without a patch (``start_prediction``); ``None``: none
    engine_variant: str | None = None
    #: what its recordings' header keeps (``schema/_recording_checks.py``): header fields equal to
    #: their ``server_args`` namesakes, ``(header field, server_args field)``
    header_agrees: tuple[tuple[str, str], ...] = ()
    adaptive_header: bool = False  #: its header may embed an adaptive config, checked for sglang's shape
    #: its conformance check takes a switching threshold (``conform --threshold``); ``False``: its
    #: recordings carry their own (0.5.17's adaptive config)
    takes_threshold: bool = True
    #: its recorder's counter and so the records' order: ``iter`` (a ``post`` follows its forward's
    #: ``fbg``) or ``loop`` (the overlap loop: a loop's lines follow its ``loop`` line)
    record_counter: str = "iter"
    #: the driver's ``--patch`` values its plugin installs besides its ``patch`` (0.5.17: the switch on
    #: ``EAGLEWorkerV2``, ``sglang_0_5_17/switch_patch.py``); the driver refuses them for another release
    patches: tuple[str, ...] = ()

    def part(self, name: str) -> Callable[..., Any]:
        """The function of part ``name``, imported now."""
        return self._find(name)

    def _find(self, name: str) -> Any:
        where = self.parts.get(name) or f"{self.package}.{_DEFAULT_PARTS[name]}"
        mod, _, attr = where.partition(":")
        return getattr(importlib.import_module(mod), attr)

    def conformance(self) -> Any:
        """What this release brings to the shared route (a ``walk.Conformance``), imported now
        (by name, as every part: the route sits above the catalog, ``walk.py`` -> ``compare.py``)."""
        return self._find("conformance")

    def check(self, path: Any, records: Any, variant: str, threshold: int | None) -> dict[str, Any]:
        return self.conformance().check(path, records, variant, threshold)

    def observe(self, config: Any, actions: Any, variant: Any) -> tuple[list[Any], list[Any]]:
        return self.conformance().observe(config, actions, variant)

    def counts(self, records: Any) -> dict[str, Any]:
        return self.part("counts")(records)

    def engine_kwargs(self, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.part("engine_kwargs")(overrides)

    def engine_env(self) -> dict[str, str]:
        return self.part("engine_env")()

    def register(self, registry: Any, kinds: Any) -> None:
        self.part("register")(registry, kinds)

    def workload(self, path: Any, threshold: int | None, records: Any) -> tuple[Any, list[Any], str]:
        return self.conformance().workload(path, records, threshold)

    def record_models(self) -> Callable[[dict[str, Any]], Mapping[str, Any]]:
        """The models for one record of this release's recordings (``specstate.schema.RecordingSchema``)."""
        return self.part("record_models")
