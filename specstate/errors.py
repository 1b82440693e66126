"""The one exception hierarchy of specstate, sorted by who is at fault.

::

    SpecStateError                      root of everything specstate raises on purpose
    ├── UsageError                      your input is wrong
    │   ├── InvalidConfig (ValueError)  a SpecConfig that SGLang itself would reject
    │   ├── InvalidAction (ValueError)  an action that does not fit the state it is applied to
    │   ├── UnknownName (KeyError)      a scenario / variant / invariant name that does not exist
    │   ├── VariantLoadError (ImportError)  ``--variant pkg.mod:Obj`` could not be loaded
    │   └── TraceFormatError (ValueError)   a trace file that is not a specstate trace
    ├── EnvironmentProblem              the outside world: a missing optional package, no GPU
    │   └── MissingDependency (ImportError) prints the install command
    └── InternalError (AssertionError)  "this should never happen": a bug in specstate itself

A *modelled crash* (the real worker would raise, e.g. PyTorch's own ``RuntimeError`` from a
shape mismatch) is not an exception of specstate: the model catches it and records it as a
:class:`specstate.model.records.Crash` in the step outcome, so that it can be reported like
an invariant violation.
"""

from __future__ import annotations

__all__ = [
    "SpecStateError",
    "UsageError",
    "InvalidConfig",
    "InvalidAction",
    "UnknownName",
    "VariantLoadError",
    "TraceFormatError",
    "EnvironmentProblem",
    "MissingDependency",
    "InternalError",
]


class SpecStateError(Exception):
    """Root of every error specstate raises on purpose."""


class UsageError(SpecStateError):
    """The caller's input is wrong."""


class InvalidConfig(UsageError, ValueError):
    """A configuration SGLang would reject, or that the model cannot represent."""


class InvalidAction(UsageError, ValueError):
    """An action that does not fit the state it is applied to."""


class UnknownName(UsageError, KeyError):
    """A scenario, variant or invariant name that is not registered."""

    def __str__(self) -> str:  # KeyError quotes its message; we want plain text
        return str(self.args[0]) if self.args else ""


class VariantLoadError(UsageError, ImportError):
    """A user variant given as ``package.module:Object`` could not be loaded."""


class TraceFormatError(UsageError, ValueError):
    """A trace file that is not a valid specstate trace."""


class EnvironmentProblem(SpecStateError):
    """The outside world is not as needed (a missing package, no GPU)."""


class MissingDependency(EnvironmentProblem, ImportError):
    """An optional dependency is missing; the message carries the install command."""

    def __init__(self, package: str, install: str, purpose: str) -> None:
        super().__init__(f"{purpose} needs {package}; install it with: {install}")
        self.package = package
        self.install = install


class InternalError(SpecStateError, AssertionError):
    """This should never happen: a bug in specstate itself."""
