"""What a Ray backend sets up before its workers run: Ray itself (joined, or started
for the process, never by accident a stranger's), and what an actor is sent to make a
role's setup and a model again."""

from __future__ import annotations

import contextlib
import importlib
import io
import ipaddress
import os
import socket
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import msgspec
from pydantic import BaseModel

from honeycomb.backends._standins import DriverCassette, DriverLimiter, DriverReplay, StoodFor
from honeycomb.backends._warden import my_children, ward
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
    if endpoint._api_key is not None or endpoint._given is not None:
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


def start_ray(address: str | None, num_cpus: int | None) -> None:
    """Join the cluster at ``address``, or start a private Ray for this process (None):
    it listens on 127.0.0.1 only, and its processes end with this one (on Linux).
    Nothing when this process started a Ray already."""
    import ray

    if ray.is_initialized():
        return
    # Ray's usage statistics are off unless the user turned them on.
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    options: dict[str, Any] = {
        "address": address or "local",
        "include_dashboard": False,
        "log_to_driver": False,
        "configure_logging": False,
    }
    if address is None:
        # A private Ray for this process listens on this machine only, with token
        # authentication (Ray's default for a new local Ray, which it warns of when
        # nobody chose it).
        options["_node_ip_address"] = "127.0.0.1"
        if num_cpus is not None:
            options["num_cpus"] = num_cpus
        if "RAY_AUTH_MODE" not in os.environ:
            _use_token_auth()
        before = set(my_children())
        with _on_loopback():
            ray.init(**options)
        ward(set(my_children()) - before)  # the processes ray.init started
        return
    if "RAY_AUTH_MODE" not in os.environ and _token_given():
        # A cluster with token authentication: Ray's driver sends the token only
        # when told to, and a head started with one refuses drivers without it.
        _use_token_auth()
    _answers(address)
    # A head on the loopback: Ray would take 127.0.0.1 for the machine's address,
    # where a head that listens on the loopback only cannot be reached.
    with _on_loopback() if _on_this_machine_only(address) else contextlib.nullcontext():
        ray.init(**options)


REACH_S = 10.0
"""How long a head named by ``host:port`` has to answer (it may be starting) before
its driver gives up on it."""


def _answers(address: str) -> None:
    """Return once something answers at ``address`` (a head's ``host:port``; any
    other form, as Ray reads it), within :data:`REACH_S`.

    Raises:
        ConnectionError: nothing answered: Ray's driver would wait for a GCS there some
            fourteen minutes (twenty tries of forty seconds), the event loop held.
    """
    host, _, port = address.rpartition(":")
    if "://" in address or not host or not port.isdigit():
        return
    deadline = time.monotonic() + REACH_S
    while True:
        left = max(deadline - time.monotonic(), 0.1)
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=left):
                return
        except OSError as exc:
            if time.monotonic() >= deadline:
                raise ConnectionError(
                    f"nothing answers at {address} within {REACH_S:g}s ({exc}): is Ray's "
                    "head running there (ray start --head), its port open to this machine?"
                ) from None
        time.sleep(0.25)


def _on_this_machine_only(address: str) -> bool:
    """Whether ``address`` (``host:port``) is a head's on the loopback interface."""
    if "://" in address:  # a Ray client's (ray://): Ray connects to it as it is
        return False
    host = address.rpartition(":")[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host's name
        return False


@contextlib.contextmanager
def _on_loopback() -> Iterator[None]:
    """Ray's servers listen on the loopback interface only when their node's address
    is 127.0.0.1, but Ray gives a new node the machine's address even when told
    127.0.0.1 (so that other machines may join it), and takes a head's 127.0.0.1 for
    that address too, unless its clusters are off (as on macOS;
    ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER``, which Ray reads as it is imported). They are
    off while a private Ray starts, and while a driver joins a head on the loopback."""
    constants = importlib.import_module("ray._private.ray_constants")
    before = getattr(constants, "ENABLE_RAY_CLUSTER", None)
    if before is None:  # a Ray that decides it otherwise (the tests say if it listens wide)
        yield
        return
    setattr(constants, "ENABLE_RAY_CLUSTER", False)  # noqa: B010 (a module of Ray's)
    try:
        yield
    finally:
        setattr(constants, "ENABLE_RAY_CLUSTER", before)  # noqa: B010


def _use_token_auth() -> None:
    os.environ["RAY_AUTH_MODE"] = "token"
    # Ray reads its configuration as it is imported: read it again (as Ray does itself
    # when it turns token authentication on; a Ray without it has none).
    with contextlib.suppress(ImportError, AttributeError):
        importlib.import_module("ray._raylet").Config.initialize("")


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


def _token_given() -> bool:
    """Whether a Ray authentication token is at hand, where Ray looks for one (its
    environment variables, then ``~/.ray/auth_token``)."""
    if os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return True
    return os.path.isfile(os.path.join(os.path.expanduser("~"), ".ray", "auth_token"))


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
