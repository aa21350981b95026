"""``RayBackend``: a run's subtask workers in a pool of async Ray actors.

The driver (the process that called ``Executor.run``) keeps the run: the plan, the
scheduler, aggregation, the run store and journal, budgets, exclusive locks,
limiters and events. Each worker runs in one of the pool's actors, many at once on
the actor's event loop, and talks to the driver through one stream (see
:mod:`honeycomb.backends._remote`): a model call is reserved in the budget here
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
import contextlib
import contextvars
import importlib
import itertools
import json
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from honeycomb.backends._remote import (
    Hive,
    Message,
    Pinned,
    RemoteFailure,
    WorkerSpec,
    portable_error,
    raised,
)
from honeycomb.run.context import RunContext
from runtime import (
    Budget,
    BudgetExceeded,
    ConfigError,
    HoneycombError,
    JournalEntry,
    LimitedModel,
    Limits,
    Model,
    Tool,
    ToolCall,
    ToolMessage,
)
from runtime._threads import run_tool
from runtime.journal import arguments_text
from workers import LoopState, Worker, WorkerError, WorkerResult, WorkerSetup

if TYPE_CHECKING:
    from honeycomb.run.record import WorkerRecord

__all__ = ["RayBackend", "WorkerLost", "recipe"]


class WorkerLost(HoneycombError):
    """A worker's actor died while it ran, and the worker cannot continue elsewhere
    (its run has no store, so there is no checkpoint or journal to continue from).

    Attributes:
        worker: The worker's name (the subtask id).
        reason: What Ray said about the actor.
    """

    def __init__(self, worker: str, reason: str) -> None:
        self.worker = worker
        self.reason = reason
        super().__init__(
            f"worker {worker!r} was lost with its Ray actor ({reason}); with a run store "
            "it would have continued on another actor from its last checkpoint"
        )


def recipe(model: Model) -> tuple[str, Any]:
    """How an actor makes ``model`` again: an OpenAI-compatible endpoint from its
    settings (its API key from the actor's environment, never sent), any other model
    sent as it is (Ray pickles it).

    Raises:
        ConfigError: for an endpoint given its API key as an argument (it would cross
            the cluster in the clear), or a model that cannot be pickled.
    """
    from runtime._openai_base import OpenAIEndpoint

    if isinstance(model, OpenAIEndpoint):
        if model._api_key is not None or model._given is not None:
            raise ConfigError(
                f"model {model!r}: on Ray, give the API key in the actors' environment "
                "(OPENAI_API_KEY, set on the cluster's nodes), not as api_key= or "
                "client=: it would be sent to every actor in the clear"
            )
        cls = type(model)
        options = {
            "model": model.model,
            "base_url": model.base_url,
            "timeout": model.timeout,
            "retry": model.retry,
            "settings": model.settings,
        }
        return ("made", (f"{cls.__module__}.{cls.__qualname__}", options))
    # cloudpickle: functions of __main__ too, by value.
    dumps: Callable[[object], bytes] = importlib.import_module("ray.cloudpickle").dumps
    try:
        dumps(model)  # as Ray will, to send it: a model that cannot be sent fails here
    except Exception as exc:
        raise ConfigError(
            f"model {model!r} cannot be sent to Ray actors ({type(exc).__name__}: {exc}): "
            "use a model that can be pickled, or an OpenAI-compatible endpoint"
        ) from exc
    return ("object", model)


@dataclass
class _Actor:
    """One actor of the pool: its handle, what is installed in it, its load, and its
    channel to this process's event loop."""

    handle: Any
    installing: dict[str, asyncio.Future[None]] = field(default_factory=dict)
    running: int = 0
    dead: bool = False
    channel: _Channel | None = None

    def channel_here(self, names: Iterator[int]) -> _Channel:
        """Its channel for the running event loop (a new loop gets a new one)."""
        loop = asyncio.get_running_loop()
        if self.channel is None or self.channel.loop is not loop:
            self.channel = _Channel(self.handle, f"c{next(names)}-{os.getpid()}", loop)
        return self.channel


class _Channel:
    """Every message between this process and one actor, for all the workers running
    there: what is to be sent goes in one batch per call (one call at a time, so they
    arrive in order), and one call at a time takes what the workers sent, so what
    piles up while a batch is read here is the next batch.

    The actor dying fails every worker on it with Ray's error (see
    :meth:`_Driver.lost`).
    """

    TAKE_WAIT_S = 2.0  # a take with nothing to return comes back after this

    def __init__(self, handle: Any, name: str, loop: asyncio.AbstractEventLoop) -> None:
        self.handle = handle
        self.name = name
        self.loop = loop
        self.drivers: dict[str, _Driver] = {}
        self._outgoing: list[Message] = []
        self._sending: asyncio.Task[None] | None = None
        self._taking: asyncio.Task[None] | None = None

    def join(self, key: str, driver: _Driver) -> None:
        self.drivers[key] = driver
        if self._taking is None:
            self._taking = self.loop.create_task(self._take())

    def leave(self, key: str) -> None:
        self.drivers.pop(key, None)

    def send(self, message: Message) -> None:
        self._outgoing.append(message)
        if self._sending is None:
            self._sending = self.loop.create_task(self._send())

    async def _send(self) -> None:
        import ray.exceptions

        try:
            while self._outgoing:
                batch, self._outgoing = self._outgoing, []
                try:
                    await self.handle.deliver.remote(self.name, batch)
                except ray.exceptions.RayActorError:
                    raise
                except Exception:  # a message that cannot be sent: find it, each alone
                    for message in batch:
                        try:
                            await self.handle.deliver.remote(self.name, [message])
                        except ray.exceptions.RayActorError:
                            raise
                        except Exception as exc:
                            self._undeliverable(message, exc)
        except Exception as exc:  # the actor died (the take sees it too)
            self._fail(exc)
        finally:
            self._sending = None

    def _undeliverable(self, message: Message, exc: Exception) -> None:
        """A message Ray could not send (something in it does not pickle): its worker
        alone fails (a worker to start), or its requests do (answers)."""
        kind, key, *payload = message
        driver = self.drivers.get(key)
        if kind == "start" and driver is not None:
            self.drivers.pop(key)
            driver.lost(exc)
        elif kind == "answer":
            error = portable_error(
                RemoteFailure(f"its answer could not be sent ({type(exc).__name__}: {exc})")
            )
            self._outgoing.append(("answer", key, [(n, False, error) for n, _, _ in payload[0]]))

    async def _take(self) -> None:
        try:
            while self.drivers:  # none left: no take waits at the actor
                batch = await self.handle.take.remote(self.name, self.TAKE_WAIT_S)
                for key, message in batch:
                    driver = self.drivers.get(key)
                    if driver is not None:
                        driver.receive(message)
        except Exception as exc:
            self._fail(exc)
        finally:
            self._taking = None

    def _fail(self, exc: Exception) -> None:
        drivers, self.drivers = self.drivers, {}
        for driver in drivers.values():
            driver.lost(exc)


class RayBackend:
    """Runs subtask workers in a pool of async Ray actors; the run stays here.

    Args:
        address: The Ray cluster to join (``ray://...`` or ``host:port``); None
            starts a private local one for this process (``address="local"``), never
            attaching by accident to a cluster already running on the machine. A Ray
            this process already started (``ray.init`` before) is used as it is.
        actors: Actors in the pool (each one process, with its own event loop).
        workers_per_actor: Workers one actor runs at once, at most (None: as many as
            the run's policy lets run at once).
        runtime_env: Ray's runtime environment for the actors (``env_vars``,
            ``working_dir``, ``pip`` ...): the actors import roles' tools, output
            schemas and models by import path.
        actor_cpus: CPUs Ray reserves for each actor (where it places them).
        num_cpus: CPUs of a local Ray started here (None: the machine's).
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
    ) -> None:
        if actors < 1:
            raise ConfigError(f"RayBackend: actors must be at least 1, got {actors}")
        if workers_per_actor is not None and workers_per_actor < 1:
            raise ConfigError(
                f"RayBackend: workers_per_actor must be at least 1, got {workers_per_actor}"
            )
        self.address = address
        self.actors = actors
        self.workers_per_actor = workers_per_actor
        self.runtime_env = dict(runtime_env or {})
        self.actor_cpus = actor_cpus
        self.num_cpus = num_cpus
        self._pool: list[_Actor] | None = None
        self._starting: asyncio.Lock | None = None
        self._keys: dict[int, tuple[object, str]] = {}  # id -> (the object, its key)
        self._runs = 0
        self._channels = itertools.count()
        self._slots: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None
        self._recipes: dict[int, tuple[Model, tuple[str, Any]]] = {}
        self._sent_tools: dict[int, tuple[WorkerSetup, list[Tool[Any, Any] | Pinned]]] = {}

    def __repr__(self) -> str:
        return f"RayBackend(address={self.address or 'local'!r}, actors={self.actors})"

    # --- the pool ----------------------------------------------------------------------

    async def start(self) -> None:
        """Join (or start) Ray and make the actors; the first worker does it if this
        was not awaited before. Starting a Ray blocks the event loop for its first
        seconds: a service awaits this (or calls ``ray.init`` itself) before it serves."""
        if self._pool is not None:
            return
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self._pool is None:
                # In this thread, blocking the loop once for a few seconds: a Ray
                # started from another thread loses its connection to its own GCS.
                self._init()
                self._pool = [self._new_actor() for _ in range(self.actors)]
                # Ready once each has started (its imports done): a failure shows here.
                await asyncio.gather(*(a.handle.pid.remote() for a in self._pool))

    def _init(self) -> None:
        import ray

        if ray.is_initialized():
            return
        # Ray's usage statistics are off unless the user turned them on.
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        options: dict[str, Any] = {
            "address": self.address or "local",
            "include_dashboard": False,
            "log_to_driver": False,
            "configure_logging": False,
        }
        if self.address is None:
            # A private Ray for this process listens on this machine only.
            options["_node_ip_address"] = "127.0.0.1"
            if self.num_cpus is not None:
                options["num_cpus"] = self.num_cpus
        elif "RAY_AUTH_MODE" not in os.environ and _token_given():
            # A cluster with token authentication: Ray's driver sends the token only
            # when told to, and a head started with one refuses drivers without it.
            os.environ["RAY_AUTH_MODE"] = "token"
            # Ray reads its configuration as it is imported: read it again (as Ray does
            # itself when it turns token authentication on; a Ray without it has none).
            with contextlib.suppress(ImportError, AttributeError):
                importlib.import_module("ray._raylet").Config.initialize("")
        ray.init(**options)

    def _new_actor(self) -> _Actor:
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
        return _Actor(handle=cls.options(**options).remote())

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
        for actor in pool or []:
            with contextlib.suppress(Exception):
                ray.kill(actor.handle)

    def _pick(self, avoid: _Actor | None = None) -> _Actor:
        """The least loaded live actor (another than ``avoid``, if there is one); a
        dead one is replaced in the pool by a new actor first."""
        assert self._pool is not None
        for i, actor in enumerate(self._pool):
            if actor.dead:
                self._pool[i] = self._new_actor()
        choices = [a for a in self._pool if a is not avoid] or self._pool
        return min(choices, key=lambda a: a.running)

    def _key(self, thing: object, prefix: str) -> str:
        found = self._keys.get(id(thing))
        if found is None:
            found = self._keys[id(thing)] = (thing, f"{prefix}{len(self._keys)}")
        return found[1]

    async def _install(self, actor: _Actor, key: str, method: str, *args: Any) -> None:
        """Install a setup or model in an actor once (every later worker shares it)."""
        pending = actor.installing.get(key)
        if pending is None:
            ref = getattr(actor.handle, method).remote(key, *args)
            pending = actor.installing[key] = asyncio.ensure_future(_awaited(ref))
        if pending.done():
            pending.result()  # raises what the install raised
        else:
            await asyncio.shield(pending)

    # --- one worker --------------------------------------------------------------------

    async def run_worker(
        self,
        context: RunContext,
        worker: Worker,
        task: str,
        *,
        inputs: Mapping[str, str] | None,
        resume: LoopState | None,
        record: WorkerRecord | None,
    ) -> WorkerResult:
        """Run ``worker`` in an actor, its run's state kept here.

        Returns the worker's result as :meth:`Worker.run` would; a worker whose actor
        died continues on another (stored run) or fails with :class:`WorkerLost`.
        """
        import ray.exceptions

        await self.start()
        model, model_limiter = _unlimited(worker.model)
        summarizer = _unlimited(worker.summarizer)[0] if worker.summarizer is not None else None
        try:
            made = self._recipe(model), self._recipe(summarizer) if summarizer is not None else None
            tools = self._tools(worker.setup)
        except ConfigError as exc:
            return _failed(worker, exc)
        link = _Driver(context, worker, record, model_limiter)
        state = resume
        avoid: _Actor | None = None
        async with self._slots_here():
            while True:
                actor = self._pick(avoid)
                actor.running += 1
                try:
                    try:
                        spec = await self._prepare(
                            actor, context, worker, task, inputs, state, link, made, tools
                        )
                    except _SetupFailed as exc:  # its role or model, there
                        return _failed(worker, ConfigError(_setup_failed(worker, exc.why)))
                    self._runs += 1
                    channel = actor.channel_here(self._channels)
                    return await link.follow(channel, f"w{self._runs}", spec)
                except ray.exceptions.RayActorError as exc:
                    actor.dead = True
                    if record is None:
                        return _failed(worker, WorkerLost(worker.name, _reason(exc)))
                    state = link.last_state or state  # on from its last checkpoint
                    avoid = actor
                except Exception as exc:  # a message that could not be sent, say
                    return _failed(worker, RemoteFailure(f"{type(exc).__name__}: {exc}"))
                finally:
                    actor.running -= 1

    def _slots_here(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """Room for ``workers_per_actor`` workers an actor (the least loaded actor is
        picked), in the running event loop."""
        if self.workers_per_actor is None:
            return contextlib.nullcontext()
        loop = asyncio.get_running_loop()
        if self._slots is None or self._slots[0] is not loop:
            self._slots = (loop, asyncio.Semaphore(self.actors * self.workers_per_actor))
        return self._slots[1]

    def _tools(self, setup: WorkerSetup) -> list[Tool[Any, Any] | Pinned]:
        """The tools of a setup an actor makes again (its memory's tools are made there,
        on the memory at the driver; a pinned tool's calls come back here), once a
        setup.

        Raises:
            ConfigError: naming a tool that cannot be sent to the actors.
        """
        found = self._sent_tools.get(id(setup))
        if found is not None and found[0] is setup:
            return found[1]
        mine = {"recall", "remember"} if setup.memory is not None else set()
        tools = [
            Pinned.of(t) if t.pinned else t for t in setup.tools if t.name not in mine or t.pinned
        ]
        dumps: Callable[[object], bytes] = importlib.import_module("ray.cloudpickle").dumps
        for each in tools:
            try:
                dumps(each)  # as Ray will, to send it: a tool that cannot be sent fails here
            except Exception as exc:
                name = each.name if isinstance(each, Tool) else each.options["name"]
                raise ConfigError(
                    f"role {setup.role.name!r}: tool {name!r} cannot be sent to Ray "
                    f"actors ({type(exc).__name__}: {exc}): give it by import path "
                    "(tools: ['package.module:function']), or make what it holds picklable"
                ) from exc
        self._sent_tools[id(setup)] = (setup, tools)
        return tools

    def _recipe(self, model: Model) -> tuple[str, Any]:
        """:func:`recipe`, once a model (a model is pickled to check it can be)."""
        found = self._recipes.get(id(model))
        if found is None or found[0] is not model:
            found = self._recipes[id(model)] = (model, recipe(model))
        return found[1]

    async def _prepare(
        self,
        actor: _Actor,
        context: RunContext,
        worker: Worker,
        task: str,
        inputs: Mapping[str, str] | None,
        state: LoopState | None,
        link: _Driver,
        made: tuple[tuple[str, Any], tuple[str, Any] | None],
        tools: list[Tool[Any, Any] | Pinned],
    ) -> WorkerSpec:
        """The worker's spec for ``actor``, its setup and models installed there."""
        setup = worker.setup
        setup_key = self._key(setup, "setup")
        await self._install(
            actor, setup_key, "install_setup", setup.role, tools, setup.settings.output_type
        )
        model_key = self._key(worker.model, "model")
        await self._install(actor, model_key, "install_model", made[0])
        summarizer_key = None
        if made[1] is not None and worker.summarizer is not None:
            summarizer_key = self._key(worker.summarizer, "model")
            await self._install(actor, summarizer_key, "install_model", made[1])
        record = link.record
        tracer = context.tracer
        return WorkerSpec(
            name=worker.name,
            run_id=context.run_id,
            setup=setup_key,
            model=model_key,
            summarizer=summarizer_key,
            task=task,
            inputs=dict(inputs) if inputs is not None else None,
            resume=state,
            journal=dict(link.entries) if record is not None else None,
            on_unknown=record.on_unknown if record is not None else "tell",
            checkpoint=record is not None,
            events=tracer.enabled,
            text=tracer.text,
            reserve=_limited(worker.budget),
            tool_limiter=context.tool_limiter is not None,
            model_limiter=link.model_limiter is not None,
            approvals=(
                dict(record.approvals)
                if record is not None and worker.approvals is not None
                else None
            ),
            approver=worker.approver is not None,
            approval_timeout_s=worker.approval_timeout_s,
            guards=worker.guards,
            judge=worker.judge is not None,
        )


class _Driver:
    """The driver's side of one worker's stream: it answers the worker's requests
    from the run's budget, locks, limiters and journal, and takes its checkpoints,
    events and result."""

    def __init__(
        self,
        context: RunContext,
        worker: Worker,
        record: WorkerRecord | None,
        model_limiter: anyio.CapacityLimiter | None,
    ) -> None:
        self.context = context
        self.worker = worker
        self.record = record
        self.model_limiter = model_limiter
        # The journal so far: earlier lives', then this one's (a worker that moves to
        # another actor takes it along).
        self.entries: dict[tuple[int, str], JournalEntry] = (
            dict(record.entries) if record is not None else {}
        )
        self.last_state: LoopState | None = None
        self._drops: dict[int, anyio.Event] = {}
        self._helpers: dict[int, asyncio.Task[None]] = {}
        self._context = contextvars.copy_context()
        self._channel: _Channel
        self._key: str
        self._finished: asyncio.Future[WorkerResult]

    async def follow(self, channel: _Channel, key: str, spec: WorkerSpec) -> WorkerResult:
        """Run the worker in ``channel``'s actor, serving its stream until its result
        comes.

        Raises:
            RayActorError: when the actor died.
        """
        self._channel, self._key = channel, key
        self._finished = channel.loop.create_future()
        channel.join(key, self)
        channel.send(("start", key, spec))
        try:
            return await asyncio.shield(self._finished)  # cancelling this leaves it
        except BaseException:
            if not self._finished.done():
                # Cancelled (or the driver failed): the worker and its tool calls are
                # cancelled there too.
                channel.send(("cancel", key))
            raise
        finally:
            channel.leave(key)
            helpers = list(self._helpers.values())
            for helper in helpers:  # every lock and token held for it is let go
                helper.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)

    def lost(self, exc: Exception) -> None:
        """Its actor died (or the channel to it failed)."""
        if not self._finished.done():
            self._finished.set_exception(exc)

    def receive(self, message: Message) -> None:
        """One message of the worker's, in the order it sent them."""
        kind = message[0]
        budget = self.worker.budget
        if kind == "event":
            self.context.tracer.emit(message[1])
        elif kind == "save":
            self.last_state = message[1]
            if self.record is not None:
                self.record.save(message[1])
        elif kind == "count" and budget is not None:
            budget.reserve_model_call()  # no limit: it cannot refuse
        elif kind == "charge" and budget is not None:
            budget.charge(message[1])
        elif kind == "tool_calls" and budget is not None:
            budget.charge_tool_calls(message[1])
        elif kind == "drop":
            self._drops.pop(message[1], anyio.Event()).set()
        elif kind == "ask":
            _, number, op, args = message
            if op == "reserve":  # at once, in order: no await in between
                self._answer_now(number, *self._reserve())
            else:
                # In the worker's own context here: a pinned tool finds its run.
                helper = self._channel.loop.create_task(
                    self._answer(number, op, args), context=self._context
                )
                self._helpers[number] = helper
                helper.add_done_callback(lambda _: self._helpers.pop(number, None))
        elif kind == "forget":  # its worker gave the request up
            given_up = self._helpers.get(message[1])
            if given_up is not None:
                given_up.cancel()
        elif kind == "done" and not self._finished.done():
            plain, error = message[1]
            exception = raised(error) if error is not None else None
            self._finished.set_result(plain.model_copy(update={"exception": exception}))

    def _answer_now(self, number: int, ok: bool, value: Any) -> None:
        self._channel.send(("answer", self._key, [(number, ok, value)]))

    def _reserve(self) -> tuple[bool, Any]:
        budget = self.worker.budget
        try:
            if budget is not None:
                budget.reserve_model_call()
        except BudgetExceeded as exc:
            return (False, portable_error(exc))
        return (True, None)

    async def _answer(self, number: int, op: str, args: tuple[Any, ...]) -> None:
        """Answer one request that waits (a lock, a token, a durable write)."""
        if op == "hold":
            await self._hold(number, *args)
            return
        try:
            value = await self._done_here(op, args)
        except Exception as exc:
            self._answer_now(number, False, portable_error(exc))
            return
        self._answer_now(number, True, value)

    async def _done_here(self, op: str, args: tuple[Any, ...]) -> Any:
        """What a worker asks the driver to do for it: a durable write, or a call of
        something that is the run's (its memory, approver, judge, a pinned tool)."""
        worker = self.worker
        if op == "intent":
            return await self._intent(*args)
        if op == "outcome":
            return await self._outcome(*args)
        if op == "memory" and worker.setup.memory is not None:
            method, positional, options = args
            return await getattr(worker.setup.memory, method)(*positional, **options)
        if op == "approve" and worker.approver is not None:
            return await worker.approver(*args)
        if op == "approval" and worker.approvals is not None:
            return await worker.approvals.record(*args)
        if op == "judge" and worker.judge is not None:
            return await worker.judge.ask(*args)
        if op == "tool":
            name, kwargs = args
            return await _call_pinned(worker.setup.tools[name], kwargs)
        raise HoneycombError(f"worker {worker.name!r}: no {op!r} to ask for at the driver")

    async def _hold(self, number: int, what: str, name: str) -> None:
        """Hold a lock or a limiter's token for the worker until it drops it (or its
        stream ends); the holding and the letting go are in this one task."""
        drop = self._drops[number] = anyio.Event()
        held: Any
        if what == "lock":
            held = self.context.locks.lock(name)
        elif what == "tools":
            held = self.context.tool_limiter
        else:
            held = self.model_limiter
        if held is None:
            self._answer_now(number, True, number)
            return
        async with held:
            self._answer_now(number, True, number)
            await drop.wait()

    async def _intent(self, turn: int, call: ToolCall, arguments: Mapping[str, Any]) -> None:
        if self.record is not None:
            await self.record.intent(turn, call, arguments)
        self.entries[turn, call.id] = JournalEntry(
            tool=call.name, arguments=arguments_text(arguments)
        )

    async def _outcome(self, turn: int, observation: ToolMessage) -> None:
        if self.record is not None:
            await self.record.outcome(turn, observation)
        before = self.entries.get((turn, observation.tool_call_id))
        self.entries[turn, observation.tool_call_id] = JournalEntry(
            tool=observation.name,
            arguments=before.arguments if before is not None else "{}",
            status=observation.status,
            content=observation.content,
        )


async def _call_pinned(found: Tool[Any, Any], kwargs: dict[str, Any]) -> Any:
    """A pinned tool's call for a worker in an actor, its arguments validated here as
    the tool validates them (the actor checked only their shape)."""
    if found.parameters is None:  # its schema is its function's: validate by it
        name = found.context_param
        context = kwargs.pop(name) if name is not None else None
        kwargs = found.parse_arguments(json.dumps(kwargs))
        if name is not None:
            kwargs = {**kwargs, name: context}
    return await run_tool(found, kwargs)


async def _awaited(ref: Any) -> None:
    why = await ref
    if why is not None:
        raise _SetupFailed(why)


def _limited(budget: Budget | None) -> bool:
    """Whether a budget has any limit a model call must be reserved against."""
    return budget is not None and budget.limits != Limits()


def _unlimited(model: Model) -> tuple[Model, anyio.CapacityLimiter | None]:
    """The model an actor makes, and the driver's limiter on its calls, if any."""
    if isinstance(model, LimitedModel):
        return model.inner, model.limiter
    return model, None


def _failed(worker: Worker, exc: HoneycombError) -> WorkerResult:
    return WorkerResult(
        worker=worker.name,
        role=worker.role.name,
        status="failed",
        error=WorkerError(type=type(exc).__name__, message=str(exc)),
        exception=exc,
    )


def _token_given() -> bool:
    """Whether a Ray authentication token is at hand, where Ray looks for one (its
    environment variables, then ``~/.ray/auth_token``)."""
    if os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return True
    return os.path.isfile(os.path.join(os.path.expanduser("~"), ".ray", "auth_token"))


class _SetupFailed(Exception):
    """A role or model could not be installed in an actor: ``why``."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def _setup_failed(worker: Worker, why: str) -> str:
    return (
        f"role {worker.role.name!r} could not be set up in a Ray actor ({why}): on "
        "Ray, tools, output schemas and models are imported by path in each actor"
    )


def _reason(exc: BaseException) -> str:
    first = str(exc).strip().splitlines()
    return first[0] if first else type(exc).__name__
