"""Any OpenAI-compatible endpoint through the official ``openai`` client: chat
completions (:mod:`~runtime.models.openai.chat`), the Responses API, embeddings, and
what they share (:mod:`~runtime.models.openai.endpoint`, the request's wire form in
:mod:`~runtime.models.openai.request`, streamed chunks in
:mod:`~runtime.models.openai.stream`). Each loads ``openai`` on first use."""

from typing import TYPE_CHECKING

from runtime.lazy import lazy_attributes

if TYPE_CHECKING:
    from runtime.models.openai.chat import OpenAIModel
    from runtime.models.openai.embeddings import OpenAIEmbeddings
    from runtime.models.openai.endpoint import OpenAIEndpoint
    from runtime.models.openai.responses import OpenAIResponsesModel

__all__ = ["OpenAIEmbeddings", "OpenAIEndpoint", "OpenAIModel", "OpenAIResponsesModel"]

_LAZY = {
    "OpenAIEmbeddings": "runtime.models.openai.embeddings",
    "OpenAIEndpoint": "runtime.models.openai.endpoint",
    "OpenAIModel": "runtime.models.openai.chat",
    "OpenAIResponsesModel": "runtime.models.openai.responses",
}

__getattr__ = lazy_attributes("runtime.models.openai", _LAZY, globals())
