"""What the shared commands ask this release about a launch (``model/releases.py::Release.module("launch")``;
``specstate/_engine_option.py::own_model_release``, ``specstate/cli/vllm.py``): an engine with a model of
its own answers here instead of being named by the shared code.

- ``is_serve(argv)``: whether the line after ``--`` is this engine's launch (``vllm serve ...``);
- ``parse(argv)``: the line as a :class:`~specstate.model.vllm_0_34_0.flags.VllmLaunch`;
- ``SERVE``: how such a line starts, for the usage messages;
- ``DEFAULT_LAUNCH`` / ``default_launch()``: what ``run`` and ``fuzz`` judge without a line (the issue's,
  vllm#49548's shape);
- ``DEFAULT_VARIANT`` and ``variant_names()``: the variant taken when none is given (``variants``'),
  and the built-in names that select this release (``--variant dsd-corrected``).
"""

from __future__ import annotations

from dataclasses import replace

from specstate.model.vllm_0_34_0.flags import VllmLaunch, is_vllm_serve, parse_vllm_serve
from specstate.model.vllm_0_34_0.variants import DEFAULT_VARIANT, vllm_variant_names

__all__ = ["SERVE", "is_serve", "parse", "DEFAULT_LAUNCH", "default_launch", "DEFAULT_VARIANT", "variant_names"]

#: how a launch line of this engine starts (the usage messages: "expected a '... ' line after --")
SERVE = "vllm serve MODEL ..."
#: the launch ``run`` and ``fuzz`` use when no ``vllm serve`` line is given: the issue's (vllm#49548's shape)
DEFAULT_LAUNCH = ("vllm", "serve", "M", "--speculative-config",
                  '{"method": "eagle3", "num_speculative_tokens": 3, '
                  '"num_speculative_tokens_per_batch_size": [[1, 4, 3], [5, 4096, 0]]}')

is_serve = is_vllm_serve
parse = parse_vllm_serve


def default_launch() -> VllmLaunch:
    """``DEFAULT_LAUNCH`` parsed: what ``run`` / ``fuzz --engine vllm-0.34.0`` judge without a line."""
    launch = parse_vllm_serve(DEFAULT_LAUNCH)
    return replace(launch, assumed=({"setting": "launch", "value": " ".join(DEFAULT_LAUNCH[:4]) + " '...'",
                                     "why": "no 'vllm serve ...' line after --: the issue's (vllm#49548) is judged"},
                                    *launch.assumed))


def variant_names() -> list[str]:
    """The built-in variants' names (``variants.VARIANTS``)."""
    return vllm_variant_names()
