"""Moved: sglang 0.5.17's recording models live beside its recorder,
``specstate/integration/sglang_0_5_17/recording.py`` (this path warns and gives that module)."""

from specstate._deprecation import moved_module

moved_module(__name__, "specstate.integration.sglang_0_5_17.recording")
