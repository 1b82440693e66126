"""``--engine``: run a command on an engine family's default variant (``specstate.model.families``).

``specstate run --engine sglang-0.5.17`` runs ``upstream-adaptive``; ``--variant`` names a variant
directly (its own family); both together must agree. The choices are listed here, not read from
the registry, so building the parser imports nothing heavy.
"""

from __future__ import annotations

import argparse

from specstate.errors import UsageError

__all__ = ["ENGINES", "add_engine_option", "resolve_variant"]

ENGINES = ("sglang-0.5.12", "sglang-0.5.17", "sglang-0.5.23")


def add_engine_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", choices=ENGINES, default=None,
                   help="engine family: its default variant unless --variant is given "
                        "(sglang-0.5.12: fixed-threshold; sglang-0.5.17: upstream-adaptive; sglang-0.5.23: upstream-v23)")


def resolve_variant(args: argparse.Namespace, fallback: str | None) -> str | None:
    """``--variant``, else ``--engine``'s default variant, else ``fallback``; sets ``args.variant``."""
    engine = getattr(args, "engine", None)
    variant = args.variant
    if engine is not None:
        from specstate.model import get_variant
        from specstate.model.families import get_family

        family = get_family(engine)
        if variant is None:
            variant = family.default_variant
        elif get_variant(variant).family_name != engine:
            raise UsageError(f"Expected a variant of --engine {engine} but got --variant {variant} "
                                  f"(family {get_variant(variant).family_name})")
    args.variant = variant if variant is not None else fallback
    return args.variant
