"""The launch-flag tables (``specstate/server_args``) against each release's own source: every
modelled flag's names, type, default and choices as sglang 0.5.12's, 0.5.17's and 0.5.23's
``server_args.py`` declare them (0.5.23: in the namespace classes of ``arg_groups/fields/``) (``ast``, no import of sglang), the shipped list of every flag
(``flags-<release>.json``) as ``_extract.py`` reads it from that source, and the rules
``_derive.py`` mirrors, in the functions it names."""

from __future__ import annotations

import ast
import functools
import json
from pathlib import Path

import pytest

from specstate.server_args import TABLES, UNSUPPORTED
from specstate.server_args._extract import extract_flags_from, namespace_classes
from tests.sglang_source import sglang_source, symbols_of

pytestmark = pytest.mark.sglang_source

RELEASES = sorted(TABLES)
PACKAGE = Path(__file__).resolve().parents[1] / "specstate" / "server_args"


def _source(release: str) -> str:
    return (sglang_source(release) / "server_args.py").read_text()


@functools.cache
def _flags(release: str) -> list[dict]:  # type: ignore[type-arg]
    return extract_flags_from(sglang_source(release) / "server_args.py")


@functools.cache
def _field_defaults(release: str) -> dict[str, object]:
    cls = next(n for n in ast.parse(_source(release)).body if isinstance(n, ast.ClassDef) and n.name == "ServerArgs")
    out: dict[str, object] = {}
    for s in [s for c in [cls, *namespace_classes(sglang_source(release) / "server_args.py")] for s in c.body]:
        if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.value is not None:
            try:
                out[s.target.id] = ast.literal_eval(s.value)
            except ValueError:
                out[s.target.id] = ast.unparse(s.value)
    return out


def _by_name(release: str) -> dict[str, dict]:  # type: ignore[type-arg]
    return {n: e for e in _flags(release) for n in e["names"]}


@pytest.mark.parametrize("release", RELEASES)
def test_the_shipped_flag_list_is_the_releases(release: str) -> None:
    shipped = json.loads((PACKAGE / f"flags-{release}.json").read_text())["flags"]
    assert shipped == _flags(release)
    assert len(shipped) > 300  # every flag of the release, not a sample


_ROWS = [(r, m) for r in RELEASES for m in TABLES[r]]


@pytest.mark.parametrize("release,row", _ROWS, ids=[f"{r}{m.flag}" for r, m in _ROWS])
def test_a_modelled_flag_is_spelled_as_the_release_spells_it(release: str, row) -> None:  # noqa: ANN001
    flags = _by_name(release)
    for name in row.names:
        assert name in flags, f"sglang {release} declares no {name}"
        assert flags[name]["dest"] == row.field, f"{name} stores into {flags[name]['dest']}, not {row.field}"
    e = flags[row.flag]
    if row.type == "bool":
        assert (e["arity"], e["action"]) == (0, "store_true"), e
    elif row.type == "int+":
        assert (e["arity"], e["type"]) == ("+", "int"), e
    else:
        assert (e["arity"], e["type"]) == (1, row.type), e
    assert e["choices"] == (list(row.choices) if row.choices else None)
    defaults = _field_defaults(release)
    assert row.field in defaults, f"ServerArgs of {release} has no field {row.field}"
    assert defaults[row.field] == row.default, f"{row.field}: sglang {release} default {defaults[row.field]!r}"


@pytest.mark.parametrize("release", RELEASES)
def test_the_refused_flags_are_the_releases_switches(release: str) -> None:
    flags = {e["dest"]: e for e in _flags(release)}
    for dest in UNSUPPORTED:
        assert dest in flags and flags[dest]["arity"] == 0, f"{dest} in sglang {release}"
    from specstate.server_args import rules

    for dest, value in rules(release).decode_graph_off:  # a switch, or one of the flag's choices
        assert dest in flags and (flags[dest]["arity"] == 0 if value is True else value in flags[dest]["choices"])


def _function(tree: ast.AST, name: str) -> ast.AST:
    return next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)


def test_the_0_5_12_rules_derive_mirrors() -> None:
    src = _source("0.5.12")
    tree = ast.parse(src)
    spec = ast.get_source_segment(src, _function(tree, "_handle_speculative_decoding"))
    assert "self.max_running_requests = 48" in spec
    assert "self.speculative_num_draft_tokens = self.speculative_num_steps + 1" in spec
    assert "self.enable_mixed_chunk = False" in spec and "spec v2 currently only supports topk = 1" in spec
    gpu = ast.get_source_segment(src, _function(tree, "_handle_gpu_memory_settings"))
    h200 = gpu[gpu.index("H20, H200"):gpu.index("B200")]
    assert "self.chunked_prefill_size = 8192" in h200 and "= 256" in h200 and "= 512" in h200
    assert "self.cuda_graph_max_bs = max(self.cuda_graph_bs)" in gpu
    check = ast.get_source_segment(src, _function(tree, "check_server_args"))
    assert "self.schedule_conservativeness >= 0" in check
    auto = ast.get_source_segment(src, _function(tree, "auto_choose_speculative_params"))
    assert "return (5, 4, 8)" in auto and "return (3, 1, 4)" in auto
    env = (sglang_source("0.5.12") / "environ.py").read_text()
    assert "SGLANG_ENABLE_SPEC_V2 = EnvBool(True)" in env


def test_the_0_5_17_rules_derive_mirrors() -> None:
    hook = sglang_source("0.5.17") / "arg_groups" / "speculative_hook.py"
    names = symbols_of(hook)
    assert {"_handle_eagle_family", "_init_adaptive_speculative_params"} <= names
    src = hook.read_text()
    eagle = ast.get_source_segment(src, _function(ast.parse(src), "_handle_eagle_family"))
    assert "server_args.max_running_requests = 48" in eagle and "server_args.enable_mixed_chunk = False" in eagle
    init = ast.get_source_segment(src, _function(ast.parse(src), "_init_adaptive_speculative_params"))
    assert "server_args.speculative_eagle_topk = 1" in init
    assert "candidate_steps[len(candidate_steps) // 2]" in init and "is not in the adaptive config" in init


def test_0_5_23_declares_its_fields_in_namespace_classes() -> None:
    """0.5.23's ``ServerArgs`` body declares no flag field: they come from ``_INPUT_NAMESPACES``."""
    path = sglang_source("0.5.23") / "server_args.py"
    names = [c.name for c in namespace_classes(path)]
    assert {"Spec", "Schedule", "Memory", "Model", "ExecGraph"} <= set(names) and len(names) > 15
    from specstate.server_args._extract import extract_flags

    alone = {e["dest"] for e in extract_flags(path.read_text())}
    assert "speculative_num_steps" not in alone and "speculative_num_steps" in {e["dest"] for e in _flags("0.5.23")}
    assert not namespace_classes(sglang_source("0.5.17") / "server_args.py")


def test_a_0_5_23_row_cites_the_namespace_class_that_declares_it() -> None:
    fields = sglang_source("0.5.23") / "arg_groups" / "fields"
    for row in TABLES["0.5.23"]:
        file, symbol = row.cite.split("::")
        cls_name, field = symbol.split(".")
        tree = ast.parse((fields / Path(file).name).read_text())
        cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls_name)
        declared = {s.target.id for s in cls.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
        assert field == row.field and field in declared, row.cite


def test_the_0_5_23_rules_derive_mirrors() -> None:
    hook = sglang_source("0.5.23") / "arg_groups" / "speculative_hook.py"
    src = hook.read_text()
    eagle = ast.get_source_segment(src, _function(ast.parse(src), "_handle_eagle_family"))
    assert "max_running_requests=48" in eagle and "not algo.supports_mixed_chunk()" in eagle
    assert "speculative_num_draft_tokens=cfg.speculative_num_steps + 1" in eagle
    init = ast.get_source_segment(src, _function(ast.parse(src), "_init_adaptive_speculative_params"))
    assert "speculative_eagle_topk=1" in init
    assert "candidate_steps[len(candidate_steps) // 2]" in init and "is not in the adaptive config" in init
    spec = (sglang_source("0.5.23") / "speculative" / "spec_info.py").read_text()
    mixed = ast.get_source_segment(spec, _function(ast.parse(spec), "supports_mixed_chunk"))
    assert "SpeculativeAlgorithm.EAGLE," in mixed and "SpeculativeAlgorithm.EAGLE3," in mixed
    params = (sglang_source("0.5.23") / "speculative" / "adaptive_spec_params.py").read_text()
    tree = ast.parse(params)
    default = next(n for n in tree.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
                   and n.target.id == "DEFAULT_ADAPTIVE_CONFIG")
    from specstate.model.sglang_0_5_23.family import DEFAULT_ADAPTIVE_CONFIG_0_5_23

    shipped = ast.literal_eval(default.value)
    assert {k: v["candidate_steps"] for k, v in shipped.items() if isinstance(v, dict)} == \
        {k: v["candidate_steps"] for k, v in DEFAULT_ADAPTIVE_CONFIG_0_5_23.items()}
