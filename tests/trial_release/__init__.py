"""A trial release folder (issue 26): a test-only engine family derived from sglang 0.5.17 that
overrides exactly one operation, written only against the public surface ``specstate.variant``
(``family.py``), registered by importing it. ``tests/test_trial_release.py`` runs it through
run, fuzz, explore, graph and conform: what a new release needs besides its own folder."""
