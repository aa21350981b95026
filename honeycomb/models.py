"""Models: the :class:`Model` protocol and what a model call exchanges, the adapters
(OpenAI-compatible chat completions and the Responses API, llama.cpp in this process,
the offline model), the wrappers that add retries, prices and rate limits,
the text and JSON tool protocols for models without function calling, embeddings, and
the cassette that records a model's calls and replays them with no network.

    from honeycomb.models import RetryingModel, TextToolModel

The OpenAI adapters load on first use: they need ``openai``, which takes a second to
import. The models most programs use (``Model``, ``OpenAIModel``, ``OfflineModel``,
``RetryPolicy``, ``WrapperModel``, the request and response) are in ``honeycomb`` too.
"""

import typing

from honeycomb.offline import OfflineModel
from runtime import lazy
from runtime.limits.quota import QuotaLeft
from runtime.limits.ratelimit import AdaptiveLimiter, RateLimitedModel
from runtime.limits.retry import RetryingModel
from runtime.limits.retry_policy import RetryPolicy
from runtime.memory import Embeddings
from runtime.model import (
    Model,
    ModelRequest,
    ModelResponse,
    OutputSchema,
    StreamingModel,
    ToolSchema,
    WrapperModel,
)
from runtime.models.llama import LlamaModel
from runtime.models.llama_server import LlamaServer
from runtime.models.pricing import Price, PricedModel
from runtime.models.protocols.json_tools import JsonToolModel
from runtime.models.protocols.text_tools import TextToolModel

if typing.TYPE_CHECKING:
    from runtime.models.cassette_errors import RecordedFailure
    from runtime.models.cassettes import (
        AttemptSpent,
        Cassette,
        CassetteWriter,
        Decided,
        Embedded,
        Recorded,
        Searched,
    )
    from runtime.models.layers.cassette import (
        RecordingModel,
        ReplayModel,
        cassette,
        cassette_case,
    )
    from runtime.models.layers.cassette_embeddings import (
        RecordingEmbeddings,
        ReplayEmbeddings,
        cassette_memory,
    )
    from runtime.models.openai.chat import OpenAIModel
    from runtime.models.openai.embeddings import OpenAIEmbeddings
    from runtime.models.openai.responses import OpenAIResponsesModel

__all__ = [
    "AdaptiveLimiter",
    "AttemptSpent",
    "Cassette",
    "CassetteWriter",
    "Decided",
    "Embedded",
    "Embeddings",
    "JsonToolModel",
    "LlamaModel",
    "LlamaServer",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "OfflineModel",
    "OpenAIEmbeddings",
    "OpenAIModel",
    "OpenAIResponsesModel",
    "OutputSchema",
    "Price",
    "PricedModel",
    "QuotaLeft",
    "RateLimitedModel",
    "Recorded",
    "RecordedFailure",
    "RecordingEmbeddings",
    "RecordingModel",
    "ReplayEmbeddings",
    "ReplayModel",
    "RetryPolicy",
    "RetryingModel",
    "Searched",
    "StreamingModel",
    "TextToolModel",
    "ToolSchema",
    "WrapperModel",
    "cassette",
    "cassette_case",
    "cassette_memory",
]

if not typing.TYPE_CHECKING:  # type checkers see the imports above, and no other name
    __getattr__ = lazy.lazy_names(
        __name__,
        globals(),
        (
            "runtime.models",
            "runtime.models.layers.cassette",
            "runtime.models.layers.cassette_embeddings",
            "runtime.models.cassette_errors",
            "runtime.models.cassettes",
        ),
    )
