"""Variants that are wrong in the ways users' variants go wrong (the bad-input tests)."""


class WrongTypeConfig:
    base = "fixed-threshold"
    config_changes = {"speculative_num_steps": "3"}


class UnknownConfig:
    base = "fixed-threshold"
    config_changes = {"bogus_field": 1}


class ConfigNotADict:
    base = "fixed-threshold"
    config_changes = [("speculative_num_steps", 3)]


class OverridesNothing:
    """overrides no operation and changes no config"""


class RaisesAtRun:
    base = "fixed-threshold"

    def decide_speculation(ops, tx, batch):  # noqa: N805, ANN001, ANN201
        return 1 / 0


NotAClass = 42


class ExitsAtRun:
    base = "fixed-threshold"

    def decide_speculation(ops, tx, batch):  # noqa: N805, ANN001, ANN201
        import sys

        sys.exit(3)


class V1BaseClaimsV2:
    """built on a v1 variant but claims the v2 family"""

    base = "fixed-threshold"
    family = "sglang-0.5.17"

    def decide_speculation(ops, tx, batch):  # noqa: N805, ANN001, ANN201
        return True


class SaysYes:
    base = "fixed-threshold"

    def decide_speculation(ops, tx, batch):  # noqa: N805, ANN001, ANN201
        return "yes"


class RaisesValueError:
    base = "fixed-threshold"

    def decide_speculation(ops, tx, batch):  # noqa: N805, ANN001, ANN201
        if batch.batch_size > 1:
            raise ValueError("my own check failed")
        return True
