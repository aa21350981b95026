"""``--model local`` and ``--gguf``: what they refuse before any model loads (the
demo on the model itself is in test_real_model_demo.py)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from honeycomb.cli.local import ANSWER_TOKENS, short_answers
from honeycomb.cli.main import _parser, main
from honeycomb.cli.running import model_of
from honeycomb.hive import Hive, load_hive
from runtime import JsonToolModel, TextToolModel
from runtime.model import context_of
from runtime.models.llama import LlamaModel


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.gguf").write_text("not a model")
    return tmp_path


def test_gguf_alone_means_the_local_model(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--gguf", "notes.gguf", "--no-store"]) == 2
    # The option is named: the message named the file alone, as if the hive had it.
    assert capsys.readouterr().err == (
        "--gguf: notes.gguf is not a GGUF model file (it does not start with 'GGUF')\n"
    )


def test_a_missing_gguf_is_named(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--model", "local", "--gguf", "gone.gguf", "--no-store"]) == 2
    assert capsys.readouterr().err == "--gguf: no such file: gone.gguf\n"


def test_the_local_model_takes_no_base_url(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["demo", "--model", "local", "--base-url", "http://127.0.0.1:9/v1", "--no-store"]
    assert main(argv) == 2
    assert "--model local runs llama.cpp in this process: --base-url is for" in (
        capsys.readouterr().err
    )


def test_an_endpoint_the_environment_keeps_is_not_taken_for_a_given_base_url(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # HONEYCOMB_BASE_URL set for other runs refused --model local as if --base-url had
    # been given with it; the command goes on to its model file.
    monkeypatch.setenv("HONEYCOMB_BASE_URL", "http://127.0.0.1:9/v1")
    assert main(["demo", "--gguf", "notes.gguf", "--no-store"]) == 2
    assert capsys.readouterr().err == (
        "--gguf: notes.gguf is not a GGUF model file (it does not start with 'GGUF')\n"
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


def test_the_local_model_lowers_the_limit_of_the_hives_called_as_tools_too(
    tmp_path: Path,
) -> None:
    # They run on it as well: a sub-hive's answers at its own 4096 tokens ran minutes.
    (tmp_path / "sub.yaml").write_text("models: {default: offline}\nroles: {planner: {}}\n")
    top = tmp_path / "hive.yaml"
    top.write_text("models: {default: offline}\nroles: {planner: {tools: ['hive:sub.yaml']}}\n")
    hive = load_hive(top)
    (sub,) = hive.hives.values()
    assert sub.policy.max_output_tokens > ANSWER_TOKENS
    short_answers(hive)
    assert (hive.policy.max_output_tokens, sub.policy.max_output_tokens) == (ANSWER_TOKENS,) * 2


BANNER = "llama.cpp in this process: tiny.gguf"


@pytest.fixture
def tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with ``tiny.gguf``, a file llama.cpp is never asked to load (the
    commands below stop before any model call), and llama.cpp taken as installed."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("runtime.models.llama_server.llama_missing", lambda: False)
    (tmp_path / "tiny.gguf").write_bytes(b"GGUF" + bytes(28))
    return tmp_path


def said_of(
    argv: list[str],
    hive: str,
    capsys: pytest.CaptureFixture[str],
    planner: str = "planner: planner\n",
) -> str:
    """The output limits ``--model local``'s line names, for a hive of the roles and
    policy of ``hive`` (and its ``planner:``): ``run`` stops at a store it cannot open,
    ``chat`` at the end of its input, both after the line and before any model call."""
    Path("hive.yaml").write_text(
        f"models: {{default: offline}}\n{planner}aggregator: aggregator\n" + hive
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.stdin", io.StringIO(""))
        main([*argv, "--model", "local", "--gguf", "tiny.gguf"])
    line = next(line for line in capsys.readouterr().err.splitlines() if BANNER in line)
    return line.split("thread, ", 1)[1].split(";", 1)[0]


COMMANDS = pytest.mark.parametrize(
    "argv",
    [["run", "hive.yaml", "t", "--store", "gone/runs.db"], ["chat", "hive.yaml", "--no-store"]],
    ids=["run", "chat"],
)


@COMMANDS
def test_the_local_model_names_the_output_limit_that_applies(
    tiny: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The hive's own limit where it is lower than the one ``--model local`` sets, and
    every role's own (the planner's too: else sized by the plan it may write)."""
    lower = "roles: {planner: {}, w: {}, aggregator: {}}\npolicy: {max_output_tokens: 100}\n"
    assert said_of(argv, lower, capsys) == "answers of at most 100 tokens, 9604 for planner"
    own = (
        "roles:\n  planner: {max_output_tokens: 600}\n  w: {max_output_tokens: 1024}\n"
        "  v: {max_output_tokens: 1024}\n  aggregator: {}\n"
    )
    said = said_of(argv, own, capsys)
    assert said == f"answers of at most {ANSWER_TOKENS} tokens, 600 for planner, 1024 for w and v"
    all_own = (
        "roles:\n  planner: {max_output_tokens: 600}\n  w: {max_output_tokens: 300}\n"
        "  aggregator: {max_output_tokens: 300}\n"
    )
    said = said_of(argv, all_own, capsys)
    assert said == "answers of at most 600 tokens for planner, 300 for w and aggregator"


@COMMANDS
def test_the_planner_a_hive_has_by_its_roles_name_is_named_with_its_limit(
    tiny: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # With no planner:, the role named planner plans, its calls sized by the plan it
    # may write; the line gave it the run-wide limit.
    roles = "roles: {planner: {}, w: {}, aggregator: {}}\n"
    said = said_of(argv, roles, capsys, planner="")
    assert said == f"answers of at most {ANSWER_TOKENS} tokens, 9604 for planner"


def test_the_context_of_the_local_model_is_given_by_context(
    tiny: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A prompt past the context was told to give more, and --model local took none.
    Path("hive.yaml").write_text("models: {default: offline}\nroles: {planner: {}, w: {}}\n")
    run = ["run", "hive.yaml", "t", "--store", "gone/runs.db", "--gguf", "tiny.gguf"]
    main([*run, "--context", "8192"])
    assert f"{BANNER} (4 slots of 8192 tokens, " in capsys.readouterr().err
    main(run)
    assert f"{BANNER} (4 slots of 4096 tokens, " in capsys.readouterr().err
    assert main([*run, "--context", "1000"]) == 2
    assert capsys.readouterr().err.startswith(
        "--context: context (1000) must be a multiple of 256 tokens"
    )
    assert main(["run", "hive.yaml", "t", "--model", "offline", "--context", "8192"]) == 2
    said = "--context is for --model local or an endpoint's model, not offline"
    assert said in capsys.readouterr().err


def test_the_context_of_an_endpoints_model_is_given_by_context(tmp_path: Path) -> None:
    """``--context`` of an endpoint's model (``--model NAME``) is its server's, which
    what the run hands the model is fitted to; without it, the model says none."""
    hive = tmp_path / "hive.yaml"
    hive.write_text("models: {default: offline}\nroles: {planner: {}, w: {}}\n")
    endpoint = ["--model", "llama3.1", "--base-url", "http://127.0.0.1:9/v1"]
    for given, said in [(["--context", "8192"], 8192), ([], None)]:
        args = _parser().parse_args(["run", str(hive), "t", *endpoint, *given])
        model = model_of(args, load_hive(hive))
        assert model is not None
        assert context_of(model) == said


def test_the_local_model_calls_tools_through_a_json_schema_unless_told_otherwise(
    tiny: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """SmolLM2 calls no tool natively (it answers prose): ``--model local`` gave a
    role's tools to it natively, so they went unused, and ``demo --approve`` asked
    nothing. Through the JSON protocol llama.cpp's grammar has it write the calls."""
    Path("hive.yaml").write_text("models: {default: offline}\nroles: {planner: {}, w: {}}\n")

    def made(*given: str) -> object:
        argv = ["run", "hive.yaml", "t", "--gguf", "tiny.gguf", *given]
        return model_of(_parser().parse_args(argv), load_hive(Path("hive.yaml")))

    model = made()
    assert isinstance(model, JsonToolModel)
    assert isinstance(model.inner, LlamaModel)
    assert "; tools by the json protocol; no network" in capsys.readouterr().err
    assert isinstance(made("--tool-protocol", "native"), LlamaModel)
    assert "; tools by the native protocol; no network" in capsys.readouterr().err
    assert isinstance(made("--tool-protocol", "text"), TextToolModel)
