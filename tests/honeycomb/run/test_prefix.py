"""The prefix a provider's prompt cache can reuse, on the wire: the bodies the real
``openai`` client sends to the local server, as bytes. Between two consecutive
requests of a worker every message of the earlier one comes again, byte for byte,
unless a compaction happened between them; every worker of a role sends the same
system message first."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable, Iterator

import pytest

from honeycomb import Executor, Policy, Role, tool
from runtime import JsonToolModel, Model, OpenAIModel, RetryPolicy, TextToolModel
from tests.support.openai_server import Behaviour, OpenAIServer, RecordedRequest, Reply, error
from workers.compaction import SUMMARIZER
from workers.context import Compaction

pytestmark = pytest.mark.timeout(60)

PAGES = 8
FILLER = "lorem ipsum dolor sit amet " * 60  # about 400 tokens a page


@tool
def read_page(page: int) -> str:
    """Read one page of the log."""
    return f"page {page}: fact-{page}\n{FILLER}"


def reader(request: RecordedRequest) -> Behaviour:
    """Reads the pages one a turn, then answers; answers a summary call with the facts
    in it. Reports the request's size as a server would (about four bytes a token)."""
    messages = request.body["messages"]
    tokens = len(request.raw) // 4
    if messages[0]["content"] == SUMMARIZER:
        facts = sorted({w for w in messages[1]["content"].split() if w.startswith("fact-")})
        return Reply(content="facts: " + " ".join(facts), prompt_tokens=tokens)
    read = sum(1 for m in messages if m["role"] == "tool" and "fact-" in m["content"])
    texts = [m["content"] or "" for m in messages]
    summary = next((text for text in texts if "[Summary" in text), "")
    read += summary.count("fact-")
    if read >= PAGES:
        return Reply(content=f"read {read} pages: {messages[1]['content']}", prompt_tokens=tokens)
    page = read + 1
    task = messages[1]["content"].replace(" ", "_")
    call = (f"call_{task}_{page}", "read_page", json.dumps({"page": page}))
    return Reply(tool_calls=(call,), prompt_tokens=tokens)


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(reader) as server:
        yield server


def wire_messages(request: RecordedRequest) -> list[bytes]:
    """The request's messages as the bytes they were sent as, one a message."""
    body = request.raw.decode()
    start = body.index('"messages"')
    at = body.index("[", start) + 1
    decoder = json.JSONDecoder()
    found: list[bytes] = []
    while True:
        while body[at] in " ,\n":
            at += 1
        if body[at] == "]":
            return found
        _, end = decoder.raw_decode(body, at)
        found.append(body[at:end].encode())
        at = end


def wire_tools(request: RecordedRequest) -> str:
    return json.dumps(request.body.get("tools"))


def is_summary(request: RecordedRequest) -> bool:
    return bool(request.body["messages"][0]["content"] == SUMMARIZER)


def run(
    server: OpenAIServer,
    role: Role,
    subtasks: list[tuple[str, str]],
    protocol: Callable[[Model], Model] = lambda model: model,
) -> str:
    """The run's answer, once every worker ended ``ok``."""
    model = OpenAIModel("gpt-test", base_url=server.base_url, retry=RetryPolicy(attempts=1))
    executor = Executor(
        [role],
        protocol(model),
        tools=[read_page],
        aggregator="concat",
        policy=Policy(max_workers=4),
    )
    result = asyncio.run(executor.run("read the logs", subtasks=subtasks))
    assert result.status == "ok", [str(f.error) for f in result.failures]
    return result.answer


def by_worker(requests: list[RecordedRequest]) -> dict[str, list[RecordedRequest]]:
    """The worker requests (summary calls are kept in the order they came), keyed by
    the worker's task (each worker's second message)."""
    workers: dict[str, list[RecordedRequest]] = {}
    for request in requests:
        if not is_summary(request):
            workers.setdefault(request.body["messages"][1]["content"], []).append(request)
    return workers


def test_each_request_of_a_worker_sends_the_one_before_it_again_byte_for_byte(
    server: OpenAIServer,
) -> None:
    role = Role(name="reader", instructions="Read every page.", tools=("read_page",))
    run(server, role, [("reader", "the log")])
    (requests,) = by_worker(server.requests).values()
    assert len(requests) == PAGES + 1
    for earlier, later in itertools.pairwise(requests):
        before, after = wire_messages(earlier), wire_messages(later)
        assert after[: len(before)] == before
        assert len(after) == len(before) + 2  # the answer and its observation
        assert wire_tools(later) == wire_tools(earlier)


def test_only_a_compaction_changes_what_a_worker_sent_before(server: OpenAIServer) -> None:
    role = Role(
        name="reader",
        instructions="Read every page.",
        tools=("read_page",),
        compaction=Compaction(budget_tokens=1800, keep_turns=2),
    )
    run(server, role, [("reader", "the log")])
    everything = server.requests
    assert any(is_summary(r) for r in everything)
    (requests,) = by_worker(everything).values()
    compacted = unchanged = 0
    for earlier, later in itertools.pairwise(requests):
        before, after = wire_messages(earlier), wire_messages(later)
        assert after[:2] == before[:2]  # the system prompt and the task, always
        between = everything[everything.index(earlier) + 1 : everything.index(later)]
        if any(is_summary(r) for r in between):
            compacted += 1
            assert after[: len(before)] != before
        else:
            unchanged += 1
            assert after[: len(before)] == before  # the summary message too
    assert compacted
    assert unchanged


def test_every_worker_of_a_role_sends_the_same_system_message_first(
    server: OpenAIServer,
) -> None:
    role = Role(
        name="reader",
        description="Reads logs.",
        instructions="Read every page.",
        tools=("read_page",),
        compaction=Compaction(budget_tokens=1800, keep_turns=2),
    )
    run(server, role, [("reader", f"log {i}") for i in range(4)])
    workers = by_worker(server.requests)
    assert len(workers) == 4
    firsts = {wire_messages(r)[0] for requests in workers.values() for r in requests}
    assert len(firsts) == 1
    (first,) = firsts
    assert json.loads(first) == {
        "role": "system",
        "content": "You are the reader worker.\n\nReads logs.\n\nRead every page.",
    }
    assert len({wire_tools(r) for requests in workers.values() for r in requests}) == 1


NO_TOOL = "Use no tool in this reply: give your final answer."
"""How the tool protocols ask a turn for its answer alone (``tool_choice: none``)."""


def endless_reader(protocol: str) -> Callable[[RecordedRequest], Behaviour]:
    """Reads one page a turn and never has enough, in ``protocol``'s form (function
    calls, an action block, the JSON object); answers the wrap-up, which the native
    form asks for with ``tool_choice: none`` and the others with :data:`NO_TOOL`."""

    def behaviour(request: RecordedRequest) -> Behaviour:
        messages = request.body["messages"]
        texts = [m["content"] or "" for m in messages]
        read = sum(1 for m in messages if m["role"] == "tool") or sum(
            m["content"].count("Observation for ") for m in messages if m["role"] == "user"
        )
        if request.body.get("tool_choice") == "none" or texts[-1].endswith(NO_TOOL):
            answer = f"read {read} pages"
            return Reply(content=json.dumps({"answer": answer}) if protocol == "json" else answer)
        arguments = {"page": read + 1}
        if protocol == "native":
            return Reply(tool_calls=((f"call_{read + 1}", "read_page", json.dumps(arguments)),))
        action = json.dumps({"tool": "read_page", "arguments": arguments})
        return Reply(content=action if protocol == "json" else f"```json\n{action}\n```")

    return behaviour


@pytest.mark.parametrize(
    ("protocol", "wrapped"),
    [("native", lambda m: m), ("text", TextToolModel), ("json", JsonToolModel)],
)
def test_the_wrap_up_sends_what_its_worker_sent_before_in_every_tool_protocol(
    protocol: str, wrapped: Callable[[Model], Model]
) -> None:
    """The wrap-up call (at ``max_turns``) starts with the turns before it, byte for
    byte, as every turn does: the tool protocols keep their instructions (the catalogue
    in the system message) and say that no tool may be used at the end."""
    role = Role(name="reader", instructions="Read every page.", tools=("read_page",), max_turns=3)
    with OpenAIServer(endless_reader(protocol)) as server:
        answer = run(server, role, [("reader", "the log")], wrapped)
    requests = server.requests
    assert len(requests) == 4  # three turns, then the wrap-up
    assert "read 3 pages" in answer
    for earlier, later in itertools.pairwise(requests):
        before, after = wire_messages(earlier), wire_messages(later)
        assert after[: len(before)] == before
        assert wire_tools(later) == wire_tools(earlier)


ALTERNATE = "Conversation roles must alternate user/assistant/user/assistant/..."


def alternating_reader(request: RecordedRequest) -> Behaviour:
    """:func:`reader` behind a chat template that raises on two user messages in a row
    (Gemma's, on vLLM: a 400 with the template's message)."""
    return error(400, ALTERNATE) if two_users_in_a_row(request) else reader(request)


def test_a_compacted_worker_on_an_endpoint_that_wants_turns_to_alternate_finishes() -> None:
    """Compaction sends its summary as a user message after the task: an endpoint whose
    template wants turns to alternate refuses it once, and from then on gets the two as
    one message; the worker reads every page all the same."""
    role = Role(
        name="reader",
        instructions="Read every page.",
        tools=("read_page",),
        compaction=Compaction(budget_tokens=1800, keep_turns=2),
    )
    with OpenAIServer(alternating_reader) as server:
        answer = run(server, role, [("reader", "the log")])
    assert f"read {PAGES} pages" in answer
    refused = [r for r in server.requests if two_users_in_a_row(r)]
    assert len(refused) == 1  # once: the model remembers
    after = server.requests[server.requests.index(refused[0]) + 1 :]
    assert any(not is_summary(r) and "[Summary" in r.body["messages"][1]["content"] for r in after)
    assert not any(two_users_in_a_row(r) for r in after)


def two_users_in_a_row(request: RecordedRequest) -> bool:
    roles = [m["role"] for m in request.body["messages"]]
    return any(a == b == "user" for a, b in itertools.pairwise(roles))
