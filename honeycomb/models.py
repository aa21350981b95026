"""Models: the :class:`Model` protocol and what a model call exchanges, the adapters
(OpenAI-compatible chat completions and the Responses API, llama.cpp in this process,
the offline model), the wrappers that add retries, prices and rate limits,
the text and JSON tool protocols for models without function calling, and embeddings.

    from honeycomb.models import RetryingModel, TextToolModel

The OpenAI adapters load on first use: they need ``openai``, which takes a second to
import. The models most programs use (``Model``, ``OpenAIModel``, ``OfflineModel``,
``RetryPolicy``, ``WrapperModel``, the request and response) are in ``honeycomb`` too.
"""

from typing import TYPE_CHECKING

from honeycomb.offline import OfflineModel
from runtime._lazy import lazy_attributes
from runtime._llama_server import LlamaServer
from runtime.json_tools import JsonToolModel
from runtime.llama import LlamaModel
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
from runtime.pricing import Price, PricedModel
from runtime.quota import QuotaLeft
from runtime.ratelimit import AdaptiveLimiter, RateLimitedModel
from runtime.retry import RetryingModel, RetryPolicy
from runtime.text_tools import TextToolModel

if TYPE_CHECKING:
    from runtime.embeddings import OpenAIEmbeddings
    from runtime.openai_model import OpenAIModel
    from runtime.openai_responses import OpenAIResponsesModel

__all__ = [
    "AdaptiveLimiter",
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
    "RetryPolicy",
    "RetryingModel",
    "StreamingModel",
    "TextToolModel",
    "ToolSchema",
    "WrapperModel",
]

__getattr__ = lazy_attributes(
    __name__, globals(), ("runtime.openai_model", "runtime.openai_responses", "runtime.embeddings")
)
