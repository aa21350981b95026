"""``honeycomb serve``: the runs of a run store in a browser (see :mod:`honeycomb.web`)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import os
import secrets
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from honeycomb.cli.approve import HiveTools
from honeycomb.cli.exits import ExitStatus
from honeycomb.cli.loop import stops_handled_by
from honeycomb.cli.options import Parser, integer
from honeycomb.cli.resuming import models_thinking, other_models, resume_hint, started_with
from honeycomb.cli.stores import STORE_HELP, opened_store, store_argument
from honeycomb.executor import Executor
from honeycomb.store import RunStore
from runtime import HoneycombError, RunBusy, RunFailed, StoreError

if TYPE_CHECKING:
    import uvicorn

    from honeycomb.web import StoreApprovals

__all__ = ["MIN_TOKEN", "TOKEN_ENV", "Resumer", "add_serve", "serve_command", "store_approvals"]

TOKEN_ENV = "HONEYCOMB_SERVE_TOKEN"


def add_serve(commands: argparse._SubParsersAction[Parser], store: Path) -> None:
    serve = commands.add_parser("serve", help="watch runs and approve calls in a browser")
    serve.add_argument(
        "--store", type=store_argument, default=store, help=f"{STORE_HELP} (default: {store})"
    )
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        metavar="ADDR",
        help="the interface to listen on (default 127.0.0.1: this machine alone)",
    )
    serve.add_argument(
        "--port",
        type=integer(0, 65535),
        default=8321,
        metavar="N",
        help="the port, 0 to 65535 (default 8321; 0: any free one)",
    )
    serve.add_argument(
        "--token",
        default=None,
        help=(
            f"what every request must carry (env {TOKEN_ENV}; default: one kept beside "
            "the store, printed)"
        ),
    )
    serve.set_defaults(handler=serve_command)


MIN_TOKEN = 16
"""The shortest token of your own ``honeycomb serve`` takes on another interface than
loopback (a short one is guessed: every request may try one)."""


def serve_command(args: argparse.Namespace) -> ExitStatus:
    try:
        import uvicorn

        from honeycomb.web import base_path, create_app
        from honeycomb.web.app import end_streams
    except ImportError as exc:
        print(
            f"honeycomb serve needs Starlette and uvicorn ({exc.name} is missing): "
            "pip install 'honeycomb-agents[web]'",
            file=sys.stderr,
        )
        return ExitStatus.UNUSABLE
    given = args.token or os.environ.get(TOKEN_ENV) or None
    refused = _refused_token(given, args.host)
    if refused is not None:
        print(f"honeycomb serve: {refused}", file=sys.stderr)
        return ExitStatus.UNUSABLE
    try:
        store = opened_store(args.store, make=True)  # refused now, as `honeycomb runs` does
        token = given or _kept_token(args.store)
    except StoreError as exc:
        print(str(exc), file=sys.stderr)
        return ExitStatus.UNUSABLE
    try:
        listening = _listen(args.host, args.port)
    except OSError as exc:
        print(f"honeycomb serve: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return ExitStatus.UNUSABLE
    port = listening.getsockname()[1]
    host = f"[{args.host}]" if ":" in args.host else args.host
    base = base_path(token)
    address = f"http://{host}:{port}{base}"
    shown = f"{address}?token={token}" if given is None else f"{address}?token=<your token>"
    print(f"serving the runs of {store.where} at {shown}", flush=True)
    print("(Ctrl-C stops it)", flush=True)
    # The store as shown (a URL without its password), as every command names it: the
    # page says how a run goes on, and the server, on stderr, how one it cut off does.
    resumer = Resumer(store, store.where)
    app = create_app(
        store,
        token=token,
        approvals=store_approvals(store, resumer=resumer),
        base=base,
        resume_hint=lambda run_id: resume_hint(run_id, store.where),
        not_continued=resumer.failure,
    )
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, timeout_graceful_shutdown=2, lifespan="off"
    )
    # Ctrl-C is how it stops: uvicorn hands it on once it shut down.
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_server(config, lambda: end_streams(app)).serve(sockets=[listening]))
    print("stopped", flush=True)
    return ExitStatus.OK


def store_approvals(
    store: RunStore, where: Path | str | None = None, *, resumer: Resumer | None = None
) -> StoreApprovals:
    """The approvals ``honeycomb serve`` decides: in ``store`` (named ``where`` in the
    commands it says: as shown, a URL without its password), edited arguments checked
    against the tools of the run's hive file, and a run left with no call undecided
    continued from it (by ``resumer``, else a :class:`Resumer` of its own)."""
    from honeycomb.web import StoreApprovals

    resumer = resumer or Resumer(store, where)
    return StoreApprovals(store, resumer, tools=HiveTools(store))


TOKEN_FILE = ".serve-token"
"""Beside a store file, the suffix of the file that keeps its server's default token."""


def _kept_token(where: Path | str) -> str:
    """The token of a server of the store ``where`` not given one: kept beside a store
    file (``runs.db.serve-token``, readable by its owner only), so that the server,
    started again, has the same address and the pages open on it follow their runs
    again; a new one each start for a store at a URL, or where none can be kept.

    Raises:
        StoreError: when the kept token's file is there but cannot be read.
    """
    if not isinstance(where, Path):
        return secrets.token_urlsafe(24)
    kept = where.with_name(where.name + TOKEN_FILE)
    try:
        if (kept.stat().st_mode & 0o077) == 0:  # another user's reading it is no secret
            token = kept.read_text("utf-8").strip()
            if len(token) >= MIN_TOKEN:
                return token
    except FileNotFoundError:
        pass
    except (OSError, UnicodeDecodeError) as exc:
        raise StoreError(f"cannot read the server's kept token: {exc}", path=str(kept)) from exc
    token = secrets.token_urlsafe(24)
    made = kept.with_name(f"{kept.name}.{os.getpid()}")
    try:
        descriptor = os.open(made, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            out.write(token + "\n")
        os.replace(made, kept)  # whole, or not at all
    except OSError:
        made.unlink(missing_ok=True)
        return token  # not kept: the next start makes another
    return token


def _server(config: uvicorn.Config, stopping: Callable[[], None]) -> uvicorn.Server:
    """A uvicorn server that calls ``stopping`` as it stops, before it waits for the
    requests under way: the app's event streams end then (one left open would hold it
    up until cancelled, with a traceback). Ctrl-C and SIGTERM (how a service manager
    stops it) each stop it so, and the command then ends as it does: the runs it
    continues cut off and said so, ``stopped``, status 0. (uvicorn raises the signal
    again once it stopped, and SIGTERM's default killed the process there, before the
    runs it continued were recorded as cut off.)"""
    import uvicorn

    class Server(uvicorn.Server):
        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            stopping()
            await super().shutdown(sockets)

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            if threading.current_thread() is not threading.main_thread():
                yield  # only the main thread hears signals
                return
            with stops_handled_by(self.handle_exit):
                yield

    return Server(config)


def _refused_token(given: str | None, host: str) -> str | None:
    """Why ``honeycomb serve`` will not listen on ``host`` with the token ``given``
    (None: it will)."""
    if _loopback(host):
        return None
    if given is None:
        return (
            f"listening on {host} needs a token of your own (--token or {TOKEN_ENV}): "
            "without one, anyone who can reach it could approve calls"
        )
    if len(given) < MIN_TOKEN:
        return (
            f"listening on {host} needs a token of at least {MIN_TOKEN} characters "
            f"(--token or {TOKEN_ENV} has {len(given)}): a short one is guessed; "
            "python -c 'import secrets; print(secrets.token_urlsafe(24))' makes one"
        )
    return None


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listening = socket.socket(family, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listening.bind((host, port))
    listening.listen(128)
    return listening


def _stop_actors(executor: Executor) -> None:
    """Stop the actors of the Ray pool a hive with ``backend: ray`` made for a run this
    server continued (Ray itself goes on, for the next): each continued run makes one."""
    pool = executor.shared.backend
    if pool is None:  # the local backend
        return
    from honeycomb.backends import RayBackend  # a hive on Ray: its modules are loaded

    if isinstance(pool, RayBackend):
        pool.stop()


class Resumer:
    """Continues, in the server's process, a run of ``store`` once a decision left it
    waiting on nothing, as ``honeycomb resume`` would (from its hive file). What
    happens is said on stderr: the run itself is in the store. A run another process
    holds (the run's own, which went on at once with a decision recorded as it ended)
    goes on there: that is said, not a failure. A run this process continues already
    (its last calls decided at once, each decision asking) is continued once; one that
    its continuing left waiting again, and whose calls were decided before it was done
    (as it ended, too late for the run to see), is continued again."""

    def __init__(self, store: RunStore | Path | str, where: Path | str | None = None) -> None:
        self.store = store if isinstance(store, RunStore) else RunStore(store)
        self.where = where if where is not None else self.store.where
        self.going: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()  # decided while this process continued them
        self._failed: dict[str, str] = {}  # why it could not continue them, last tried

    def failure(self, run_id: str) -> str | None:
        """Why this process could not continue ``run_id`` when it last tried (None: it
        did, or has not tried): the run's page says so, beside how it goes on."""
        return self._failed.get(run_id)

    def __call__(self, run_id: str) -> None:
        if run_id in self.going:  # its resume reads every decision recorded by now
            self._again.add(run_id)  # unless it ended first: looked at again then
            print(
                f"run {run_id}: decided; this process continues it already",
                file=sys.stderr,
                flush=True,
            )
            return
        task = asyncio.get_running_loop().create_task(self.resume(run_id))
        self.going[run_id] = task
        task.add_done_callback(lambda _: self.going.pop(run_id, None))

    async def resume(self, run_id: str) -> None:
        """Continue ``run_id``, and again while it is left waiting on calls decided
        as it went on; cut off (the server stops), say how it goes on."""
        try:
            self._again.discard(run_id)
            await self._resume(run_id)
            while run_id in self._again:
                self._again.discard(run_id)
                if await self._left_waiting(run_id):
                    await self._resume(run_id)
        except asyncio.CancelledError:
            hint = resume_hint(run_id, self.where)
            print(
                f"run {run_id}: cut off as this server stopped; continue it with {hint}",
                file=sys.stderr,
                flush=True,
            )
            raise

    async def _left_waiting(self, run_id: str) -> bool:
        """Whether ``run_id``, made from a hive file, waits with no call a person can
        still decide: its continuing ended as its last calls were decided."""
        from honeycomb.run.decide import pending_of
        from honeycomb.web.approvals import decidable

        found = await self.store.summary(run_id)
        if found is None or found.source is None or found.status != "waiting":
            return False
        return not any(map(decidable, await pending_of(self.store, run_id)))

    async def _resume(self, run_id: str) -> None:
        found = await self.store.summary(run_id)  # read in a thread: not in the loop
        if found is None or found.source is None:
            print(
                f"run {run_id}: decided; it was not started from a hive file, so continue it "
                f"with Executor.resume({run_id!r}) from the code that made it",
                file=sys.stderr,
            )
            return
        print(f"run {run_id}: decided; continuing it", file=sys.stderr, flush=True)
        self._failed.pop(run_id, None)
        try:
            executor = Executor.from_yaml(found.source, store=self.store)
            try:
                other = await other_models(self.store, run_id, models_thinking(executor))
                if other is not None:  # what chose its models is not kept: never guess
                    before, now = other
                    self._cannot(
                        run_id,
                        f"it was answered by {before} so far, and its hive file would "
                        f"continue it on {now}. {started_with()}",
                    )
                    return
                result = await executor.resume(run_id)
            finally:
                _stop_actors(executor)
        except RunBusy as exc:
            if exc.expired:  # its holder may be gone: the error says how to take it over
                self._cannot(run_id, exc)
            else:
                where = f" (pid {exc.pid} on host {exc.host!r})" if exc.pid is not None else ""
                print(
                    f"run {run_id}: another process carries it on{where}",
                    file=sys.stderr,
                    flush=True,
                )
            return
        except RunFailed as exc:  # it went on, and ended so
            print(f"run {run_id}: continued, and failed: {exc}", file=sys.stderr, flush=True)
            return
        except (HoneycombError, OSError) as exc:
            self._cannot(run_id, exc)
            return
        print(f"run {run_id}: {result.status}", file=sys.stderr, flush=True)

    def _cannot(self, run_id: str, why: BaseException | str) -> None:
        """Keep and say why ``run_id`` cannot be continued here."""
        self._failed[run_id] = str(why)
        print(f"run {run_id}: cannot continue it: {why}", file=sys.stderr, flush=True)
