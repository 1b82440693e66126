"""The schema of every file specstate reads, validated before anything uses it.

General layout:

- ``_files.py``      reading a path: a regular file (not a directory, FIFO or device), within a
                     size limit, UTF-8, gzip checked; one ``FileFormatError`` per problem.
- ``_messages.py``   a pydantic ``ValidationError`` as one line: file, JSON path (or action /
                     record index), what was expected, what came.
- ``_config.py``     ``SpecConfig`` as a strict schema generated from its dataclass fields and
                     ``specstate.model.config.BOUNDS`` (one table for files and Python callers),
                     in pydantic-core's terms (as the trace's): reading a trace imports no
                     pydantic model layer (``_config.py`` says why).
- ``_trace.py``      a trace file: format, variant, seed, config, actions (a union tagged by
                     ``op``), violation, notes.
- ``_recording.py``  a recorder's ``.jsonl[.gz]``: the engine-neutral loader (``read_recording``,
                     given the schema table), over ``_record_types.py`` (the shared record
                     types) and ``_recording_checks.py``; each release's record models live
                     beside its recorder (``integration/sglang_X_Y_Z/recording.py``).
- ``_workload.py``   a workload file for ``specstate replay --engine sglang``.

Why pydantic (v2) rather than msgspec or hand-written checks: its strict mode refuses every
coercion the old ``int()`` calls made (``"7"``, ``2.7``, ``true``), its errors carry the JSON
path *and the value that came* (msgspec's name only the expected type), bounds and tagged
unions are declarative, and its Rust JSON parser bounds nesting depth (a 1000-deep file is a
clean error, not a ``RecursionError``). Validation happens once, at the boundary; the model
keeps its frozen dataclasses and never sees unchecked data.
"""

from typing import Any

from specstate._lazy import lazy_exports

_FROM = {"_config": ("config_from_data", "config_schema"),
         "_files": ("MAX_RECORDING_BYTES", "MAX_TRACE_BYTES", "read_lines", "read_text"),
         "_messages": ("describe_error",), "_recording": ("Recording", "RecordingSchema", "read_recording", "load_recording", "typed_records"),
         "_trace": ("MAX_ACTIONS", "VARIANT_PATTERN", "TraceData", "action_from_data", "read_trace",
                    "actions_from_data", "parse_trace", "trace_from_data"),
         "_workload": ("parse_workload",)}
#: imported on first use (``specstate/_lazy.py``): reading a trace does not build the recording's models
_lazy_getattr, __dir__ = lazy_exports(__name__, {n: f"specstate.schema.{m}" for m, ns in _FROM.items() for n in ns})
#: names removed (issue 29: reading a trace builds no pydantic model), with what replaces them
_REMOVED = {"config_model": "config_schema (a pydantic-core schema) or config_from_data",
            "TraceFile": "read_trace(path) or parse_trace"}


def __getattr__(name: str) -> Any:  # Any: the checker reads lazily exported names as Any, as it does in the other lazy packages
    if name in _REMOVED:
        raise AttributeError(f"specstate.schema.{name} was removed (the trace and config files are read without "
                             f"pydantic models): use specstate.schema.{_REMOVED[name]}")
    return _lazy_getattr(name)

__all__ = [
    "config_from_data", "config_schema", "MAX_RECORDING_BYTES", "MAX_TRACE_BYTES", "read_lines", "read_text",
    "describe_error", "Recording", "RecordingSchema", "read_recording", "load_recording", "typed_records", "MAX_ACTIONS", "TraceData", "action_from_data", "actions_from_data",
    "parse_trace", "read_trace", "trace_from_data", "VARIANT_PATTERN", "parse_workload",
]
