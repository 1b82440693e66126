"""The one exception hierarchy of specstate, sorted by who is at fault.

::

    SpecStateError                      root of everything specstate raises on purpose
    ├── UsageError                      your input is wrong
    │   ├── InvalidArgument (TypeError, ValueError)  a Python caller's argument (``specstate.testing``)
    │   ├── InvalidConfig (ValueError)  a SpecConfig that SGLang itself would reject
    │   ├── InvalidAction (ValueError)  an action that does not fit the state it is applied to
    │   ├── UnknownName (KeyError)      a scenario / variant / invariant name that does not exist
    │   ├── VariantLoadError (ImportError)  ``--variant pkg.mod:Obj`` could not be loaded
    │   ├── VariantFailure              a user's variant raised while the model ran it
    │   ├── NotFailing (ValueError)     ``minimize`` given a trace that passes
    │   └── FileFormatError (ValueError)    a file specstate reads is not what it should be
    │       ├── TraceFormatError            ... a trace file
    │       ├── RecordingFormatError        ... a recorder's .jsonl[.gz]
    │       └── WorkloadFormatError         ... a workload file
    ├── EnvironmentProblem              the outside world: a missing optional package, no GPU
    │   └── MissingDependency (ImportError) prints the install command
    └── InternalError (AssertionError)  "this should never happen": a bug in specstate itself

    SpecstateDeprecationWarning (DeprecationWarning)  a renamed module, name or field: the
                                        message names the replacement (``specstate/_deprecation.py``)

The CLI prints any ``SpecStateError`` but ``InternalError`` as one line and exits 2 (``--debug``
adds the traceback); anything else that escapes is a bug and says where to report it.

A *modelled crash* (the real worker would raise, e.g. PyTorch's own ``RuntimeError`` from a
shape mismatch) is not an exception of specstate: the model catches it and records it as a
:class:`specstate.model.records.Crash` in the step outcome, so that it can be reported like
an invariant violation.
"""

from __future__ import annotations

__all__ = [
    "SpecStateError",
    "UsageError",
    "InvalidArgument",
    "InvalidConfig",
    "InvalidAction",
    "UnknownName",
    "VariantLoadError",
    "VariantFailure",
    "NotFailing",
    "FileFormatError",
    "TraceFormatError",
    "RecordingFormatError",
    "WorkloadFormatError",
    "EnvironmentProblem",
    "MissingDependency",
    "InternalError",
    "Interrupted",
    "SpecstateDeprecationWarning",
]


class SpecStateError(Exception):
    """Root of every error specstate raises on purpose."""


class UsageError(SpecStateError):
    """The caller's input is wrong."""


class InvalidArgument(UsageError, TypeError, ValueError):
    """An argument of a Python entry point (``specstate.testing``, the pytest plugin's fixtures)
    of the wrong type or out of bounds: ``Expected int in [1, 10000000] but got max_examples=0``
    (``specstate.schema._arguments``). A ``TypeError`` and a ``ValueError`` too, so code that
    catches either keeps working."""


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


class VariantFailure(UsageError):
    """A user's variant (``package.module:Object``) raised an exception of its own while the
    model ran one of its operations; the message names the variant, the operation and the step."""


class NotFailing(UsageError, ValueError):
    """A trace handed to ``minimize`` that violates nothing."""


class FileFormatError(UsageError, ValueError):
    """A file specstate reads is missing, unreadable or not valid; the message names the file
    and, where there is one, the JSON path or the action / record index."""


class TraceFormatError(FileFormatError):
    """A trace file that is not a valid specstate trace."""


class RecordingFormatError(FileFormatError):
    """A recording (``.jsonl[.gz]``) that is truncated, corrupt, header-less or not the
    recorder's schema."""


class WorkloadFormatError(FileFormatError):
    """A workload file for the real engine that is not valid."""


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


class SpecstateDeprecationWarning(DeprecationWarning):
    """A renamed module, name or record field was used: it still works, and the message names
    the replacement (``specstate/_deprecation.py``; the public surface: ``specstate.variant``).
    The test suite turns it into an error (``pyproject.toml``), so specstate never uses its own
    old names."""


class Interrupted(KeyboardInterrupt):
    """SIGTERM arrived (the CLI turns it into this; SIGINT is a plain ``KeyboardInterrupt``).
    A ``KeyboardInterrupt``, so that everything treats both signals alike: no ``except
    Exception`` takes it for a failure, Hypothesis stops at once (any other exception raised
    mid-draw reads to it as flaky data generation); whoever holds unsaved results saves them
    and re-raises."""

    def __init__(self, signum: int) -> None:
        import signal

        super().__init__(signal.Signals(signum).name)
        self.signum = signum
