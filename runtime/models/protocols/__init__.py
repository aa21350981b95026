"""Tools for models without function calling: the text protocol
(:class:`~runtime.models.protocols.text_tools.TextToolModel`, its wire form in
:mod:`~runtime.models.protocols.text_wire`, the reader of replies in
:mod:`~runtime.models.protocols.actions`) and the JSON protocol whose schema the
server enforces (:mod:`~runtime.models.protocols.json_tools`, wire form in
:mod:`~runtime.models.protocols.json_wire`). Both load on first use."""

from typing import TYPE_CHECKING

from runtime.lazy import lazy_attributes

if TYPE_CHECKING:
    from runtime.models.protocols.json_tools import JsonToolModel
    from runtime.models.protocols.text_tools import ProtocolModel, TextToolModel

__all__ = ["JsonToolModel", "ProtocolModel", "TextToolModel"]

_LAZY = {
    "JsonToolModel": "runtime.models.protocols.json_tools",
    "ProtocolModel": "runtime.models.protocols.text_tools",
    "TextToolModel": "runtime.models.protocols.text_tools",
}

__getattr__ = lazy_attributes("runtime.models.protocols", _LAZY, globals())
