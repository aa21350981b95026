"""What a Ray backend sets up before its workers run: what an actor is sent to make a
role's setup and a model again (Ray itself is joined by :mod:`honeycomb.backends._join`)."""

from __future__ import annotations

import importlib
import io
import os
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import msgspec
from pydantic import BaseModel

from honeycomb.backends._standins import DriverCassette, DriverLimiter, DriverReplay, StoodFor
from honeycomb.backends._wire import Pinned
from runtime import AdaptiveLimiter, ConfigError, Model, Tool
from runtime.models.cassettes import Cassette, CassetteWriter
from workers import WorkerSetup

if TYPE_CHECKING:
    from runtime.models.openai.endpoint import OpenAIEndpoint


def recipe(model: Model, held: dict[str, StoodFor]) -> bytes:
    """``model`` as an actor makes it again: pickled as Ray pickles (with cloudpickle: a
    model of the program goes by value), but for what must not cross as it is, wherever
    it stands in the model (under a price, a retry, a model of your own):

    - an OpenAI-compatible endpoint goes as its settings: its API key is read from the
      actor's environment, never sent: from the variable its ``api_key_env`` names (a
      hive's ``api_key: ${NAME}``), else ``OPENAI_API_KEY`` (an endpoint given
      ``api_key=`` or ``client=`` is refused), and its clients are made there;
    - a rate limiter (an endpoint's, a :class:`~runtime.RateLimitedModel`'s) goes as a
      stand-in that holds the driver's for each attempt
      (:class:`~honeycomb.backends._standins.DriverLimiter`): one limiter bounds every
      worker that uses it, wherever it runs;
    - a recording's cassette (a :class:`~runtime.RecordingModel`'s) goes as a stand-in
      that appends each call to the driver's
      (:class:`~honeycomb.backends._standins.DriverCassette`), and a replay's as one
      that asks the driver's for each answer
      (:class:`~honeycomb.backends._standins.DriverReplay`): each recorded call is
      given once across every worker, wherever it runs.

    ``held`` keeps what the stand-ins stand for, by their keys.

    Raises:
        ConfigError: for an endpoint given its API key as an argument (it would cross
            the cluster in the clear), or a model that cannot be pickled.
    """
    # No model holds an endpoint unless its module is loaded: importing it to look
    # would load the openai SDK (a second, in the run's event loop) for a model of none.
    endpoints = sys.modules.get("runtime.models.openai.endpoint")
    endpoint: type[OpenAIEndpoint] | None = getattr(endpoints, "OpenAIEndpoint", None)
    cloudpickle = importlib.import_module("ray.cloudpickle")  # the ray extra's

    class Sending(cloudpickle.CloudPickler):  # type: ignore[misc,name-defined]
        def reducer_override(self, obj: Any) -> Any:
            if endpoint is not None and isinstance(obj, endpoint):
                return _endpoint_again, (type(obj), _settings(obj))
            if isinstance(obj, AdaptiveLimiter):
                key = f"limiter-{id(obj)}"
                held[key] = obj
                return DriverLimiter, (key,)
            if isinstance(obj, CassetteWriter):
                key = f"cassette-{id(obj)}"
                held[key] = obj
                return DriverCassette, (key,)
            if isinstance(obj, Cassette):
                key = f"replay-{id(obj)}"
                held[key] = obj
                return DriverReplay, (key, obj.path)
            return super().reducer_override(obj)

    sent = io.BytesIO()
    try:
        Sending(sent).dump(model)
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(
            f"model {model!r} cannot be sent to Ray actors ({type(exc).__name__}: {exc}): "
            "use a model that can be pickled, or an OpenAI-compatible endpoint"
        ) from exc
    return sent.getvalue()


def _settings(endpoint: OpenAIEndpoint) -> dict[str, Any]:
    """What an actor makes ``endpoint`` again from: its settings, never its key.

    Raises:
        ConfigError: for an endpoint given its API key (or a client holding one).
    """
    if endpoint._api_key or endpoint._given is not None:  # "": no key, as it is
        raise ConfigError(
            f"model {endpoint!r}: on Ray, each actor reads the API key from its own "
            "environment (the cluster's nodes', or a hive's "
            "backend.ray.runtime_env.env_vars): drop api_key= (a hive model's api_key: "
            "written out) and client=, which would send it to every actor in the clear, "
            "and name the variable that holds it (api_key_env=, a hive's api_key: "
            "${NAME}), or set OPENAI_API_KEY"
        )
    return {
        "model": endpoint.model,
        "base_url": endpoint.base_url,
        "api_key_env": endpoint.api_key_env,  # its name: the actor reads its own
        "api_key": endpoint._api_key,  # None, or "" (no key: never the actor's OPENAI_API_KEY)
        "timeout": endpoint.timeout,
        "retry": endpoint.retry,
        "settings": endpoint.settings,
        "max_concurrency": None,
        "limiter": endpoint.limiter,  # the driver's, as a stand-in
    }


def _endpoint_again(cls: type[OpenAIEndpoint], settings: dict[str, Any]) -> OpenAIEndpoint:
    """An endpoint made in an actor from what :func:`recipe` sent of it.

    Raises:
        ConfigError: when the actor's environment lacks the variable its key is read
            from, naming it.
    """
    variable = settings.get("api_key_env")
    if variable is not None and not os.environ.get(variable):
        raise ConfigError(
            f"model {settings['model']!r} reads its API key from {variable}, which this "
            f"Ray actor's environment does not have: set {variable} on every node of the "
            "cluster, or give it to the actors in runtime_env's env_vars (a hive's "
            f'backend: {{ray: {{runtime_env: {{env_vars: {{{variable}: "${{{variable}}}"}}}}}}}})'
        )
    return cls(**settings)


class SetupFailed(Exception):
    """A role or model could not be installed in an actor: ``why`` (``model``: the
    model's name, when it was one; ``mistake``: ``why`` is a :class:`ConfigError`'s,
    which says what to fix)."""

    def __init__(self, why: str, model: str | None = None, *, mistake: bool = False) -> None:
        super().__init__(why)
        self.why = why
        self.model = model
        self.mistake = mistake

    def told(self, role: str) -> ConfigError:
        """The error its role's workers fail with, naming the model when it was one."""
        if self.mistake:
            what = f"model {self.model} of role {role!r} could not be made"
            if self.model is None:
                what = f"role {role!r} could not be set up"
            return ConfigError(f"{what} in a Ray actor: {self.why}")
        if self.model is not None:
            return ConfigError(
                f"model {self.model} of role {role!r} could not be made in a Ray actor "
                f"({self.why}): on Ray, a model is pickled to each actor, which imports "
                "the modules of its classes: install them on every node, or ship them "
                "with runtime_env (py_modules)"
            )
        return ConfigError(
            f"role {role!r} could not be set up in a Ray actor ({self.why}): on Ray, "
            "tools and output schemas are imported by path in each actor: install their "
            "modules on every node, or give the actors their folder "
            "(RayBackend.imports_from(folder), runtime_env working_dir or py_modules)"
        )


async def installed(ref: Any) -> None:
    """Wait for an install in an actor (its call's ``ref``).

    Raises:
        SetupFailed: saying why, when what was sent could not be made there (a tool's
            module the actor cannot import, say) or the install itself failed.
    """
    import ray.exceptions

    try:
        why = await ref
    except ray.exceptions.RayTaskError as exc:  # its arguments could not be unpickled
        lines = str(exc).strip().splitlines()  # the error is at the traceback's end
        raise SetupFailed(lines[-1].strip() if lines else type(exc).__name__) from exc
    if isinstance(why, ConfigError):
        raise SetupFailed(why.message, mistake=True)
    if why is not None:
        raise SetupFailed(why)


async def answering(handle: Any) -> bool:
    """Whether the actor of ``handle`` answers a call (False: it died)."""
    import ray.exceptions

    try:
        await handle.pid.remote()
    except ray.exceptions.RayActorError:
        return False
    return True


def unsendable(thing: object) -> str | None:
    """Why Ray cannot send ``thing`` to an actor, if it cannot: it is pickled as Ray
    will (with cloudpickle: functions of ``__main__`` too, by value), so it fails here."""
    dumps: Callable[[object], bytes] = importlib.import_module("ray.cloudpickle").dumps
    try:
        dumps(thing)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def sendable_tools(setup: WorkerSetup) -> list[Tool[Any, Any] | Pinned]:
    """The tools of a setup an actor makes again: its memory's tools are made there, on
    the memory at the driver; a pinned tool goes as its description (its calls come
    back to the driver). Its role and output schema go too.

    Raises:
        ConfigError: naming a tool, or a part of the role (a guard, its output
            schema), that cannot be sent to the actors.
    """
    _check_role(setup)
    mine = {"recall", "remember"} if setup.memory is not None else set()
    tools = [Pinned.of(t) if t.pinned else t for t in setup.tools if t.name not in mine]
    for each in tools:
        why = unsendable(each)
        if why is not None:
            name = each.name if isinstance(each, Tool) else each.options["name"]
            raise ConfigError(
                f"role {setup.role.name!r}: tool {name!r} cannot be sent to Ray actors "
                f"({why}): give it by import path (tools: ['package.module:function']), "
                "or make what it holds picklable"
            )
    return tools


def _check_role(setup: WorkerSetup) -> None:
    """Raise if the role, or its output schema, cannot be sent to the actors.

    Raises:
        ConfigError: naming the role and the part that cannot be sent.
    """
    whose = f"role {setup.role.name!r}"
    check_sendable(setup.role, whose)
    check_sendable(setup.settings.output_type, whose, "output schema")


def check_sendable(value: Any, whose: str, path: str = "") -> None:
    """Raise if ``value`` (a role, the run's guards ...) cannot be sent to the actors,
    naming the innermost part that cannot (``guards.output[0]``), not Ray's report of
    the whole value.

    Raises:
        ConfigError: naming ``whose`` and the part.
    """
    found = _culprit(value, path)
    if found is None:
        return
    where, part, why = found
    shown = getattr(part, "__name__", None) or type(part).__name__
    raise ConfigError(
        f"{whose}: its {where} ({shown}) cannot be sent to Ray actors ({why}): give it by "
        "import path ('package.module:name'), or make what it holds picklable"
    )


def _culprit(value: Any, path: str) -> tuple[str, Any, str] | None:
    """The innermost part of ``value`` (a model's or a struct's fields, a tuple's items)
    that cannot be sent, by its path, with why; None when all of it can be."""
    why = unsendable(value)
    if why is None:
        return None
    names: Iterable[str] = ()
    if isinstance(value, BaseModel):
        names = type(value).model_fields
    elif isinstance(value, msgspec.Struct):
        names = value.__struct_fields__
    parts = [(f"{path}.{n}" if path else n, getattr(value, n)) for n in names]
    if isinstance(value, tuple | list):
        parts = [(f"{path}[{i}]", item) for i, item in enumerate(value)]
    for where, part in parts:
        found = _culprit(part, where)
        if found is not None:
            return found
    return path or type(value).__name__, value, why
