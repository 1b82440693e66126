"""Deprecated: moved to ``specstate.model.sglang_0_5_12.worker`` (one folder per engine release);
this path still imports, as that very module, with a ``SpecstateDeprecationWarning``."""

from specstate._deprecation import moved_module

moved_module(__name__, "specstate.model.sglang_0_5_12.worker")
