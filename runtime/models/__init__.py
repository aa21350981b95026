"""Models: the OpenAI adapters (:mod:`~runtime.models.openai`), the text and JSON tool
protocols for models without function calling (:mod:`~runtime.models.protocols`),
llama.cpp in this process, prices, the checks on what a model returns and the token
estimate. The :class:`~runtime.model.Model` protocol itself is a value of
:mod:`runtime.model`. Every model here loads on first use."""

from typing import TYPE_CHECKING

from runtime.lazy import lazy_attributes

if TYPE_CHECKING:
    from runtime.models.llama import LlamaModel
    from runtime.models.openai.chat import OpenAIModel
    from runtime.models.openai.embeddings import OpenAIEmbeddings
    from runtime.models.openai.responses import OpenAIResponsesModel
    from runtime.models.pricing import Price, PricedModel
    from runtime.models.protocols.json_tools import JsonToolModel
    from runtime.models.protocols.text_tools import TextToolModel

__all__ = [
    "JsonToolModel",
    "LlamaModel",
    "OpenAIEmbeddings",
    "OpenAIModel",
    "OpenAIResponsesModel",
    "Price",
    "PricedModel",
    "TextToolModel",
]

_LAZY = {
    "JsonToolModel": "runtime.models.protocols.json_tools",
    "LlamaModel": "runtime.models.llama",
    "OpenAIEmbeddings": "runtime.models.openai.embeddings",
    "OpenAIModel": "runtime.models.openai.chat",
    "OpenAIResponsesModel": "runtime.models.openai.responses",
    "Price": "runtime.models.pricing",
    "PricedModel": "runtime.models.pricing",
    "TextToolModel": "runtime.models.protocols.text_tools",
}

__getattr__ = lazy_attributes("runtime.models", _LAZY, globals())
