"""Models for tests and offline runs: :class:`ScriptedModel` answers from a script,
:class:`FunctionModel` with a function of the request; :func:`call` writes a tool call
into a script. They need no network and record every request they get.

    from honeycomb.testing import ScriptedModel, call

    model = ScriptedModel([call("lookup", {"key": "a"}), "a is 1."])
"""

from runtime.testing import FunctionModel, ScriptedModel, ScriptStep, call

__all__ = ["FunctionModel", "ScriptStep", "ScriptedModel", "call"]
