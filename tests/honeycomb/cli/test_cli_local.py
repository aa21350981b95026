"""``--model local`` and ``--gguf``: what they refuse before any model loads (the
demo on the model itself is in test_real_model_demo.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from honeycomb.cli.local import ANSWER_TOKENS, short_answers
from honeycomb.cli.main import main
from honeycomb.hive import Hive, load_hive


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.gguf").write_text("not a model")
    return tmp_path


def test_gguf_alone_means_the_local_model(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--gguf", "notes.gguf", "--no-store"]) == 2
    assert "notes.gguf is not a GGUF model file" in capsys.readouterr().err


def test_a_missing_gguf_is_named(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--model", "local", "--gguf", "gone.gguf", "--no-store"]) == 2
    assert "no such file: gone.gguf" in capsys.readouterr().err


def test_the_local_model_takes_no_base_url(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["demo", "--model", "local", "--base-url", "http://127.0.0.1:9/v1", "--no-store"]
    assert main(argv) == 2
    assert "--model local runs llama.cpp in this process: --base-url is for" in (
        capsys.readouterr().err
    )


def test_gguf_is_for_the_local_model_only(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--model", "smollm2", "--gguf", "notes.gguf", "--no-store"]) == 2
    assert "--gguf is for --model local, not --model smollm2" in capsys.readouterr().err


def test_without_xllamacpp_the_local_model_says_what_to_install(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("runtime.models.llama_server.llama_missing", lambda: True)
    assert main(["demo", "--model", "local", "--no-store"]) == 2
    assert "pip install 'honeycomb-agents[local]'" in capsys.readouterr().err


def test_the_local_model_lowers_the_run_wide_output_limit_but_never_raises_it(
    tmp_path: Path,
) -> None:
    def hive(policy: str) -> Hive:
        path = tmp_path / "hive.yaml"
        path.write_text(f"models: {{default: offline}}\nroles: {{planner: {{}}}}\n{policy}")
        return load_hive(path)

    default = hive("policy: {max_subtasks: 5}\n")
    assert default.policy.max_output_tokens > ANSWER_TOKENS
    short_answers(default)
    assert default.policy.max_output_tokens == ANSWER_TOKENS
    assert default.policy.max_subtasks == 5  # the rest of the policy as it was
    terse = hive("policy: {max_output_tokens: 100}\n")
    short_answers(terse)
    assert terse.policy.max_output_tokens == 100
