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
- ``_hardware.py`` ``--gpu NAME`` and ``--model-config PATH``: the GPU's memory and compute
                   capability, the ``config.json`` fields sglang reads (``Deployment``).
- ``_settings.py`` what sglang derives from them per release (backend, page size, context
                   length, chunk and graph defaults, the draft shape), each with its source.
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
from specstate.server_args._derive import derive_config, page_modelled
from specstate.server_args._hardware import GPUS, Deployment, Gpu, ModelFacts, gpu_named, read_model_config
from specstate.server_args._settings import Setting, Settings
from specstate.server_args._launch import split_env, split_server_args, strip_launch_prefix, tokens_from_mapping
from specstate.server_args._parse import ParsedFlags, known_flags, parse_tokens
from specstate.server_args._tables import RULES, TABLES, UNSUPPORTED, ModelledFlag, ReleaseRules, release_of_family, rules, table

__all__ = ["Launch", "parse_launch", "launch_tokens", "known_flags", "ParsedFlags", "ModelledFlag", "TABLES",
           "UNSUPPORTED", "release_of_family", "RULES", "ReleaseRules", "rules", "table", "release_of", "Deployment",
           "deployment_of", "GPUS", "Gpu", "ModelFacts", "Setting", "Settings", "page_modelled", "gpu_named",
           "read_model_config"]


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
    #: what sglang derives for it from the model and GPU (``--model-config``, ``--gpu``), with sources
    settings: Settings = field(default_factory=Settings)

    @property
    def judged(self) -> bool:
        """No flag or setting on the line that changes the modelled state outside the model."""
        return not self.coverage.get("not_judged")

    def describe(self) -> str:
        c = self.config
        thr = "never" if c.disable_batch_threshold is None else str(c.disable_batch_threshold)
        on = self.settings.deployment
        where = "".join(f" on {x}" for x in (on.model and on.model.architecture, on.gpu and on.gpu.name) if x)
        return (f"sglang {self.release}{where}: steps {c.speculative_num_steps}, topk {c.speculative_eagle_topk}, "
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


def deployment_of(model_config: Path | str | None = None, gpu: str | None = None) -> Deployment | None:
    """The ``Deployment`` of ``--model-config PATH`` and ``--gpu NAME`` (``None`` when neither is given)."""
    if model_config is None and gpu is None:
        return None
    return Deployment(None if model_config is None else read_model_config(model_config),
                      None if gpu is None else gpu_named(gpu))


def _with_model_path(deployment: Deployment | None, model_path: str | None) -> Deployment | None:
    """No ``--model-config``, but ``--model-path`` is a local folder holding a ``config.json``: the
    one sglang reads (``ModelConfig``), so the derivation reads it too (a Hub id is not fetched)."""
    if (deployment is not None and deployment.model is not None) or not model_path:
        return deployment
    folder = Path(model_path).expanduser()
    if not (folder / "config.json").is_file():
        return deployment
    return Deployment(read_model_config(folder), deployment.gpu if deployment is not None else None)


def parse_launch(tokens: Sequence[str], variant: "str | Variant", deployment: Deployment | None = None, *,
                 read_model_path: bool = False) -> Launch:
    """The launch ``tokens`` as sglang (the variant's family's release, plus its patch) reads them
    (``variant``: a name, or a ``Variant`` object such as a test's mutation) on ``deployment`` (the
    model's ``config.json`` and the GPU, ``deployment_of``; ``None``: an H200's defaults assumed).
    ``read_model_path`` (the CLI, ``testing.check``): a local ``--model-path`` folder's ``config.json``
    stands for ``--model-config`` when none is given."""
    from specstate.model import as_variant

    from specstate.server_args._coverage import env_values, launch_coverage

    v = as_variant(variant)
    release = _release(v.family_name)
    patch = v.all_flags()
    env, flags = split_env(list(tokens))
    parsed = parse_tokens(flags, release, patch)
    parsed.env = env_values(env)
    if read_model_path:
        deployment = _with_model_path(deployment, parsed.values.get("model_path"))
    derived = derive_config(parsed, patch, deployment)
    return Launch(release, variant if isinstance(variant, str) else v.name, tuple(tokens), derived.config,
                  tuple(parsed.not_modelled), tuple(derived.notes),
                  launch_coverage(parsed, derived.config, parsed.env, derived), derived.settings)
