"""How a Ray backend joins Ray: the cluster at an address, once a head answers there
as Ray's does, or a private Ray started for the process (never by accident a
stranger's), on the loopback interface."""

from __future__ import annotations

import contextlib
import importlib
import ipaddress
import os
import socket
import time
import weakref
from collections.abc import Iterator
from typing import Any

from honeycomb.backends._warden import my_children, ward
from runtime import ConfigError
from runtime.config.endpoints import shown_url

_private: str | None = None
"""The GCS address of the private Ray this process started, once it did."""

_held: weakref.WeakKeyDictionary[object, tuple[str, float]] = weakref.WeakKeyDictionary()
"""The live pools of this process: the GCS address of the Ray each is on, and the CPUs
its actors hold there."""


def start_ray(address: str | None, num_cpus: int | None) -> None:
    """Join the cluster at ``address``, or start a private Ray for this process (None,
    or ``"local"``, as a hive names it): it listens on 127.0.0.1 only, and its
    processes end with this one (on Linux). Nothing when this process started a Ray
    already."""
    global _private
    import ray

    if ray.is_initialized():
        return
    if address == "local":  # Ray's own would listen on every interface, unwatched
        address = None
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
            started = ray.init(**options)
        ward(set(my_children()) - before)  # the processes ray.init started
        _private = (getattr(started, "address_info", None) or {}).get("gcs_address")
        return
    check_address(address)
    if "RAY_AUTH_MODE" not in os.environ and _token_given():
        # A cluster with token authentication: Ray's driver sends the token only
        # when told to, and a head started with one refuses drivers without it.
        _use_token_auth()
    _answers(address)
    # A head on the loopback: Ray would take 127.0.0.1 for the machine's address,
    # where a head that listens on the loopback only cannot be reached.
    with _on_loopback() if _on_this_machine_only(address) else contextlib.nullcontext():
        ray.init(**options)


def check_room(backend: object, actors: int, actor_cpus: float) -> None:
    """Raise unless this process's Ray, when it is the private Ray it started, has the
    CPUs ``actors`` actors of ``actor_cpus`` each ask for beside those its live pools
    hold (:func:`hold_room`): no node joins it, and Ray would never place the others,
    whose pool would wait for them without end (a cluster's nodes may join it: its
    actors wait).

    Raises:
        ConfigError: naming ``backend``, what its actors ask for, what the Ray has and
            which pools hold it, and what to change.
    """
    import ray

    if _private is None or ray.get_runtime_context().gcs_address != _private:
        return
    have = float(ray.cluster_resources().get("CPU", 0.0))  # type: ignore[no-untyped-call]
    holders = [
        (pool, cpus)
        for pool, (gcs, cpus) in _held.items()
        if gcs == _private and cpus and pool is not backend
    ]
    need = actors * actor_cpus
    if need + sum(cpus for _, cpus in holders) <= have:
        return
    raise ConfigError(
        f"{backend!r}: its actors ask for {need:g} CPUs in all (actor_cpus={actor_cpus:g} "
        f"each), and the private Ray this process started has {have:g} (num_cpus)"
        f"{_holding(holders)}: Ray would never place them all, and they would be waited "
        "for without end; lower actors or actor_cpus (0 lets the actors share the CPUs), "
        "or raise num_cpus"
    )


def _holding(holders: list[tuple[object, float]]) -> str:
    """What of a private Ray's CPUs live pools hold, and which, as :func:`check_room`
    tells it ("" when none)."""
    if not holders:
        return ""
    held = sum(cpus for _, cpus in holders)
    pools = ", ".join(f"{pool!r} holds {cpus:g}" for pool, cpus in holders)
    return f", {held:g} of them held by live pools until they stop ({pools})"


def hold_room(backend: object, actors: int, actor_cpus: float) -> None:
    """Count the CPUs of ``backend``'s pool, just made, as held on this process's Ray
    until :func:`free_room` (or until ``backend`` is gone, its actors with it)."""
    import ray

    _held[backend] = (ray.get_runtime_context().gcs_address, actors * actor_cpus)


def free_room(backend: object) -> None:
    """Count ``backend``'s pool, stopped, as holding no CPUs any more."""
    _held.pop(backend, None)


_FORMS = (
    "name the head's GCS port (ray start --head --port=..., 6379 by default) as "
    "host:port (an IPv6 address in brackets: [::1]:6379), or ray://host:port for Ray's "
    "client server"
)


def check_address(address: str) -> None:
    """Raise unless ``address`` is a head's as Ray reads one: ``host:port`` (an IPv6
    address in brackets), ``ray://host:port`` or ``auto``. Ray told some mistakes in words of its
    own (``Invalid address format: 127.0.0.1``), and took others for another address:
    a port with a blank after it was waited for some fourteen minutes, and a port past
    65535 is taken modulo 65536 by a socket (70000 is 4464).

    Raises:
        ConfigError: naming the address (its password masked), what is wrong with it,
            and what to write.
    """
    problem = address_problem(address)
    if problem is not None:
        raise ConfigError(problem)


def address_problem(address: str) -> str | None:
    """What is wrong with ``address`` as a head's, said as :func:`check_address` says
    it; None: nothing."""
    problem = _problem(address)
    if problem is None:
        return None
    return f"the address of Ray's head, {shown_url(address)}, {problem}"


def _problem(address: str) -> str | None:
    """What is wrong with ``address`` as a head's, and what to write; None: nothing
    (``auto`` too, Ray's own: the cluster ``ray start`` started on this machine)."""
    if address == "auto":
        return None
    if any(c.isspace() for c in address):
        return f"holds a blank ({shown_url(address)!r}): write it without one"
    scheme, sep, rest = address.partition("://")
    if sep and scheme != "ray":
        return f"is a URL ({scheme}://), which no Ray head answers at: {_FORMS}"
    where = rest.rpartition("@")[2] if sep else address  # (ray://user:password@host:port)
    if where.startswith("["):
        host, bracket, after = where[1:].partition("]")
        if not bracket or not _is_ipv6(host):
            return f"names no IPv6 address in brackets: {_FORMS}"
        colon, port = after[:1], after[1:]
        if after and colon != ":":
            return f"has {after!r} after its IPv6 address, not :port: {_FORMS}"
    else:
        host, colon, port = where.rpartition(":")
        if ":" in host:  # an IPv6 address, whose port (if any) is not told from it
            return (
                "names an IPv6 address without brackets: write the address in brackets "
                "and its port after them ([::1]:6379)"
            )
    if not colon or not port:
        return f"names no port: {_FORMS}"
    if not host:
        return f"names no host: {_FORMS}"
    if not (port.isascii() and port.isdigit()):
        return f"names port {port!r}, which is no number: {_FORMS}"
    if not 0 < int(port) <= 65535:
        past = "past 65535" if int(port) else "which no server listens on"
        return f"names port {port}, {past}: {_FORMS}"
    return None


def _is_ipv6(host: str) -> bool:
    try:
        return isinstance(ipaddress.ip_address(host), ipaddress.IPv6Address)
    except ValueError:
        return False


REACH_S = 10.0
"""How long a head named by ``host:port`` has to answer (it may be starting) before
its driver gives up on it."""


def _answers(address: str) -> None:
    """Return once a head answers at ``address`` (a head's ``host:port``; any other
    form, as Ray reads it) as Ray's GCS does (a gRPC server: HTTP/2), within
    :data:`REACH_S`.

    Raises:
        ConnectionError: nothing answered, or something that is no Ray head did (a
            dashboard's port, a server that says nothing): Ray's driver would wait for
            a GCS there some fourteen minutes (twenty tries of forty seconds), the
            event loop held.
    """
    host, _, port = address.rpartition(":")
    if "://" in address or not host or not port.isdigit():
        return
    deadline = time.monotonic() + REACH_S
    while True:
        left = max(deadline - time.monotonic(), 0.1)
        try:
            head = socket.create_connection((host.strip("[]"), int(port)), timeout=left)
        except OSError as exc:
            if isinstance(exc, socket.gaierror) and exc.errno == socket.EAI_NONAME:
                raise ConnectionError(  # no wait makes a name known
                    f"no machine is named {host.strip('[]')!r} ({exc}): is the address "
                    f"of Ray's head, {address}, spelled right?"
                ) from None
            if time.monotonic() >= deadline:
                raise ConnectionError(
                    f"nothing answers at {address} within {REACH_S:g}s ({exc}): is Ray's "
                    "head running there (ray start --head), its port open to this machine?"
                ) from None
            time.sleep(0.25)
            continue
        with head:
            _speaks_http2(head, address, deadline)
        return


_HTTP2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
"""A client's opening of an HTTP/2 connection: its preface and an empty SETTINGS frame."""


def _speaks_http2(head: socket.socket, address: str, deadline: float) -> None:
    """Return if what answers on ``head`` answers an HTTP/2 client as a gRPC server
    (Ray's GCS) does, with a SETTINGS frame, before ``deadline`` (with TLS, which Ray
    turns on with ``RAY_USE_TLS``, Ray's driver finds out).

    Raises:
        ConnectionError: it closed the connection, said nothing, or said something else.
    """
    if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
        return
    head.settimeout(max(deadline - time.monotonic(), 0.1))
    said = b""
    try:
        head.sendall(_HTTP2_HELLO)
        while len(said) < 9:  # a frame's header: its length, type, flags and stream
            more = head.recv(9 - len(said))
            if not more:
                break
            said += more
    except TimeoutError:
        why = f"it said nothing within {REACH_S:g}s"
    except OSError as exc:
        why = f"it closed the connection ({exc})"
    else:
        why = "it closed the connection"
        if said.startswith(b"HTTP/"):
            why = "it answered as an HTTP/1 server, a dashboard's port say"
        elif len(said) == 9 and said[3] == 4:  # a SETTINGS frame
            return
        elif said:
            why = "it answered as no gRPC server does"
    raise ConnectionError(
        f"{address} is not a Ray head: it answers a connection, but not as Ray's GCS does "
        f"({why}): name the head's GCS port (ray start --head --port=..., 6379 by "
        "default), or ray://host:port for Ray's client server"
    )


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


def _token_given() -> bool:
    """Whether a Ray authentication token is at hand, where Ray looks for one (its
    environment variables, then ``~/.ray/auth_token``)."""
    if os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return True
    return os.path.isfile(os.path.join(os.path.expanduser("~"), ".ray", "auth_token"))
