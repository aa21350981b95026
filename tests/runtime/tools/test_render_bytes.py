"""Bytes a tool returns are text, as a string is: decoded, not quoted as JSON."""

from __future__ import annotations

from runtime.testing import call
from runtime.tools import ToolRegistry, tool
from runtime.tools.render import render
from tests.support.dispatching import layered


def test_bytes_are_their_decoded_text() -> None:
    assert render(b"hello", 100) == "hello"
    assert render(bytearray(b'say "hi"'), 100) == 'say "hi"'


def test_bytes_that_are_not_utf8_are_replaced() -> None:
    assert render(b"ab\xffcd", 100) == "ab\N{REPLACEMENT CHARACTER}cd"


def test_long_bytes_are_cut_as_a_long_string_is() -> None:
    assert render(b"x" * 300, 100) == render("x" * 300, 100)


def test_bytes_inside_a_value_are_json_strings() -> None:
    assert render({"raw": b"hi"}, 100) == '{"raw":"hi"}'
    assert render([b"a", bytearray(b"b")], 100) == '["a","b"]'


async def test_a_tool_returning_bytes_is_observed_as_their_text() -> None:
    @tool
    def read() -> bytes:
        return b"line one\nline two"

    (result,) = await layered(ToolRegistry([read])).dispatch([call("read")])

    assert (result.status, result.content) == ("ok", "line one\nline two")
