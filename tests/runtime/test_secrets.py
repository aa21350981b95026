"""The secrets a process knows, and the filter that masks them: the rule (what is
long enough to be one), what is masked in what, how long a secret is kept, and text
streamed in pieces."""

from __future__ import annotations

import gc
import json
from typing import Any

import msgspec
import pytest
from pydantic import BaseModel

from runtime import (
    AssistantMessage,
    BudgetExceeded,
    ModelRequest,
    ModelResponse,
    OpenAIEmbeddings,
    OpenAIModel,
    RetryingModel,
    RetryPolicy,
    ToolCall,
    Usage,
    UserMessage,
    add_secret,
)
from runtime.errors import ModelConnectionError
from runtime.limits.retry import ShownText
from runtime.secrets import (
    HeldText,
    add_header,
    isolated,
    keeping,
    known,
    mask_error,
    masked,
    shows_secret,
)
from tests.support.openai_server import OpenAIServer, Raw

KEY = "sk-unit-4Fh8Lq2Zx7Vb1Nm9"


class Owner:
    """What a secret is kept with, in a test: forgotten with it."""


@pytest.fixture
def owner() -> Owner:
    made = Owner()
    add_secret(KEY, "api key", owner=made)
    return made


def test_every_occurrence_is_masked_glued_to_other_text_or_not(owner: Owner) -> None:
    text = f"{KEY} x{KEY}y, {KEY}_v2 and {json.dumps(KEY)}"
    assert masked(text) == (
        '[api key hidden] x[api key hidden]y, [api key hidden]_v2 and "[api key hidden]"'
    )
    assert masked(f"{KEY}".encode()) == b"[api key hidden]"


@pytest.mark.parametrize("placeholder", ["ollama", "EMPTY", "none", "unused", "sk-1234"])
def test_values_shorter_than_eight_characters_are_no_secrets(placeholder: str) -> None:
    holder = Owner()
    add_secret(placeholder, owner=holder)
    assert placeholder not in known()
    text = f"none of the EMPTY slots: pull it with ollama (unused, sk-1234) {placeholder}"
    assert masked(text) is text


def test_a_secret_read_with_its_line_end_is_masked_without_it() -> None:
    holder = Owner()
    add_secret(f"  {KEY}\n", owner=holder)
    assert masked(f"key={KEY};") == "key=[secret hidden];"


def test_a_secret_is_forgotten_with_its_owner() -> None:
    holder = Owner()
    add_secret(KEY, owner=holder)
    assert KEY in known()
    del holder
    gc.collect()
    assert KEY not in known()
    assert masked(KEY) == KEY


def test_a_secret_added_in_a_keeping_block_is_known_until_it_ends() -> None:
    # A command's report is written after the models that registered their keys are
    # gone (an eval's): they were forgotten, and it showed them.
    with keeping():
        with keeping():  # nested, and as empty as the outer: each ends its own
            holder = Owner()
            add_secret(KEY, "api key", owner=holder)
        del holder
        gc.collect()
        assert masked(f"the key {KEY}") == "the key [api key hidden]"
    assert KEY not in known()
    assert masked(KEY) == KEY


def test_one_registered_twice_is_kept_while_either_owner_lives() -> None:
    first, second = Owner(), Owner()
    add_secret(KEY, owner=first)
    add_secret(KEY, owner=second)
    add_secret(KEY, owner=second)
    del first
    gc.collect()
    assert masked(KEY) == "[secret hidden]"
    del second
    gc.collect()
    assert masked(KEY) == KEY


def test_a_header_masks_its_credentials_alone_too() -> None:
    holder = Owner()
    add_header(f"Bearer {KEY}", owner=holder)
    assert masked(f"Authorization: Bearer {KEY}") == "Authorization: [header hidden]"
    assert masked(f"the token is {KEY}") == "the token is [header hidden]"


def test_a_secret_a_json_string_escapes_is_masked_as_json_holds_it() -> None:
    holder = Owner()
    password = 'pa"ss\\word-42'
    add_secret(password, "password", owner=holder)
    stored = msgspec.json.encode({"arguments": password})
    assert password.encode() not in masked(stored)
    assert json.loads(masked(stored)) == {"arguments": "[password hidden]"}
    assert masked(password) == "[password hidden]"


def every_character(text: str) -> str:
    """``text`` with every character a ``\\uXXXX`` escape."""
    return "".join(f"\\u{ord(c):04x}" for c in text)


ESCAPED = {
    "every character": every_character(KEY),
    "upper-case": "".join(f"\\u{ord(c):04X}" for c in KEY),
    "mixed with plain": KEY[:4] + every_character(KEY[4:9]) + KEY[9:],
    "Python's": "\\x73\\153\\N{HYPHEN-MINUS}\\U00000075" + KEY[4:],
    "JSON in JSON": json.dumps(every_character(KEY))[1:-1],
    "three deep": json.dumps(json.dumps(every_character(KEY))[1:-1])[1:-1],
}


@pytest.mark.parametrize("how", list(ESCAPED))
def test_escapes_that_decode_to_a_secret_are_masked_whole(owner: Owner, how: str) -> None:
    arguments = '{"text": "<' + ESCAPED[how] + '>"}'
    shown = masked(arguments)
    assert shown == '{"text": "<[api key hidden]>"}'  # decoded, it holds the mask
    assert shows_secret(arguments)
    assert masked(arguments.encode()) == shown.encode()  # bytes, as a store's rows
    call = ToolCall(id="c1", name="echo", arguments=arguments)
    assert masked(call).arguments == shown


def test_a_secret_past_u_ffff_written_as_surrogate_pairs_is_masked() -> None:
    holder = Owner()
    password = "pass-\U0001f511-word"
    add_secret(password, "password", owner=holder)
    escaped = json.dumps(password, ensure_ascii=True)  # "pass-\ud83d\udd11-word"
    assert "\\ud83d\\udd11" in escaped
    assert json.loads(masked(escaped)) == "[password hidden]"


def test_text_with_escapes_and_no_secret_is_left_as_it_is(owner: Owner) -> None:
    text = 'C:\\new\\x \\u00 "\\u0073k" \\\\ \\N{NO SUCH NAME} \\U99999999 ' + KEY[:-1]
    assert masked(text) is text
    assert not shows_secret(text)


def test_escapes_of_a_secret_streamed_in_pieces_never_show_it(owner: Owner) -> None:
    text = f"one {ESCAPED['every character']} two {ESCAPED['JSON in JSON']} \\u0073"
    for size in (1, 2, 5, 6, 7, 13):
        shown: list[str] = []
        held = HeldText(shown.append)
        for at in range(0, len(text), size):
            held(text[at : at + size])
        held.flush()
        assert "".join(shown) == masked(text) == "one [api key hidden] two [api key hidden] \\u0073"
        assert len(shown) > 2  # it still came in pieces


class Shape(BaseModel):
    name: str
    items: list[Any]


def test_values_are_masked_wherever_they_hold_it(owner: Owner) -> None:
    call = ToolCall(id="c1", name=KEY, arguments=json.dumps({KEY: KEY}))
    response = ModelResponse(
        message=AssistantMessage(content=f"the key: {KEY}", tool_calls=(call,)),
        usage=Usage(input_tokens=1, output_tokens=1),
        model=KEY,
    )
    value = {"response": response, KEY: [Shape(name=KEY, items=[(KEY, 1)])], "n": 3}
    shown = masked(value)
    assert KEY not in repr(shown)
    assert shown["n"] == 3
    assert shown["response"].message.tool_calls[0].name == "[api key hidden]"
    assert shown["[api key hidden]"][0].items == [("[api key hidden]", 1)]
    assert KEY in repr(value)  # a copy: the value itself is left as it was


def test_a_value_without_a_secret_is_the_same_object(owner: Owner) -> None:
    value = {"messages": (UserMessage(content="hello"),), "model": Shape(name="x", items=[1.5])}
    assert masked(value) is value
    assert masked("hello") == "hello"


def test_an_error_is_masked_in_place_with_its_fields_chain_and_partial(owner: Owner) -> None:
    result = Shape(name=f"answer {KEY}", items=[])
    cause = ModelConnectionError(f"cannot reach it with {KEY}")
    error = BudgetExceeded("model_calls", 1, 2)
    error.partial = result
    error.add_note(f"note {KEY}")
    error.__cause__ = cause
    assert mask_error(error) is error
    assert error.partial.name == "answer [api key hidden]"
    assert error.__notes__ == ["note [api key hidden]"]
    assert KEY not in str(cause)
    grouped = ExceptionGroup("group", [ValueError(KEY)])
    assert KEY not in repr(mask_error(grouped).exceptions)


def test_text_streamed_in_pieces_never_shows_a_secret_split_between_them(owner: Owner) -> None:
    text = f"one {KEY} two {KEY[:5]} three s{KEY}"
    for size in (1, 3, 7, len(KEY) - 1, len(KEY) + 2):
        shown: list[str] = []
        held = HeldText(shown.append)
        for at in range(0, len(text), size):
            held(text[at : at + size])
        held.flush()
        assert all(KEY[:9] not in piece for piece in shown), (size, shown)
        assert "".join(shown) == masked(text)


def test_streamed_text_with_no_secret_known_passes_at_once() -> None:
    shown: list[str] = []
    held = HeldText(shown.append)
    held("s")
    held("k-")
    assert shown == ["s", "k-"]


async def test_a_retried_stream_shows_only_the_text_of_the_attempt_that_answered(
    owner: Owner,
) -> None:
    class Flaky:
        calls = 0

        async def complete(self, request: ModelRequest) -> ModelResponse:
            raise AssertionError("streamed only")

        async def stream(self, request: ModelRequest, on_text: Any) -> ModelResponse:
            self.calls += 1
            on_text(KEY[:6])  # could begin the key: held back
            if self.calls == 1:
                raise ModelConnectionError("cut")
            on_text(f"{KEY[6:]} done")
            content = f"{KEY} done"
            return ModelResponse(message=AssistantMessage(content=content), usage=Usage())

    shown: list[str] = []
    model = RetryingModel(Flaky(), RetryPolicy(attempts=2, initial_wait_s=0, jitter_s=0))
    await model.stream(ModelRequest(messages=(UserMessage(content="hi"),)), shown.append)
    assert "".join(shown) == "[api key hidden] done"


def test_shown_text_counts_only_what_it_showed(owner: Owner) -> None:
    shown: list[str] = []
    text = ShownText(shown.append)
    with text.guard("m"):
        text(KEY[:4])
        assert (text.chars, shown) == (0, [])  # it could begin the key: held back
    assert (text.chars, shown) == (4, [KEY[:4]])  # the attempt ended: it did not


def test_shows_secret_says_whether_text_holds_one(owner: Owner) -> None:
    assert shows_secret(f"a {KEY}")
    assert not shows_secret("a key")


async def test_an_endpoint_streaming_its_key_in_pieces_never_shows_it(
    openai_server: OpenAIServer,
) -> None:
    """Each piece of the key alone is no secret: only holding back what could begin
    one keeps the key out of the text shown as it comes."""
    text = f"Here it is: {KEY}. Bye."
    pieces = [text[at : at + 3] for at in range(0, len(text), 3)]
    chunks = [{"choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]}
              for p in pieces]  # fmt: skip
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    events = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    openai_server.enqueue(Raw(200, content=events.encode(), media_type="text/event-stream"))
    model = OpenAIModel("gpt-test", base_url=openai_server.base_url, api_key=KEY)
    shown: list[str] = []
    response = await model.stream(ModelRequest(messages=(UserMessage(content="hi"),)), shown.append)
    assert "".join(shown) == response.message.content == "Here it is: [api key hidden]. Bye."
    assert len(shown) > 3  # it still came in pieces
    await model.client.close()


def test_the_keys_of_embeddings_and_headers_of_endpoints_are_secrets() -> None:
    local = "http://127.0.0.1:9/v1"
    embeddings = OpenAIEmbeddings("text-embedding-3-small", base_url=local, api_key=KEY)
    headers = {"extra_headers": {"X-Proxy-Auth": "Bearer pr0xy-t0ken-55"}}
    proxied = OpenAIModel("gpt-test", base_url=local, settings=headers)
    assert {KEY, "Bearer pr0xy-t0ken-55", "pr0xy-t0ken-55"} <= known()
    del embeddings, proxied
    gc.collect()
    assert not {KEY, "pr0xy-t0ken-55"} & known()


def test_an_isolated_block_knows_only_the_secrets_added_in_it() -> None:
    add_secret("sk-outside-0123456789", "api key")
    with isolated():
        assert known() == frozenset()
        assert masked("sk-outside-0123456789") == "sk-outside-0123456789"
        add_secret("inside-secret-value", owner=None)
        assert known() == {"inside-secret-value"}
    assert known() == {"sk-outside-0123456789"}
    assert masked("key sk-outside-0123456789") == "key [api key hidden]"
