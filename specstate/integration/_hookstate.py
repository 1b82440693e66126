"""State shared by the patch and the recorder inside the scheduler process (pure Python).

The patch reports which path a ``forward_batch_generation`` call took (``extend``,
``spec``, ``fallback``, ``naive``, ``idle``) and names the phase it is in; the recorder's
hooks on ``ModelRunner.forward`` and the graph runners read the phase stack to label each
forward.
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = ["STATE", "phase", "set_path", "add_event"]


class _State:
    def __init__(self) -> None:
        self.phase_stack: list[str] = []
        #: the record of the forward_batch_generation call in progress, while recording
        self.current: dict[str, Any] | None = None
        self.path: str | None = None
        #: free-form notes from the patch for the current call (e.g. naive sub-form)
        self.notes: dict[str, Any] = {}
        #: the phase stack when an exception first passed through ``phase()``
        self.error_stack: list[str] | None = None

    def reset_call(self) -> None:
        self.phase_stack.clear()
        self.path = None
        self.notes = {}
        self.error_stack = None

    @property
    def phase(self) -> str | None:
        return self.phase_stack[-1] if self.phase_stack else None


STATE = _State()


class phase:
    """``with phase(name):`` -- the named phase is on ``STATE.phase_stack`` for the block; the
    stack at the first exception passing through is kept (``STATE.error_stack``). A class, not
    a ``contextlib`` generator: it runs several times per decode step, recorder on or off."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> None:
        STATE.phase_stack.append(self.name)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        if exc_type is not None and STATE.error_stack is None:
            STATE.error_stack = list(STATE.phase_stack)
        stack = STATE.phase_stack
        if stack and stack[-1] == self.name:
            stack.pop()
        return False


def set_path(path: str, **notes: Any) -> None:
    STATE.path = path
    STATE.notes.update(notes)


def add_event(ev: dict[str, Any]) -> None:
    """Append a sub-event (a forward, a graph decision, a phase snapshot) to the current
    record, if one is being recorded."""
    cur = STATE.current
    if cur is not None:
        ev.setdefault("phase", STATE.phase)
        cur.setdefault("events", []).append(ev)
