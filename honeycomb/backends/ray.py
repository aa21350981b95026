"""``RayBackend``: a run's subtask workers in a pool of async Ray actors.

The driver (the process that called ``Executor.run``) keeps the run: the plan, the
scheduler, aggregation, the run store and journal, budgets, exclusive locks,
limiters and events. Each worker runs in one of the pool's actors, many at once on
the actor's event loop, and talks to the driver through one stream (see
:mod:`honeycomb.backends._driver`), which serves it from its services here (the
sendable part of them goes along): a model call is reserved in the budget here
before it is made there; an exclusive key is held here while the call runs there; a
side-effecting call's intent is durable here before it runs there; its checkpoints
and events arrive here in order, in batches.

An actor that dies mid-run (its process killed, its node lost) takes its workers'
calls with it: a worker of a stored run continues on another actor from its last
checkpoint, and the journal keeps a completed side effect from running twice; a
worker with no store fails with :class:`WorkerLost`.

Ray is imported only once a backend is used (the ``ray`` extra).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import itertools
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from honeycomb.backends._actor import Hive
from honeycomb.backends._driver import Driver
from honeycomb.backends._join import (
    address_problem,
    check_address,
    check_room,
    free_room,
    hold_room,
    start_ray,
)
from honeycomb.backends._pool import Actor, cut_off
from honeycomb.backends._setup import (
    SetupFailed,
    check_sendable,
    installed,
    recipe,
    sendable_tools,
)
from honeycomb.backends._standins import StoodFor
from honeycomb.backends._told import Begin, Told
from honeycomb.backends._warden import ward
from honeycomb.backends._wire import (
    Pinned,
    RemoteFailure,
    WorkerLost,
    WorkerSpec,
    sent_services,
)
from runtime import (
    ConfigError,
    HoneycombError,
    LimitedModel,
    Model,
    Tool,
)
from runtime.concurrency import shielded
from runtime.config.endpoints import shown_url
from runtime.limits import Slots
from runtime.limits.room import also_among
from runtime.limits.worktime import waiting_for_room
from runtime.secrets import add_env, masked_with
from workers import LoopState, Worker, WorkerError, WorkerResult, WorkerSetup
from workers.state import LoopSettings

__all__ = ["RayBackend", "RemoteFailure", "WorkerLost", "address_problem", "recipe", "start_ray"]

T = TypeVar("T")

_in_room: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "honeycomb_ray_in_room", default=False
)
"""Set for what the driver does for a worker that has room in an actor."""


class RayBackend:
    """Runs subtask workers in a pool of async Ray actors; the run stays here.

    Args:
        address: The Ray cluster to join (``host:port``, an IPv6 address in brackets,
            or ``ray://host:port``); None (or ``"local"``) starts a private local one
            for this process, never attaching by accident to a cluster already running
            on the machine. A Ray this process already started (``ray.init`` before)
            is used as it is.
        actors: Actors in the pool (each one process, with its own event loop).
        workers_per_actor: Workers one actor runs at once, at most (None: as many as
            the run's policy lets run at once).
        runtime_env: Ray's runtime environment for the actors (``env_vars``,
            ``working_dir``, ``pip`` ...): the actors import roles' tools, output
            schemas and models by import path. The values of ``env_vars`` are
            secrets (:func:`~runtime.secrets.add_env`), masked wherever a run shows
            one while the backend lives.
        actor_cpus: CPUs Ray reserves for each actor (where it places them).
        num_cpus: CPUs of a local Ray started here (None: the machine's).
        switch_interval_s: How long a thread of an actor's process may hold Python's
            GIL while another waits for it (``sys.setswitchinterval``; None: Python's
            5 ms). Sync tools run in threads: at 5 ms, CPU-bound ones hand the GIL
            over so often that two actors on two cores leave each core idle about a
            fifth of the time. A longer interval makes the actor's event loop wait
            that much longer for the GIL while such a tool runs.
        max_actor_deaths: The actors one worker of a stored run may lose: after each
            death but the last it goes on in another actor from its last checkpoint;
            at the last it fails with :class:`WorkerLost`, naming its role and the
            tools it was running (a tool that ends its process would move it on
            forever). A worker of a run with no store fails at the first.

    Raises:
        ConfigError: for an argument out of its range, an ``address`` that is no
            head's (no port, a port that is no number or past 65535, an IPv6 address
            without brackets ...), or ``num_cpus`` with an ``address``, naming it and
            what to write.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        actors: int = 2,
        workers_per_actor: int | None = None,
        runtime_env: Mapping[str, Any] | None = None,
        actor_cpus: float = 1.0,
        num_cpus: int | None = None,
        switch_interval_s: float | None = 0.05,
        max_actor_deaths: int = 3,
    ) -> None:
        if actors < 1:
            raise ConfigError(f"RayBackend: actors must be at least 1, got {actors}")
        if max_actor_deaths < 1:
            raise ConfigError(
                f"RayBackend: max_actor_deaths must be at least 1, got {max_actor_deaths}"
            )
        if workers_per_actor is not None and workers_per_actor < 1:
            raise ConfigError(
                f"RayBackend: workers_per_actor must be at least 1, got {workers_per_actor}"
            )
        if address is not None and address != "local":
            check_address(address)
            if num_cpus is not None:  # (Ray would start no Ray with them: unused)
                raise ConfigError(
                    f"RayBackend: num_cpus is for a local Ray started here; the cluster "
                    f"at {shown_url(address)} has its own CPUs: remove num_cpus (or "
                    "address, to run on a local Ray)"
                )
        self.address = address
        self.actors = actors
        self.workers_per_actor = workers_per_actor
        self.runtime_env = dict(runtime_env or {})
        variables = self.runtime_env.get("env_vars")
        if isinstance(variables, Mapping):  # secrets, as an MCP server's env: masked
            add_env({str(k): v for k, v in variables.items() if isinstance(v, str)}, owner=self)
        if switch_interval_s is not None and switch_interval_s <= 0:
            raise ConfigError(
                f"RayBackend: switch_interval_s must be positive, got {switch_interval_s}"
            )
        self.actor_cpus = actor_cpus
        self.num_cpus = num_cpus
        self.switch_interval_s = switch_interval_s
        self.max_actor_deaths = max_actor_deaths
        self._pool: list[Actor] | None = None
        self._claim = threading.Lock()  # held a moment, to claim the start of the pool
        self._starting: concurrent.futures.Future[None] | None = None  # that start
        # What each object (a setup, a model) comes to, made once: by id, the object
        # kept alive beside it so that its id is not another's.
        self._keys: dict[int, tuple[object, str]] = {}
        self._runs = 0
        self._channels = itertools.count()
        self._slots: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None
        self._recipes: dict[int, tuple[object, bytes]] = {}
        # What the actors' stand-ins stand for (rate limiters, cassettes), by key.
        self._held: dict[str, StoodFor] = {}
        # A role's setup as sent, by its role, tools and settings (a run's workers each
        # have a setup of their own, equal but for a limit the run sets), with its key.
        self._setups: dict[tuple[int, int, LoopSettings], _SentSetup] = {}
        self._folders: list[str] = []  # what the actors import from first (imports_from)

    def __repr__(self) -> str:
        return f"RayBackend(address={self.address or 'local'!r}, actors={self.actors})"

    # --- the pool ----------------------------------------------------------------------

    async def start(self) -> None:
        """Join (or start) Ray and make the actors; the first worker does it if this
        was not awaited before. Starting a Ray blocks the event loop for its first
        seconds: a service awaits this (or calls ``ray.init`` itself) before it serves."""
        while self._pool is None:
            # One start at a time, whatever event loop (thread) asks: an asyncio lock
            # woke a waiter on another loop from the wrong thread, which then hung.
            with self._claim:
                starting, mine = self._starting, self._starting is None
                if starting is None:
                    starting = self._starting = concurrent.futures.Future()
            if not mine:  # (one that failed is started again, by this caller: its error)
                await asyncio.shield(asyncio.wrap_future(starting))
                continue
            try:
                await self._start_pool()
            finally:
                with self._claim:
                    self._starting = None
                starting.set_result(None)

    async def _start_pool(self) -> None:
        # In this thread, blocking the loop once for a few seconds: a Ray started from
        # another thread loses its connection to its own GCS.
        self._init()
        check_room(self, self.actors, self.actor_cpus)
        self._pool = self._new_pool()
        hold_room(self, self.actors, self.actor_cpus)
        # Ready once each has started (its imports done): a failure shows here.
        await asyncio.gather(*(a.handle.pid.remote() for a in self._pool))
        ward()  # a private Ray's processes started since, its actors among them

    def _init(self) -> None:
        start_ray(self.address, self.num_cpus)

    def _new_pool(self) -> list[Actor]:
        """The pool's actors, made.

        Raises:
            ConfigError: when Ray refused their options (a ``runtime_env`` path that
                does not exist, ``env_vars`` that are not text ...), saying which,
                with no value of ``env_vars`` in it (they are secrets).
        """
        try:
            return [self._new_actor() for _ in range(self.actors)]
        except (TypeError, ValueError) as exc:  # Ray checks them as an actor is made
            variables = self.runtime_env.get("env_vars") or {}
            hidden = {str(v): "runtime_env env_vars value" for v in variables.values()}
            told = masked_with(f"{type(exc).__name__}: {exc}", hidden)
            raise ConfigError(
                f"{self!r}: Ray refused the actors' options ({told}): check its "
                "runtime_env and actor_cpus"
            ) from None  # Ray's error, chained, would show the values

    def _new_actor(self) -> Actor:
        import ray

        cls = ray.remote(Hive)
        options: dict[str, Any] = {
            # Its calls at once: a take and a delivery for each event loop of this
            # process that runs workers there, and installs (not one per worker).
            "max_concurrency": 32,
            "num_cpus": self.actor_cpus,
        }
        if self.runtime_env:
            options["runtime_env"] = self.runtime_env
        return Actor(handle=cls.options(**options).remote(self.switch_interval_s))

    async def pids(self) -> list[int]:
        """The process ids of the live actors (for fault tests and monitoring)."""
        await self.start()
        assert self._pool is not None
        live = [a for a in self._pool if not a.dead]
        return list(await asyncio.gather(*(a.handle.pid.remote() for a in live)))

    def stop(self) -> None:
        """Kill the pool's actors (a later worker makes a new pool); Ray itself goes on
        (``ray.shutdown()`` stops a Ray this process started)."""
        import ray

        pool, self._pool = self._pool, None
        free_room(self)
        for actor in pool or []:
            actor.stopped = True  # what a worker lost with it is told
            with contextlib.suppress(Exception):
                ray.kill(actor.handle)

    def _pick(self, avoid: Actor | None = None) -> Actor:
        """The least loaded live actor (another than ``avoid``, if there is one); a
        dead one is replaced in the pool by a new actor first."""
        assert self._pool is not None
        for i, actor in enumerate(self._pool):
            if actor.dead:
                self._pool[i] = self._new_actor()
        choices = [a for a in self._pool if a is not avoid] or self._pool
        return min(choices, key=lambda a: a.running)

    def imports_from(self, *folders: Path | str) -> None:
        """Have the actors import modules from ``folders`` too, first (after those given
        before): a hive's folder, whose tools sit beside it, as its own ``backend:
        ray`` has them (``Executor.from_hive`` gives a pool the folders of its hive and
        of the hives it calls as tools). A running actor takes them before its next
        worker's role is installed there. Paths of this machine: on a cluster, ship
        the modules with ``runtime_env`` (``working_dir``, ``py_modules``)."""
        for folder in map(str, folders):
            if folder not in self._folders:
                self._folders.append(folder)

    def _key(self, thing: object, prefix: str) -> str:
        return _once(self._keys, thing, lambda: f"{prefix}{len(self._keys)}")

    async def _install(
        self, actor: Actor, key: str, method: str, *args: Any, model: Model | None = None
    ) -> None:
        """Install a setup or ``model`` in an actor once (every later worker shares it);
        an install cut off with the event loop it ran on (a run cancelled as it started,
        whose ``asyncio.run`` ended) is made again on this one."""
        pending = actor.installing.get(key)
        if pending is None or cut_off(pending):
            ref = getattr(actor.handle, method).remote(key, *args)
            pending = actor.installing[key] = asyncio.ensure_future(installed(ref))
            pending.add_done_callback(_seen)
        try:
            if pending.done():
                pending.result()  # raises what the install raised
            else:
                await asyncio.shield(pending)
        except SetupFailed as exc:
            if model is None:
                raise
            named = _named(_unlimited(model)[0])
            raise SetupFailed(exc.why, named, mistake=exc.mistake) from exc.__cause__

    # --- one worker --------------------------------------------------------------------

    async def run_worker(
        self,
        worker: Worker,
        task: str,
        *,
        inputs: Mapping[str, str] | None,
        resume: LoopState | None,
        conversation: str = "",
        keep: bool = True,
        started: Callable[[], None] | None = None,
    ) -> WorkerResult:
        """Run ``worker`` in an actor, its services served from here; ``started`` is
        called as it begins there, once it has room and its role is installed, as of
        when it did (the pool's start, its wait for room and its sending are not its
        time; nor, in its result's ``started_at``, is its result's way back).

        Returns the worker's result as :meth:`Worker.run` would; a worker whose actor
        died continues on another (stored run) or fails with :class:`WorkerLost`.
        """
        told = Told()
        begin = Begin(worker, resume, told, started)
        model, model_slots = _unlimited(worker.model)
        summarizer = _unlimited(worker.summarizer)[0] if worker.summarizer is not None else None
        # Its worker_timeout_s counts what it does, not this: Ray's start (and import),
        # and what is sent of its role and model made (pickled, once each).
        with waiting_for_room():
            await self.start()
            import ray.exceptions

            try:
                made = (
                    self._recipe(model),
                    self._recipe(summarizer) if summarizer is not None else None,
                )
                sent = self._sent_setup(worker.setup)
            except ConfigError as exc:
                return _failed(worker, exc)
        stored = worker.services.store is not None
        state = resume
        avoid: Actor | None = None
        deaths = 0
        async with self._room_here():
            # What it asks of the driver runs in its room: a nested worker (an agent
            # tool's, a hive tool's) never waits for room its caller holds.
            token = _in_room.set(True)
            try:
                link = Driver(worker, model_slots, self._held, told, begin)  # in this context
            finally:
                _in_room.reset(token)
            try:
                while True:
                    with waiting_for_room():  # a pool stopped under it is made again,
                        await self.start()  # as for a worker started after stop()
                    actor = self._pick(avoid)
                    actor.running += 1
                    try:
                        try:
                            with waiting_for_room():  # a new actor starts, then installs
                                if not await actor.answers():  # died with no worker
                                    actor.dead = True  # replaced: no death of this worker's
                                    continue
                                keys = await self._install_all(actor, worker, made, sent)
                        except SetupFailed as exc:  # its role or model, there
                            return _failed(worker, exc.told(worker.role.name))
                        spec = WorkerSpec(
                            name=worker.name,
                            setup=keys[0],
                            model=keys[1],
                            summarizer=keys[2],
                            task=task,
                            inputs=dict(inputs) if inputs is not None else None,
                            conversation=conversation,
                            resume=state,
                            services=sent_services(
                                worker, model_slots is not None, link.pinned.going_on, state
                            ),
                            keep=keep,
                        )
                        self._runs += 1
                        channel = actor.channel_here(self._channels)
                        return await link.follow(channel, f"w{self._runs}", spec)
                    except ray.exceptions.RayActorError as exc:
                        actor.dead = True
                        deaths += 1
                        running = link.tools_running()
                        if not stored or deaths >= self.max_actor_deaths:
                            limit = self.max_actor_deaths if stored else None
                            lost = WorkerLost(
                                worker.name,
                                _reason(exc, actor),
                                role=worker.role.name,
                                deaths=deaths,
                                tools=running,
                                limit=limit,
                            )
                            return _failed(worker, lost)
                        state = link.last_state or state  # on from its last checkpoint
                        link.give_back_turn()  # the turn's calls are made, and counted, again
                        avoid = actor
                    except Exception as exc:  # a message that could not be sent, say
                        return _failed(worker, _unsent(worker, exc))
                    finally:
                        actor.running -= 1
                        actor.idle = actor.running == 0
            finally:
                await shielded(link.pinned.close())  # what it left, no life of it takes up

    @contextlib.asynccontextmanager
    async def _room_here(self) -> AsyncIterator[None]:
        """Room for ``workers_per_actor`` workers an actor (the least loaded actor is
        picked), in the running event loop; the wait for it is not the worker's time.
        A worker started for one that has room (nested) runs in that room. Held with
        the worker's room, it is left with it while the worker's approver asks a
        person, as one of the run's ``max_workers`` is (:func:`also_among`)."""
        if self.workers_per_actor is None or _in_room.get():
            yield
            return
        loop = asyncio.get_running_loop()
        if self._slots is None or self._slots[0] is not loop:
            self._slots = (loop, asyncio.Semaphore(self.actors * self.workers_per_actor))
        async with also_among(self._slots[1]):
            yield

    def _recipe(self, model: Model) -> bytes:
        """:func:`recipe`, once a model."""
        return _once(self._recipes, model, lambda: recipe(model, self._held))

    def _sent_setup(self, setup: WorkerSetup) -> _SentSetup:
        """What is sent of ``setup`` to install it, made once for its role, tools and
        settings (its settings too: a limit the run sets, ``max_output_tokens``, is
        in them, not in its role).

        Raises:
            ConfigError: naming what of it cannot be sent to the actors.
        """
        ident = (id(setup.role), id(setup.tools), setup.settings)
        found = self._setups.get(ident)
        if found is None:
            key = f"setup{len(self._setups)}"
            found = self._setups[ident] = _SentSetup(setup, key, sendable_tools(setup))
        return found

    async def _install_all(
        self,
        actor: Actor,
        worker: Worker,
        made: tuple[bytes, bytes | None],
        sent: _SentSetup,
    ) -> tuple[str, str, str | None]:
        """The keys of the worker's setup, model and summarizer, installed in ``actor``
        (after the folders its modules may be in: :meth:`imports_from`)."""
        if self._folders:
            folders = list(self._folders)  # only grows: its length names it
            await self._install(actor, f"folders{len(folders)}", "imports_from", folders)
        setup = sent.setup
        await self._install(
            actor, sent.key, "install_setup", setup.role, sent.tools, setup.settings
        )
        setup_key = sent.key
        model_key = self._key(worker.model, "model")
        await self._install(actor, model_key, "install_model", made[0], model=worker.model)
        summarizer_key = None
        if made[1] is not None and worker.summarizer is not None:
            summarizer_key = self._key(worker.summarizer, "model")
            await self._install(
                actor, summarizer_key, "install_model", made[1], model=worker.summarizer
            )
        return setup_key, model_key, summarizer_key


@dataclass(frozen=True)
class _SentSetup:
    """A role's setup as it is installed in the actors: the setup (kept, so that the ids
    it is found by are no other's), its key there, and its tools as they are sent."""

    setup: WorkerSetup
    key: str
    tools: list[Tool[Any, Any] | Pinned]


def _once(cache: dict[int, tuple[object, T]], thing: object, make: Callable[[], T]) -> T:
    """What ``make`` makes of ``thing``, made the first time only."""
    found = cache.get(id(thing))
    if found is None:
        found = cache[id(thing)] = (thing, make())
    return found[1]


def _unlimited(model: Model) -> tuple[Model, Slots | None]:
    """The model an actor makes, and the driver's slots bounding its calls, if any."""
    if isinstance(model, LimitedModel):
        return model.inner, model.limiter
    return model, None


def _seen(install: asyncio.Future[None]) -> None:
    """An install's failure is for the workers that wait for it to raise: one that
    fails once none waits (their run was cancelled, its actor then stopped) is not
    reported as an error nobody saw."""
    if not install.cancelled():
        install.exception()


def _named(model: Model) -> str:
    """The model as an error names it: its repr, or its class's path when the repr is
    Python's default (``<mod.Cls object at 0x...>``)."""
    shown = repr(model)
    if shown.startswith("<"):
        return f"{type(model).__module__}.{type(model).__qualname__}"
    return shown


def _failed(worker: Worker, exc: HoneycombError) -> WorkerResult:
    return WorkerResult(
        worker=worker.name,
        role=worker.role.name,
        status="failed",
        error=WorkerError(type=type(exc).__name__, message=str(exc)),
        exception=exc,
    )


def _unsent(worker: Worker, exc: Exception) -> HoneycombError:
    """What failed the worker's stream: the part of the run's guards (sent with every
    worker) that cannot be sent, named, if that was it; else what Ray said."""
    try:
        check_sendable(worker.services.guards, "the run", "guards")
    except ConfigError as named:
        return named
    return RemoteFailure(f"{type(exc).__name__}: {exc}")


def _reason(exc: BaseException, actor: Actor) -> str:
    """Why ``actor`` died: its pool was stopped, or what Ray said (it cannot tell a
    ``ray.kill`` of ours from any other death: "died unexpectedly")."""
    if actor.stopped:
        return "its pool was stopped (RayBackend.stop()) as it ran"
    first = str(exc).strip().splitlines()
    return first[0] if first else type(exc).__name__
