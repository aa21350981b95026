"""No error about a YAML document shows a secret: the values at the paths of secrets
(wherever an alias puts them), the passwords of URLs, and the values read from the
environment are known before any error is made, and masked in every one of them."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from runtime import ConfigError, YamlDocument, parse_yaml
from runtime.secrets import masked_with, url_secrets

KEY = "sk-ENVSECRET1234567890abcd"
PASSWORD = "SuperSecretPw123"
SECRETS = [("models", "*", "api_key"), ("models", "*", "extra_headers")]


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid")
    api_key: str | None = None
    timeout: float = 1.0
    extra_headers: dict[str, str] = {}


class Store(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: str


class Root(BaseModel):
    model_config = ConfigDict(extra="forbid")
    models: dict[str, Model] = {}
    store: Store | None = None
    names: list[int] = []


def errors_of(text: str, **env: str) -> list[ConfigError]:
    doc = parse_yaml(text, file="h.yaml", env=env, interpolate=True, secrets=SECRETS)
    _, errors = doc.validate(Root, doc.data)
    assert errors
    return errors


def shown(errors: list[ConfigError]) -> str:
    return "\n".join(f"{e}\n{e!r}\n{e.args!r}" for e in errors)


def test_a_value_from_the_environment_is_never_shown_wherever_it_lands() -> None:
    # The key indented one level too shallow: not at a secret's path.
    text = "models:\n  gpt:\n    timeout: 2\n  api_key: ${OPENAI_API_KEY}\n"
    [error] = errors_of(text, OPENAI_API_KEY=KEY)
    assert KEY not in shown([error])
    assert (error.line, error.column, error.field) == (4, 3, "models.api_key")
    assert "(got '[$OPENAI_API_KEY hidden]')" in error.message


def test_a_secret_is_masked_where_an_alias_puts_it() -> None:
    text = f"models:\n  gpt:\n    api_key: &k {KEY}\n    timeout: *k\n"
    [error] = errors_of(text)
    assert KEY not in shown([error])
    assert error.field == "models.gpt.timeout"
    assert error.message.endswith("(got '[secret hidden]')")


def test_a_headers_credentials_alone_are_masked_too() -> None:
    text = f"models:\n  gpt:\n    extra_headers: {{X: &h Bearer {KEY}}}\nnames: [*h, '{KEY}']\n"
    errors = errors_of(text)
    assert KEY not in shown(errors)
    assert len(errors) == 2


def test_the_password_of_a_url_is_masked_in_any_value() -> None:
    url = f"postgresql://app:{PASSWORD}@127.0.0.1:9/db"
    [error] = errors_of(f"store: [{url}]\n")
    assert PASSWORD not in shown([error])
    assert "postgresql://app:[password hidden]@127.0.0.1:9/db" in error.message


def test_a_token_written_as_an_http_urls_user_is_masked_in_any_value() -> None:
    # An HTTP client sends it as a password (a model's base_url, an MCP server's url);
    # a database URL's user is a name.
    [error] = errors_of(f"store: [https://{PASSWORD}@proxy/v1]\n")
    assert PASSWORD not in shown([error])
    assert "https://[password hidden]@proxy/v1" in error.message
    [error] = errors_of("store: [postgresql://reporting@db/x]\n")
    assert "postgresql://reporting@db/x" in error.message


def test_a_long_value_is_masked_before_it_is_cut() -> None:
    # Cut at 60 characters, the repr would end with the secret's first characters.
    [error] = errors_of(f"store: ['{'x' * 40}', '${{KEY}}']\n", KEY=KEY)
    assert KEY[:6] not in error.message
    assert f"(got ['{'x' * 40}', '[$KEY hidde...)" in error.message


def test_every_error_made_through_the_document_is_masked() -> None:
    doc = parse_yaml(
        "models:\n  gpt:\n    model: ${NAME}\n    api_key: k\n",
        file="h.yaml",
        env={"NAME": KEY},
        interpolate=True,
        secrets=SECRETS,
    )
    error = doc.error(("models", "gpt", "model"), f"unknown model {KEY!r}")
    assert error.message == "unknown model '[$NAME hidden]'"


def test_secrets_are_known_before_the_document_is_built_whole() -> None:
    text = f"models:\n  gpt:\n    api_key: &k {KEY}\nother: {{*k: 1, *k: 2}}\n"
    with pytest.raises(ConfigError) as caught:
        parse_yaml(text, file="h.yaml", secrets=SECRETS)
    assert "appears twice" in str(caught.value)
    assert KEY not in str(caught.value)


def test_other_values_are_still_shown() -> None:
    [error] = errors_of("models:\n  gpt:\n    timeout: soon\n")
    assert error.message.endswith("(got 'soon')")
    doc: YamlDocument = parse_yaml("a: ${SHORT}\n", env={"SHORT": "gpt"}, interpolate=True)
    assert doc.data == {"a": "gpt"}
    assert doc.error(("a",), "unknown model 'gpt'").message == "unknown model 'gpt'"


def basic(credentials: str) -> str:
    """What an HTTP client sends for a URL's credentials: ``Authorization: Basic ...``."""
    return base64.b64encode(credentials.encode()).decode()


@pytest.mark.parametrize(
    ("text", "secrets"),
    [
        (f"postgresql://app:{PASSWORD}@db/x", [PASSWORD, basic(f"app:{PASSWORD}")]),
        (
            f"see redis://:{PASSWORD}@cache:6379/0 and http://u@h/",
            [PASSWORD, basic(f":{PASSWORD}")],
        ),
        (
            "http://ann:p%40ss-word-9@h/v1",
            ["p%40ss-word-9", basic("ann:p@ss-word-9"), "p@ss-word-9"],
        ),
        (  # libpq's parameters that carry a password (not the schema, not a path)
            "postgresql://app@db/x?schema=s&password=pw%21-query&sslpassword=kp&sslkey=/k",
            ["pw%21-query", "pw!-query", "kp"],
        ),
        ("https://example.com/a:b@c", []),
    ],
)
def test_the_secrets_of_urls_in_a_text(text: str, secrets: list[str]) -> None:
    # The Basic credentials too: an endpoint echoing the Authorization header a URL's
    # user and password make showed them, in base64.
    assert url_secrets(text) == secrets


def test_masked_with_masks_text_by_the_rule_of_masked_without_registering_anything() -> None:
    escaped = "".join(f"\\u{ord(c):04x}" for c in KEY)
    secrets: dict[str, Any] = {KEY: "api key", "short": "x"}
    assert masked_with(f"a {KEY} b {escaped} short", secrets) == (
        "a [api key hidden] b [api key hidden] short"
    )
