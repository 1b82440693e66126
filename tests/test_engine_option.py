"""``--engine``'s choices are the release folders of ``specstate/model/`` (``_engine_option.engines``,
read from the directory so that building the parser imports no release): they must be the
catalog's families, and a new folder must be a new choice."""

from __future__ import annotations

from pathlib import Path

from specstate._engine_option import ENGINES, engines


def test_the_choices_are_the_catalogs_families() -> None:
    from specstate.model.families import family_names

    from specstate.model.vllm_0_34_0 import ENGINE as VLLM

    # the trial: tests/trial_release/; vLLM's family is its own state machine, outside the SGLang registry
    assert set(ENGINES) == {n for n in family_names() if n != "sglang-trial"} | {VLLM}


def test_a_new_release_folder_is_a_new_choice_and_other_folders_are_not(tmp_path: Path) -> None:
    for name in ("sglang_0_5_12", "sglang_0_5_9", "sglang_0_6_0", "v2", "sglang_notes", "sglang_1_0_0", "vllm_0_34_0"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
    (tmp_path / "sglang_1_0_0" / "__init__.py").unlink()  # not a package
    (tmp_path / "sglang_0_7_0.py").write_text("")  # a module, not a folder
    assert engines(tmp_path) == ("sglang-0.5.9", "sglang-0.5.12", "sglang-0.6.0", "vllm-0.34.0")
