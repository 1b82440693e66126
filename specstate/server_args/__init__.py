"""sglang's server flags, as each release spells them, turned into the config the model runs.

General layout:

- ``_tables.py``   the ``ServerArgs`` fields the model reads, one table per release (0.5.12,
                   0.5.17, 0.5.23): names, types, defaults, choices, each citing ``server_args.py``;
                   ``UNSUPPORTED``: flags that change the batch state in ways not modelled.
- ``_extract.py``  every flag a release declares, read from its ``server_args.py`` by ``ast``
                   into ``flags-<release>.json`` (the flags accepted but not modelled).
- ``_parse.py``    tokens -> ``ParsedFlags`` as the release's argparse parser reads them.
- ``_derive.py``   ``ParsedFlags`` -> ``SpecConfig``: what ``ServerArgs.__post_init__`` does to
                   the modelled fields, the launches sglang refuses, the ones no family models.
- ``_launch.py``   a pasted ``python -m sglang.launch_server ...`` line, ``--server-args "..."``,
                   a ``--config`` file's object (validated by ``specstate.schema._server_flags``).

``parse_launch`` is the one entry point: it returns a :class:`Launch` (the config, the flags
listed as not modelled, the notes on defaults and adjustments) or raises one ``UsageError``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from specstate.model.config import SpecConfig

if TYPE_CHECKING:
    from specstate.model import Variant
from specstate.server_args._derive import derive_config
from specstate.server_args._launch import split_env, split_server_args, strip_launch_prefix, tokens_from_mapping
from specstate.server_args._parse import ParsedFlags, known_flags, parse_tokens
from specstate.server_args._tables import RULES, TABLES, UNSUPPORTED, ModelledFlag, ReleaseRules, release_of_family, rules, table

__all__ = ["Launch", "parse_launch", "launch_tokens", "known_flags", "ParsedFlags", "ModelledFlag", "TABLES",
           "UNSUPPORTED", "release_of_family", "RULES", "ReleaseRules", "rules", "table", "release_of"]


@dataclass(frozen=True)
class Launch:
    release: str  #: the sglang release whose flags were read (``0.5.12``, ``0.5.17``, ``0.5.23``)
    variant: Variant | str
    tokens: tuple[str, ...]  #: the flags, as parsed (prefix of a pasted line stripped)
    config: SpecConfig  #: what the model runs (before the variant's ``config_changes``)
    not_modelled: tuple[str, ...] = ()  #: flags accepted that the model does not read (``coverage`` sorts them)
    notes: tuple[str, ...] = field(default_factory=tuple)  #: defaults sglang fills in, its adjustments
    #: what a verdict on this launch judges and assumes (``_coverage.launch_coverage``): modelled,
    #: not_judged, unaffected, not_examined, assumed, environment
    coverage: Mapping[str, Any] = field(default_factory=dict)

    @property
    def judged(self) -> bool:
        """No flag or setting on the line that changes the modelled state outside the model."""
        return not self.coverage.get("not_judged")

    def describe(self) -> str:
        c = self.config
        thr = "never" if c.disable_batch_threshold is None else str(c.disable_batch_threshold)
        return (f"sglang {self.release}: steps {c.speculative_num_steps}, topk {c.speculative_eagle_topk}, "
                f"draft tokens {c.speculative_num_draft_tokens}, cuda graphs up to bs {c.cuda_graph_max_bs}, "
                f"max running requests {c.max_running_requests}"
                + self._switch(thr))

    def _switch(self, thr: str) -> str:
        """How the launch switches: the v1 seed's threshold, the v2 adaptive controller, or none
        (static speculation on the v2 worker; a patch's own threshold named)."""
        if not rules(self.release).adaptive_v2:
            return f", switch above bs {thr}"
        if self.config.speculative_adaptive:
            return ", adaptive speculation"
        patch = "" if self.config.disable_batch_threshold is None else f" (the patch's switch above bs {thr})"
        return ", static speculation (no --speculative-adaptive: EAGLEWorkerV2 without an adaptive controller)" + patch


def release_of(variant: Variant | str) -> str:
    """The sglang release a variant's family models."""
    from specstate.model import as_variant

    return _release(as_variant(variant).family_name)


def _release(family: str) -> str:
    from specstate.errors import UsageError

    release = release_of_family(family)
    if release is None:
        raise UsageError(f"Expected a variant of a family whose sglang release has a flag table (releases "
                         f"{sorted(RULES)}) but got family {family!r}")
    return release


def launch_tokens(*, after_dashes: Sequence[str] = (), server_args: str | None = None,
                  config_file: Path | str | None = None, variant: Variant | str) -> list[str]:
    """The flags of every source, in order: file, ``--server-args``, after ``--`` (a later value wins)."""
    from specstate.model import as_variant
    from specstate.schema._server_flags import load_flags_file

    tokens: list[str] = []
    env: list[str] = []
    if config_file is not None:
        v = as_variant(variant)
        flags = known_flags(release_of(v), v.all_flags())
        tokens += tokens_from_mapping(load_flags_file(config_file, flags))
    for words in ([] if server_args is None else split_server_args(server_args), list(after_dashes)):
        head, flags_of = split_env(strip_launch_prefix(words)) if words else ([], [])
        env += head
        tokens += flags_of
    return env + tokens


def parse_launch(tokens: Sequence[str], variant: "str | Variant") -> Launch:
    """The launch ``tokens`` as sglang (the variant's family's release, plus its patch) reads them
    (``variant``: a name, or a ``Variant`` object such as a test's mutation)."""
    from specstate.model import as_variant

    from specstate.server_args._coverage import env_values, launch_coverage

    v = as_variant(variant)
    release = _release(v.family_name)
    patch = v.all_flags()
    env, flags = split_env(list(tokens))
    parsed = parse_tokens(flags, release, patch)
    parsed.env = env_values(env)
    derived = derive_config(parsed, patch)
    return Launch(release, variant if isinstance(variant, str) else v.name, tuple(tokens), derived.config,
                  tuple(parsed.not_modelled), tuple(derived.notes), launch_coverage(parsed, derived.config, parsed.env))
