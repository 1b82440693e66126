"""The ``ServerArgs`` fields the model reads, one table per release, as that release spells them.

Reads: from each release's folder (``launch.py``: ``FLAGS``, ``RULES``; found by folder name,
``Release`` (``model/releases.py``); the row shape ``model/launch_flags.py``), every flag whose value reaches a ``SpecConfig`` field (or
decides whether the launch is one the model covers): its flag and aliases, the ``ServerArgs``
field, the value type (the ``type=`` / ``action=`` that release's ``add_cli_args`` gives it),
the ``ServerArgs`` default, literal choices, and the ``file::symbol`` it is read from.
``tests/test_server_args_source.py`` parses each release's ``server_args.py`` (``ast``) and checks
names, defaults, types and choices against these rows.

Value types: ``int`` / ``float`` / ``str`` (argparse ``type=``), ``human_readable_int``
(``utils/common.py::human_readable_int``: ``16k``, ``1Mi``), ``bool`` (``action="store_true"``),
``int+`` (``type=int, nargs="+"``).

Flags a release declares that are not in its table change nothing the model holds: they are
accepted and listed once as "not modelled" (every one is in ``flags-<release>.json``, read from
the release's ``add_cli_args`` by ``_extract.py``), except the few in ``UNSUPPORTED``, which change
the batch state in ways the model does not cover and are refused.

``RULES``: what differs between releases in how a launch becomes a config (``ReleaseRules``),
read by ``_derive.py`` as properties, never as tests of the release string.
"""

from __future__ import annotations

import importlib

from specstate.model.launch_flags import DeploymentRules, ModelledFlag, ReleaseRules

__all__ = ["ModelledFlag", "ReleaseRules", "DeploymentRules", "TABLES", "RULES", "DEPLOYMENTS", "deployment", "release_of_family", "UNSUPPORTED", "table", "rules"]


def _launch_parts() -> tuple[dict[str, tuple[ModelledFlag, ...]], dict[str, ReleaseRules], dict[str, DeploymentRules]]:
    """Every release's ``FLAGS``, ``RULES`` and ``DEPLOYMENT``, from its folder's ``launch`` module (found by
    folder name: ``Release`` (``model/releases.py``)), the oldest release first."""
    from specstate.model.releases import releases

    tables: dict[str, tuple[ModelledFlag, ...]] = {}
    rules_: dict[str, ReleaseRules] = {}
    deployments: dict[str, DeploymentRules] = {}
    for r in releases():
        where = r.module("launch")
        if where is None:
            continue
        module = importlib.import_module(where)
        if hasattr(module, "FLAGS"):
            tables[r.version] = module.FLAGS
        if hasattr(module, "RULES"):
            rules_[r.version] = module.RULES
        if hasattr(module, "DEPLOYMENT"):
            deployments[r.version] = module.DEPLOYMENT
    return tables, rules_, deployments


TABLES, RULES, DEPLOYMENTS = _launch_parts()


def release_of_family(family: str) -> str | None:
    """The release whose launch flags a variant of ``family`` takes: the family's own
    (``Family.source_release``) where it has a table here, else its base's (a family derived from
    a release, as a test-only one); ``None``: none."""
    from specstate.model.families import get_family

    name: str | None = family
    while name is not None:
        fam = get_family(name)
        if fam.source_release in TABLES:
            return fam.source_release
        name = fam.base
    return None


def deployment(release: str) -> DeploymentRules:
    """What ``release`` derives from the model and the GPU (its ``launch.DEPLOYMENT``)."""
    from specstate.errors import UsageError

    if release not in DEPLOYMENTS:
        raise UsageError(f"Expected an sglang release from {sorted(DEPLOYMENTS)} but got {release!r}")
    return DEPLOYMENTS[release]


def rules(release: str) -> ReleaseRules:
    from specstate.errors import UsageError

    if release not in RULES:
        raise UsageError(f"Expected an sglang release from {sorted(RULES)} but got {release!r}")
    return RULES[release]


#: declared by the release, change the batch the model holds, not modelled: refused (field -> why)
UNSUPPORTED = {
    "disable_cuda_graph": "the model replays every decode through its CUDA-graph runners",
    "disable_cuda_graph_padding": "the model pads every batch to its capture size",
    "enable_dp_attention": "DP attention splits the batch across ranks",
    "enable_two_batch_overlap": "two-batch overlap splits the batch",
}


def table(release: str) -> tuple[ModelledFlag, ...]:
    from specstate.errors import UsageError

    if release not in TABLES:
        raise UsageError(f"Expected an sglang release from {sorted(TABLES)} but got {release!r}")
    return TABLES[release]
