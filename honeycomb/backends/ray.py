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
import importlib
import os
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from honeycomb.backends._remote import Hive, Message, WorkerSpec, portable_error, raised
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
    ToolCall,
    ToolMessage,
)
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
    """One actor of the pool: its handle, what is installed in it, its load."""

    handle: Any
    installing: dict[str, asyncio.Future[None]] = field(default_factory=dict)
    running: int = 0
    dead: bool = False


class RayBackend:
    """Runs subtask workers in a pool of async Ray actors; the run stays here.

    Args:
        address: The Ray cluster to join (``ray://...`` or ``host:port``); None
            starts a private local one for this process (``address="local"``), never
            attaching by accident to a cluster already running on the machine. A Ray
            this process already started (``ray.init`` before) is used as it is.
        actors: Actors in the pool (each one process, with its own event loop).
        workers_per_actor: Workers one actor runs at once.
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
        workers_per_actor: int = 1000,
        runtime_env: Mapping[str, Any] | None = None,
        actor_cpus: float = 1.0,
        num_cpus: int | None = None,
    ) -> None:
        if actors < 1:
            raise ConfigError(f"RayBackend: actors must be at least 1, got {actors}")
        if workers_per_actor < 1:
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
            "max_concurrency": self.workers_per_actor,
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

        unsupported = _unsupported(worker.setup)
        if unsupported is not None:
            return _failed(worker, ConfigError(unsupported))
        await self.start()
        model, model_limiter = _unlimited(worker.model)
        summarizer = _unlimited(worker.summarizer)[0] if worker.summarizer is not None else None
        try:
            made = recipe(model), recipe(summarizer) if summarizer is not None else None
        except ConfigError as exc:
            return _failed(worker, exc)
        link = _Driver(context, worker, record, model_limiter)
        state = resume
        avoid: _Actor | None = None
        while True:
            actor = self._pick(avoid)
            actor.running += 1
            try:
                try:
                    spec = await self._prepare(
                        actor, context, worker, task, inputs, state, link, made
                    )
                except _SetupFailed as exc:  # its role or model, there
                    return _failed(worker, ConfigError(_setup_failed(worker, exc.why)))
                self._runs += 1
                return await link.follow(actor.handle, f"w{self._runs}", spec)
            except ray.exceptions.RayActorError as exc:
                actor.dead = True
                if record is None:
                    return _failed(worker, WorkerLost(worker.name, _reason(exc)))
                state = link.last_state or state  # on from its last checkpoint
                avoid = actor
            finally:
                actor.running -= 1

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
    ) -> WorkerSpec:
        """The worker's spec for ``actor``, its setup and models installed there."""
        setup = worker.setup
        setup_key = self._key(setup, "setup")
        await self._install(
            actor, setup_key, "install_setup", setup.role, setup.settings.output_type
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

    async def follow(self, actor: Any, key: str, spec: WorkerSpec) -> WorkerResult:
        """Run the worker in ``actor``, serving its stream until its result comes.

        Raises:
            RayActorError: when the actor died.
        """
        import ray

        stream = actor.run.remote(key, spec)
        drops: dict[int, anyio.Event] = {}
        helpers: set[asyncio.Task[None]] = set()
        try:
            return await self._serve(actor, key, stream, helpers, drops)
        except BaseException:
            # Cancelled (or the driver failed): the actor's task, the worker and its
            # tool calls are cancelled there too.
            with contextlib.suppress(Exception):
                ray.cancel(stream)
            raise
        finally:
            for helper in helpers:  # every lock and token held for it is let go
                helper.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)

    async def _serve(
        self,
        actor: Any,
        key: str,
        stream: AsyncIterator[Any],
        helpers: set[asyncio.Task[None]],
        drops: dict[int, anyio.Event],
    ) -> WorkerResult:
        budget = self.worker.budget
        tracer = self.context.tracer
        async for ref in stream:
            batch: list[Message] = await ref
            answers: list[tuple[int, bool, Any]] = []
            for message in batch:
                kind = message[0]
                if kind == "event":
                    tracer.emit(message[1])
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
                    drops.pop(message[1], anyio.Event()).set()
                elif kind == "ask":
                    _, number, op, args = message
                    if op == "reserve":  # at once, in order: no await in between
                        answers.append(self._reserve(number))
                    else:
                        helper = asyncio.ensure_future(
                            self._answer(actor, key, number, op, args, drops)
                        )
                        helpers.add(helper)
                        helper.add_done_callback(helpers.discard)
                elif kind == "done":
                    plain, error = message[1]
                    exception = raised(error) if error is not None else None
                    return plain.model_copy(update={"exception": exception})  # type: ignore[no-any-return]
            if answers:
                actor.answer.remote(key, answers)
        raise HoneycombError(f"worker {self.worker.name!r}: its stream ended with no result")

    def _reserve(self, number: int) -> tuple[int, bool, Any]:
        budget = self.worker.budget
        try:
            if budget is not None:
                budget.reserve_model_call()
        except BudgetExceeded as exc:
            return (number, False, portable_error(exc))
        return (number, True, None)

    async def _answer(
        self,
        actor: Any,
        key: str,
        number: int,
        op: str,
        args: tuple[Any, ...],
        drops: dict[int, anyio.Event],
    ) -> None:
        """Answer one request that waits (a lock, a token, a durable write)."""
        if op == "hold":
            await self._hold(actor, key, number, args, drops)
            return
        try:
            if op == "intent":
                await self._intent(*args)
            elif op == "outcome":
                await self._outcome(*args)
            else:
                raise HoneycombError(f"unknown request {op!r}")
        except Exception as exc:
            actor.answer.remote(key, [(number, False, portable_error(exc))])
            return
        actor.answer.remote(key, [(number, True, None)])

    async def _hold(
        self,
        actor: Any,
        key: str,
        number: int,
        args: tuple[Any, ...],
        drops: dict[int, anyio.Event],
    ) -> None:
        """Hold a lock or a limiter's token for the worker until it drops it (or its
        stream ends); the holding and the letting go are in this one task."""
        what, name = args
        drop = drops[number] = anyio.Event()
        held: Any
        if what == "lock":
            held = self.context.locks.lock(name)
        elif what == "tools":
            held = self.context.tool_limiter
        else:
            held = self.model_limiter
        if held is None:
            actor.answer.remote(key, [(number, True, number)])
            return
        async with held:
            actor.answer.remote(key, [(number, True, number)])
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


def _unsupported(setup: WorkerSetup) -> str | None:
    """Why a role's workers cannot run on Ray yet, if they cannot."""
    role = setup.role
    if role.memory is not None:
        return f"role {role.name!r}: roles with memory: do not run on Ray yet"
    if role.approvals is not None:
        return f"role {role.name!r}: roles with approvals: do not run on Ray yet"
    return None


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
