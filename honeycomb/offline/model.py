"""``OfflineModel``: a rule-based model, with no AI in it, so that a whole hive runs
with no network and no key.

It recognises six kinds of call and answers each by simple text rules (see
:mod:`honeycomb.offline.rules`):

- a summary call of compaction: the facts found so far (:mod:`honeycomb.offline.summary`);
- a guard's judge: ``PASS``, unless what it is shown is empty or looks like it holds a
  secret (:mod:`honeycomb.offline.judge`);
- the planner (``output`` is the ``Plan`` schema): clauses of the task matched to roles
  by keyword overlap; a writer/sender subtask depends on all the others;
- a worker turn with tools: calls to the tools whose words match the instruction, with
  arguments read from the text (one call per city, ...), and to ``recall`` (the memory
  tool) with the instruction's key phrase unless the worker recalled at its start;
  once observations are in, the next page of a result that names one (a JSON result's
  ``next_page`` for a tool's ``page``, any ``next_X`` for an ``X``), a tool that takes
  a file or an id for each one they name (:mod:`honeycomb.offline.follow`), then a
  side-effecting "send" tool if the task asks for one, and ``remember`` with what the
  tools found; then the answer in sentences, with the facts of the summary of earlier
  turns and the memories recalled (:mod:`honeycomb.offline.worker`);
- the aggregator (the results header in a user message): a short answer in prose from
  the lead of every subtask's result (:mod:`honeycomb.offline.answer`);
- anything else (such as the wrap-up call): a summary of what the conversation holds.

All final text starts with ``[offline simulation]``. Every answer is derived from the
request alone, so one instance can serve many concurrent workers and is deterministic.

It streams (``stream``): after half its latency, the answer's text comes word by word
over the other half, so a live view shows it being written, in the same time.

It follows the text tool protocol too (:class:`~runtime.models.TextToolModel`): a
tool-less request that lists tools in its instructions is read back into the request
it was written from, and the calls of the answer are written as actions; and the JSON
one (:class:`~runtime.models.JsonToolModel`), answering JSON of the turn's schema.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random

from honeycomb.offline import answer as answer
from honeycomb.offline import schema as schema_rules
from honeycomb.offline.judge import is_judge_request, verdict
from honeycomb.offline.plan import plan_for
from honeycomb.offline.summary import summarize
from honeycomb.offline.worker import final_text, worker_turn
from honeycomb.run.prompts import RESULTS_HEADER
from runtime import (
    AssistantMessage,
    ModelRequest,
    ModelResponse,
    UserMessage,
    dump_value_json,
)
from runtime.model import TextSink
from runtime.models.protocols.json_wire import is_json_turn, written_reply
from runtime.models.protocols.json_wire import native_request as native_json_request
from runtime.models.protocols.text_wire import native_request, written_answer
from runtime.testing import estimate_usage, stream_text
from workers.compaction import is_summary_request

__all__ = ["OfflineModel"]


class OfflineModel:
    """A rule-based stand-in for a language model, for demos and tests without a network.

    Args:
        latency: Simulated seconds per call.
        jitter: Up to this many extra seconds, pseudo-random but fixed for a given seed
            and request.
        seed: Seeds the jitter.
        name: Reported as the model name.

    Raises:
        ValueError: for a negative latency or jitter.
    """

    def __init__(
        self, *, latency: float = 0.15, jitter: float = 0.0, seed: int = 0, name: str = "offline"
    ) -> None:
        if latency < 0 or jitter < 0:
            raise ValueError(f"latency and jitter must be >= 0, got {latency} and {jitter}")
        self.latency = latency
        self.jitter = jitter
        self.seed = seed
        self.name = name

    def __repr__(self) -> str:
        return f"OfflineModel(name={self.name!r}, latency={self.latency}, jitter={self.jitter})"

    def delay(self, request: ModelRequest) -> float:
        """Seconds this request waits: the latency plus its jitter."""
        if not self.jitter:
            return self.latency
        digest = hashlib.sha256(dump_value_json(request).encode()).hexdigest()
        return self.latency + random.Random(f"{self.seed}:{digest}").uniform(0, self.jitter)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(self.delay(request))
        return self._answer(request)

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        """:meth:`complete`, its text written word by word over the second half of
        the delay."""
        delay = self.delay(request)
        await asyncio.sleep(delay / 2)
        response = self._answer(request)
        await stream_text(response.message.content, on_text, over_s=delay / 2)
        return response

    def _answer(self, request: ModelRequest) -> ModelResponse:
        message = follow_protocol(request)
        return ModelResponse(
            message=message,
            usage=estimate_usage(request, message),
            finish_reason="tool_calls" if message.tool_calls else "stop",
            model=self.name,
        )


def follow_protocol(request: ModelRequest) -> AssistantMessage:
    """The offline answer to ``request``, in kind: a request written for the text or
    the JSON tool protocol is read back into the one it was written from, and its
    answer written as the protocol says."""
    if request.tools:
        return respond(request)
    if is_json_turn(request):
        return written_reply(respond(native_json_request(request)), request)
    native = native_request(request)
    message = respond(native)
    return written_answer(message) if native is not request else message


def respond(request: ModelRequest) -> AssistantMessage:
    """The offline answer to one request."""
    if is_summary_request(request):
        return AssistantMessage(content=summarize(request))
    if is_judge_request(request):
        return AssistantMessage(content=verdict(request))
    output = request.output
    if output is not None and output.name == "Plan":
        return AssistantMessage(content=plan_for(request).model_dump_json())
    if request.tools and request.tool_choice != "none":  # none: the wrap-up's answer
        turn = worker_turn(request)
        if isinstance(turn, AssistantMessage):
            return turn
        text = turn
    else:
        users = [m.content for m in request.messages if isinstance(m, UserMessage)]
        results = next((u for u in reversed(users) if RESULTS_HEADER in u), None)
        text = answer.aggregate(results) if results is not None else final_text(request)
    if output is not None:
        filled = schema_rules.fill_schema(output.json_schema, text)
        return AssistantMessage(content=json.dumps(filled))
    return AssistantMessage(content=text)
