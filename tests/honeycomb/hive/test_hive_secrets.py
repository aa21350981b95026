"""A hive's secrets (``api_key``, header values) never print: not in ``validate``'s or
``run``'s output, not in the error ``from_yaml`` raises, nor anywhere in its chain,
whatever shape the value has and whatever YAML mistake is made on its line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from honeycomb import ConfigErrors, Executor
from honeycomb.cli.main import main
from honeycomb.hive import load_hive
from honeycomb.testing import FunctionModel

KEY = "sk-FAKE7hT3xQ9zL2wV8bN4mK6pR1sD5fG0"
DIGITS = "8675309123456789012345"

HEAD = """\
models:
  default: offline
  gpt:
    model: gpt-4o-mini
    base_url: http://127.0.0.1:9/v1
"""
TAIL = """\
roles:
  planner: {description: Plans.}
  writer: {description: Writes., max_turns: 0}
"""

SHAPES = {
    "a list": f"    api_key: [{KEY}, other]\n",
    "a mapping": f"    api_key: {{{KEY}: 1}}\n",
    "a mapping's value": f"    api_key: {{token: {KEY}}}\n",
    "a block list": f"    api_key:\n      - {KEY}\n",
    "digits": f"    api_key: {DIGITS}\n",
    "a wrong tag": f"    api_key: !!int {KEY}\n",
    "a tag of its own": f"    api_key: !{KEY} x\n",
    "an undefined alias": f"    api_key: *{KEY}\n",
    "an unclosed quote": f'    api_key: "{KEY}\n',
    "an unclosed flow list": f"    api_key: [{KEY}\n",
    "a bad escape": f'    api_key: "{KEY[:6]}\\q{KEY[6:]}"\n',
    "a colon inside": f"    api_key: {KEY}: x\n",
    "a key twice": f"    api_key: {{{KEY}: 1, {KEY}: 2}}\n",
    "a header value": f"    settings: {{extra_headers: {{Authorization: [Bearer {KEY}]}}}}\n",
    "headers as a list": f"    settings:\n      extra_headers: [{KEY}]\n",
    "a header line broken": f'    settings:\n      extra_headers:\n        X-Key: "{KEY}\n',
    "a header's line as its name": (
        f'    settings: {{extra_headers: {{"Authorization: Bearer {KEY}": yes}}}}\n'
    ),
    "a query key's alias": f"    settings: {{extra_query: {{key: &k {KEY}}}}}\n    timeout: *k\n",
    "models as a list": None,
}


def hive(tmp_path: Path, shape: str) -> Path:
    body = SHAPES[shape]
    text = (
        f"models:\n  - model: gpt-4o-mini\n    api_key: {KEY}\n{TAIL}"
        if body is None
        else HEAD + body + TAIL
    )
    path = tmp_path / "hive.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def chain(error: BaseException) -> list[BaseException]:
    """The error and everything chained to it, as causes or contexts, and grouped in it."""
    seen: list[BaseException] = []
    todo = [error]
    while todo:
        current = todo.pop()
        if any(current is s for s in seen):
            continue
        seen.append(current)
        todo += [e for e in (current.__cause__, current.__context__) if e is not None]
        todo += list(getattr(current, "errors", ()) or ())
        todo += list(getattr(current, "exceptions", ()) or ())
    return seen


def assert_hidden(text: str) -> None:
    for secret in (KEY, KEY[:12], KEY[-12:], DIGITS):
        assert secret not in text, text


@pytest.mark.parametrize("shape", list(SHAPES))
def test_validate_and_run_never_print_the_key(
    tmp_path: Path, shape: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = hive(tmp_path, shape)
    assert main(["validate", str(path)]) == 1
    validated = capsys.readouterr()
    assert "error" in validated.out
    assert main(["run", str(path), "task", "--no-store", "--plain"]) == 2
    ran = capsys.readouterr()
    assert "hive.yaml" in ran.err
    for text in (validated.out, validated.err, ran.out, ran.err):
        assert_hidden(text)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_from_yaml_errors_and_their_chain_never_hold_the_key(tmp_path: Path, shape: str) -> None:
    with pytest.raises(ConfigErrors) as caught:
        Executor.from_yaml(hive(tmp_path, shape))
    for error in chain(caught.value):
        assert_hidden(str(error))
        assert_hidden(repr(error))
        assert_hidden(repr(error.args))


def test_a_secret_of_the_wrong_type_is_named_with_its_field_and_type(tmp_path: Path) -> None:
    with pytest.raises(ConfigErrors) as caught:
        Executor.from_yaml(hive(tmp_path, "a list"))
    [error] = [e for e in caught.value.errors if e.field == "models.gpt.api_key"]
    assert error.message == "Input should be a valid string (got a list; a secret, not shown)"
    with pytest.raises(ConfigErrors) as caught:
        Executor.from_yaml(hive(tmp_path, "digits"))
    [error] = [e for e in caught.value.errors if e.field == "models.gpt.api_key"]
    assert error.message == (
        "Input should be a valid string (got a number; a secret, not shown): write it in "
        "quotes, as text"
    )


@pytest.mark.parametrize("end", ["\n", "\r", " "])
def test_a_key_read_with_the_end_of_its_line_is_told_at_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, end: str
) -> None:
    # A key read from a variable holding its line's end (a Windows .env's \r) failed
    # every call as 'cannot reach the model endpoint ...: Illegal header value'.
    monkeypatch.setenv("HIVE_TEST_KEY", KEY + end)
    path = tmp_path / "hive.yaml"
    path.write_text(
        HEAD + "    api_key: ${HIVE_TEST_KEY}\n" + TAIL.replace("max_turns: 0", "max_turns: 1")
    )
    with pytest.raises(ConfigErrors) as caught:
        load_hive(path)
    [error] = caught.value.errors
    assert (error.line, error.field) == (6, "models.gpt.api_key")
    assert error.message == (
        "the key begins or ends with a space or a line break (read with the end of its "
        "line?): remove it"
    )
    for each in chain(caught.value):
        assert_hidden(str(each))
    monkeypatch.setenv("HIVE_TEST_KEY", KEY)
    assert load_hive(path).spec.models["gpt"].api_key is not None


def test_other_values_are_still_shown(tmp_path: Path) -> None:
    path = tmp_path / "hive.yaml"
    path.write_text(HEAD + "    timeout: soon\n" + TAIL)
    with pytest.raises(ConfigErrors) as caught:
        Executor.from_yaml(path)
    assert "(got 'soon')" in str(caught.value)


ENV_KEY = "sk-ENVSECRET1234567890abcd"
PASSWORD = "SuperSecretPw123"

ELSEWHERE = {
    # api_key indented one level too shallow: under models:, at no secret's path
    "a key from the environment, misplaced": (
        "models:\n  gpt:\n    model: gpt-4o-mini\n  api_key: ${HIVE_TEST_KEY}\n",
        "models.api_key: should be a mapping of api, api_key, base_url, context, jitter, "
        "latency, max_concurrency, model, parallel, path, price, provider, retry, seed, "
        "settings, threads, timeout, tool_protocol, or offline (got '[$HIVE_TEST_KEY hidden]')",
    ),
    "a store's URL in a list": (
        f"models:\n  default: offline\nstore: ['postgresql://app:{PASSWORD}@127.0.0.1:9/db']\n",
        "store: should be a mapping of password_env, pool_size, url, or a file or a "
        "postgresql:// URL (got ['postgresql://app:[password hidden]@127.0.0.1:9/db'])",
    ),
    "a key reused by an alias": (
        f"models:\n  gpt:\n    model: gpt-4o-mini\n    api_key: &k {KEY}\n    timeout: *k\n",
        "models.gpt.timeout: Input should be a valid number, unable to parse string as a "
        "number (got '[secret hidden]')",
    ),
}


@pytest.mark.parametrize("case", list(ELSEWHERE))
def test_a_secret_where_no_secret_belongs_is_never_shown(
    tmp_path: Path,
    case: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HIVE_TEST_KEY", ENV_KEY)
    head, said = ELSEWHERE[case]
    path = tmp_path / "hive.yaml"
    path.write_text(head + "roles:\n  planner: {description: Plans.}\n")
    with pytest.raises(ConfigErrors) as caught:
        load_hive(path)
    assert [e.message for e in caught.value.errors] == [said.split(": ", 1)[1]]
    assert main(["validate", str(path)]) == 1
    assert main(["run", str(path), "task", "--no-store", "--plain"]) == 2
    printed = capsys.readouterr()
    assert said in printed.out
    for text in (printed.out, printed.err, *map(str, chain(caught.value))):
        for secret in (KEY, ENV_KEY, PASSWORD):
            assert secret not in text


async def test_the_keys_of_models_others_stand_in_for_are_masked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hive run on another model (``--model offline``, ``model=``) never built its
    declared ones, so their keys were never masked: one pasted into a task was kept
    and shown as it is. The keys a hive declares (its api_key, the key in its
    extra_query, the password and key of its base_url, its MCP servers' headers,
    OPENAI_API_KEY for a model with none) are masked while it lives."""
    token = "tok-FAKE9aB3cD5eF7gH1jK"
    env_key = "sk-ENVFAKE4dG7hJ2kL9mN3"
    query_key = "qk-FAKE2wE4rT6yU8iO0pA"
    url_password, url_key = "pw-FAKE5tY7uI9oP1aS3", "uk-FAKE6gH8jK0lZ2xC4"
    monkeypatch.setenv("OPENAI_API_KEY", env_key)
    path = tmp_path / "hive.yaml"
    path.write_text(
        HEAD + f"    api_key: {KEY}\n"
        "  other:\n    model: gpt-4o\n"
        f"    base_url: http://app:{url_password}@127.0.0.1:9/v1?key={url_key}\n"
        f"    settings: {{extra_query: {{api-key: {query_key}}}}}\n"
        "mcp_servers:\n  docs:\n    url: http://127.0.0.1:9/mcp\n"
        f"    headers: {{Authorization: Bearer {token}}}\n"
        "roles:\n  writer: {description: Writes.}\n"
    )
    executor = Executor.from_hive(load_hive(path), model=FunctionModel(lambda r: str(r)))
    task = f"keys {KEY} and {token} and {env_key} and {query_key}, {url_password}, {url_key}"
    result = await executor.run(task, subtasks=[("writer", task)])
    shown = result.model_dump_json()
    for secret in (KEY, token, env_key, query_key, url_password, url_key):
        assert secret not in shown
    assert "[api key hidden]" in result.task


def test_a_hives_spec_shows_no_secret_in_its_repr(tmp_path: Path) -> None:
    """``print(hive.spec)`` while debugging: the api_key was masked (a SecretStr), but
    the password and key of a base_url, the values of extra_headers and the key of
    extra_query, and a store URL's password were shown as written; so was a token
    written as a base_url's user, which the HTTP client sends as a password."""
    path = tmp_path / "hive.yaml"
    path.write_text(
        "models:\n  gpt:\n    model: gpt-4o\n"
        f"    base_url: http://u:{PASSWORD}@127.0.0.1:9/v1?key={ENV_KEY}\n"
        f"    settings: {{extra_query: {{key: {KEY}}}, extra_headers: {{X-A: Bearer {DIGITS}}}}}\n"
        "memory:\n  embeddings:\n    model: e\n"
        f"    base_url: http://{PASSWORD}x@127.0.0.1:9/v1\n"
        f"store: postgresql://app:{PASSWORD}y@127.0.0.1:9/db\n"
        "roles:\n  writer: {description: Writes.}\n"
    )
    spec = load_hive(path).spec
    for shown in (repr(spec), str(spec)):
        assert_hidden(shown)
        assert PASSWORD not in shown
        assert ENV_KEY not in shown
        assert "base_url='http://u:[password hidden]@127.0.0.1:9/v1?key=[password" in shown
        assert "'X-A': '[header hidden]'" in shown
    assert KEY in spec.models["gpt"].model_dump_json()  # its data as written


@pytest.mark.parametrize(
    ("api_key", "sent"), [("${HIVE_TEST_KEY:-}", "Bearer unused"), ("", "Bearer ENV")]
)
async def test_a_key_written_empty_sends_no_other_key_to_the_hives_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api_key: str, sent: str
) -> None:
    """A model whose api_key the hive writes and which comes out empty (its variable
    unset, after ':-') has no key: OPENAI_API_KEY, the key of another endpoint, was
    sent in its place to the hive's base_url. Without an api_key, OPENAI_API_KEY is its
    key, as documented."""
    from tests.support.openai_server import OpenAIServer

    env_key = "sk-ENVFAKE8kL2mN4pQ6rS"
    monkeypatch.setenv("OPENAI_API_KEY", env_key)
    monkeypatch.delenv("HIVE_TEST_KEY", raising=False)
    with OpenAIServer() as server:
        line = f"    api_key: {api_key}\n" if api_key else ""
        path = tmp_path / "hive.yaml"
        path.write_text(
            HEAD.replace("http://127.0.0.1:9/v1", server.base_url)
            + line
            + "roles:\n  planner: {description: Plans.}\n  w: {description: Works., model: gpt}\n"
        )
        executor = Executor.from_hive(load_hive(path))
        await executor.run("Work.", subtasks=[("w", "work")])
        [request] = server.requests
    assert request.headers["authorization"] == sent.replace("ENV", env_key)


EMBEDDED = """\
models:
  default: offline
memory:
  path: memory.db
  embeddings:
    model: embed-small
    base_url: {url}
{key}roles:
  planner: {{description: Plans.}}
  writer: {{description: Writes.}}
"""


@pytest.mark.parametrize(
    ("api_key", "sent"), [("${HIVE_TEST_KEY:-}", "Bearer unused"), ("", "Bearer ENV")]
)
async def test_an_embeddings_key_written_empty_sends_no_other_key_to_their_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api_key: str, sent: str
) -> None:
    """As a model's: the memory's embeddings whose api_key comes out empty have no key.
    OPENAI_API_KEY, the key of another endpoint, was sent in its place to their
    base_url (a model's was not)."""
    from tests.support.openai_server import OpenAIServer

    env_key = "sk-ENVFAKE8kL2mN4pQ6rS"
    monkeypatch.setenv("OPENAI_API_KEY", env_key)
    monkeypatch.delenv("HIVE_TEST_KEY", raising=False)
    with OpenAIServer() as server:
        line = f"    api_key: {api_key}\n" if api_key else ""
        path = tmp_path / "hive.yaml"
        path.write_text(EMBEDDED.format(url=server.base_url, key=line))
        memory = load_hive(path).memory()
        assert memory is not None
        assert memory.embeddings is not None
        await memory.embeddings.embed(["Lisbon trams"])
        [request] = server.requests
    assert request.headers["authorization"] == sent.replace("ENV", env_key)


def test_an_embeddings_key_read_with_the_end_of_its_line_is_told_at_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As a model's key: every search failed as 'Illegal header value'.
    monkeypatch.setenv("HIVE_TEST_KEY", KEY + "\r")
    path = tmp_path / "hive.yaml"
    key = "    api_key: ${HIVE_TEST_KEY}\n"
    path.write_text(EMBEDDED.format(url="http://127.0.0.1:9/v1", key=key))
    with pytest.raises(ConfigErrors) as caught:
        load_hive(path)
    [error] = caught.value.errors
    assert (error.line, error.field) == (8, "memory.embeddings.api_key")
    assert error.message.startswith("the key begins or ends with a space or a line break")
    for each in chain(caught.value):
        assert_hidden(str(each))


def test_a_header_read_with_the_end_of_its_line_is_told_at_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model's extra_headers value or an MCP server's header read with a Windows
    .env's \\r passed validate, and every call failed as 'cannot reach the model
    endpoint ...: Illegal header value' (the server, as it started). Each is an error
    at its line that shows neither the header's name nor its value."""
    monkeypatch.setenv("HIVE_TEST_TOKEN", KEY + "\r")
    path = tmp_path / "hive.yaml"
    path.write_text(
        HEAD
        + '    settings: {extra_headers: {X-Team-Token: "${HIVE_TEST_TOKEN}"}}\n'
        + "mcp_servers:\n  web:\n    url: http://127.0.0.1:9/mcp\n"
        + '    headers: {Authorization: "Bearer ${HIVE_TEST_TOKEN}"}\n'
        + TAIL
    )
    assert main(["validate", str(path)]) == 1
    out = capsys.readouterr().out
    told = (
        "a header's value begins or ends with a space or a line break (read with the end "
        "of its line?): remove it"
    )
    assert f"{path}:6:32: models.gpt.settings.extra_headers: {told}" in out
    assert f"{path}:8:3: mcp_servers.web: MCP server 'web': {told}" in out
    assert_hidden(out)
    assert "X-Team-Token" not in out


def test_a_header_name_no_request_can_carry_is_told_at_its_line(tmp_path: Path) -> None:
    """A model's header written with its colon, a space or a letter that is not ASCII in
    its name passed validate, and every call failed in httpx's words ('Illegal header
    name', or a UnicodeEncodeError), which quoted the name, a token written after it
    too. It is an error at its line, showing the name up to that character alone."""
    path = tmp_path / "hive.yaml"
    headers = f'{{"Authorization: Bearer {KEY}": yes, X-Tëam: bees}}'
    body = f"    settings: {{extra_headers: {headers}}}\n"
    path.write_text(HEAD + body + TAIL.replace("max_turns: 0", "max_turns: 1"))
    with pytest.raises(ConfigErrors) as caught:
        load_hive(path)
    told = [(e.line, e.field, e.message) for e in caught.value.errors]
    holds = "a name is letters, digits and !#$%&'*+-.^_`|~ alone"
    assert told == [
        (6, "models.gpt.settings.extra_headers", f"a header's name holds ':' after "
         f"'Authorization': {holds}"),
        (6, "models.gpt.settings.extra_headers", f"a header's name holds 'ë' after 'X-T': {holds}"),
    ]  # fmt: skip
    for each in chain(caught.value):
        assert_hidden(str(each))
