"""``${NAME}`` and ``${NAME:-default}`` in a value read the environment; ``$${`` is a
literal ``${``; a reference half written is an error at its line and field, never
text kept as it is."""

from __future__ import annotations

import pytest

from runtime import ConfigError, parse_yaml

ENV = {"A": "alpha", "EMPTY": ""}


def value_of(text: str) -> object:
    doc = parse_yaml(f"x: {text}\n", file="h.yaml", env=ENV, interpolate=True)
    return doc.data["x"]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("${A}", "alpha"),
        ("pre-${A}-post", "pre-alpha-post"),
        ("${B:-b}", "b"),
        ("${EMPTY:-e}", "e"),
        ("'${B:-}'", ""),
        ("${B:-http://h:8/v1}", "http://h:8/v1"),
        ("'$${A}'", "${A}"),
        ("'$${B'", "${B"),
        ("costs $5 or $$", "costs $5 or $$"),
        ("'{A}'", "{A}"),
        ("$$OPENAI_API_KEY", "$OPENAI_API_KEY"),  # the text: a name after a bare $ is none
        ("$a_lowercase_word", "$a_lowercase_word"),
        ("pay $USD", "pay $USD"),
    ],
)
def test_references_and_literals(text: str, value: str) -> None:
    assert value_of(text) == value


def test_a_value_that_is_one_variable_whole_keeps_its_name() -> None:
    """What reads a key where it is used (a model on Ray, in each actor) reads that
    variable: a value only part of which a variable gives is no variable's."""
    text = "k: ${A}\nl: pre-${A}\nm: ${B:-b}\nn: '${A}'\no: alpha\n"
    doc = parse_yaml(text, file="h.yaml", env=ENV, interpolate=True)
    assert dict(doc.variables) == {("k",): "A", ("n",): "A"}


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("${OPENAI_API_KEY", "'${OPENAI_API_KEY' is not closed: end it with }"),
        ("'a ${A'", "'${A' is not closed"),
        ("${}", "'${}' names no variable"),
        ("${OPENAI API KEY}", "'${OPENAI API KEY}' does not name a variable"),
        ("${1A}", "'${1A}' does not name a variable"),
        ("${A:-${B}}", "'${A:-${B}' has a default that holds a reference or a brace"),
        ("'ok ${A} then ${'", "'${' is not closed"),
    ],
)
def test_a_reference_half_written_is_an_error_at_its_line_and_field(text: str, why: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_yaml(f"a: 1\nb:\n  x: {text}\n", file="h.yaml", env=ENV, interpolate=True)
    error = caught.value
    assert (error.file, error.line, error.column, error.field) == ("h.yaml", 3, 6, "b.x")
    assert error.message.startswith(why), error.message
    assert "$${ for a literal ${" in error.message


def test_a_variable_named_after_a_bare_dollar_is_an_error_naming_the_reference() -> None:
    # `api_key: $OPENAI_API_KEY`, as a shell writes it, was kept as the text itself and
    # sent to the endpoint as the key.
    with pytest.raises(ConfigError) as caught:
        parse_yaml(
            "a: 1\nb:\n  api_key: $A\n", file="h.yaml", env=ENV, interpolate=True,
            secrets=[("b", "api_key")],
        )  # fmt: skip
    error = caught.value
    assert (error.line, error.column, error.field) == (3, 12, "b.api_key")
    assert error.message == (
        "$A is not read from the environment (${NAME} is): write ${A} to read the variable "
        "A, or $$A for the text $A itself"
    )
    assert "alpha" not in str(error)


def test_a_reference_in_a_key_is_an_error_not_a_name() -> None:
    # roles: {${ROLE}: ...} named a role '${ROLE}' (told as a name of characters it may
    # not hold), and models: {${M}: ...} a model no `model: ${M}` could name.
    with pytest.raises(ConfigError) as caught:
        parse_yaml("roles:\n  ${A}: {description: x}\n", env=ENV, interpolate=True)
    error = caught.value
    assert (error.line, error.column, error.field) == (2, 3, "roles.${A}")
    assert error.message == (
        "a key is a name as it is written: ${NAME} is read from the environment in values "
        "only (write the name itself)"
    )
    assert parse_yaml("'$${A}': 1\n", env=ENV, interpolate=True).data == {"$${A}": 1}
    assert parse_yaml("${A}: 1\n", env=ENV).data == {"${A}": 1}  # not interpolating


def test_a_secrets_reference_half_written_is_not_quoted() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_yaml(
            "api_key: ${sk-FAKE7hT3xQ9zL2wV8bN4mK6pR1sD5fG0\n",
            file="h.yaml",
            interpolate=True,
            secrets=[("api_key",)],
        )
    assert caught.value.message.startswith("a reference is not closed")
    assert "sk-FAKE" not in str(caught.value)


def test_without_interpolation_text_is_kept_as_it_is() -> None:
    doc = parse_yaml("x: ${A\n", env=ENV)
    assert doc.data == {"x": "${A"}
