"""What the fuzz tests of the model adapters share: random JSON values, and a model
that hypothesis's synchronous tests drive against the local OpenAI-compatible server."""

from __future__ import annotations

import asyncio

from hypothesis import strategies as st

from runtime import (
    ModelError,
    ModelRequest,
    ModelResponse,
    OpenAIModel,
    OpenAIResponsesModel,
    RetryPolicy,
    UserMessage,
)
from tests.support.openai_server import OpenAIServer, Raw

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
"""Any JSON value, small."""


class Client:
    """One model (``gpt-test``, no retries, no rate limiter) and one event loop for a
    whole module: making an ``openai`` client costs about 0.1s (its SSL context), too
    much to make one per example. (A limiter would hold the call after each 429 half a
    second, as it holds every caller of a model an endpoint slows down.)"""

    def __init__(
        self, server: OpenAIServer, model: type[OpenAIModel] | type[OpenAIResponsesModel]
    ) -> None:
        self.server = server
        self.runner = asyncio.Runner()
        once = RetryPolicy(attempts=1)
        self.model = model("gpt-test", base_url=server.base_url, retry=once, max_concurrency=None)

    def outcome(self, behaviour: Raw) -> ModelResponse | ModelError:
        """What ``complete`` makes of one answer: a response, or the ModelError it
        raised (anything else propagates and fails the test)."""
        self.server.enqueue(behaviour)
        return self.runner.run(self._complete())

    async def _complete(self) -> ModelResponse | ModelError:
        try:
            return await self.model.complete(ModelRequest(messages=(UserMessage(content="hi"),)))
        except ModelError as exc:
            return exc

    def close(self) -> None:
        self.runner.run(self._close())
        self.runner.close()

    async def _close(self) -> None:
        await self.model.client.close()  # the client of the runner's loop
