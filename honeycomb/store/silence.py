"""A store's server gone silent (a network cut, a paused host: it refuses nothing and
answers nothing), and the waits that end on it rather than last the kernel's minutes.

The writer thread is never interrupted: a batch it holds (other runs' writes, leases
renewed) is committed whole or not at all, as ever, and its connection learns of a
server cut off by the network by itself (TCP keepalives and ``tcp_user_timeout``, see
:mod:`honeycomb.store.postgres`), not of a host paused, whose kernel still acknowledges
what is sent: that holds the writer as long as it is paused. What ends is another's wait
for it: a stopping run's for its end (``stopping``), a read's for what was written
before it (and a read in flight, :mod:`honeycomb.store.watch`), and the store's close.
Each waits a moment, then asks whether the server answers at all (:class:`Knock`: a new
connection, let in or refused by the server itself, within :data:`ANSWER_S`; a name not
resolved or a network unreachable is no answer): one that answers is waited for a moment
more, and so on, for as long as the writer takes (a slow server, a lock another process
holds, a server that refuses, whose tries the writer ends itself); one that answers
nothing is silent, and the wait ends, saying what is known of what it waited for. That
stays with the writer, which may still write it, if the server answers it before the
process ends.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Protocol, TypeVar

from honeycomb.store import forked
from runtime import StoreError
from runtime.value import Value

__all__ = [
    "ANSWER_S",
    "SLOW_CONNECTS",
    "Heard",
    "Knock",
    "Knocker",
    "Server",
    "hosts",
    "spoke",
    "unanswered",
    "waits",
]

T = TypeVar("T")

ANSWER_S = 1.0
"""How long a server is given to answer a new connection (let it in, or refuse it)
before it is taken for silent, at least."""
SLOW_CONNECTS = 5
"""How many times as long as the writer's last connection took to be made a server is
given to answer a new one, when that is longer than :data:`ANSWER_S`."""


class Heard(Value, frozen=True, kw_only=True):
    """What a knock heard (shared by whoever asked meanwhile: raise :meth:`error`)."""

    why: StoreError | None = None
    """Why no connection was let in (None: one was)."""
    silent: bool = False
    """The server did not answer it: nothing in its window, or a failure that is not
    its word (``why`` then says libpq's reason)."""

    def error(self) -> StoreError | None:
        """``why``, anew for its raiser: one error raised in several threads at once
        would gather all their tracebacks."""
        if self.why is None:
            return None
        why = self.why
        again = StoreError(str(why).removeprefix(f"{why.path}: "), path=why.path)
        again.__cause__ = why.__cause__
        return again


class Knock:
    """One try of a new connection to a store's server, in a thread of its own, which
    ends by itself (the try's own timeout): what it heard is known within ``window``
    of its start, whatever the server does. A connection let in later is an answer
    still; one that fails later (its own timeout) is not.

    Args:
        connect: Connects and closes the connection, giving up a moment after the
            window given (raises StoreError saying why it could not); None: a file,
            which always answers.
        where: The store, as errors name it.
        window: How long the server is given to answer (:data:`ANSWER_S` at least).
        each: How long each of its hosts is given (the window, for one host): what
            ``connect`` is given.
    """

    def __init__(
        self,
        connect: Callable[[float], None] | None,
        where: str,
        window: float = ANSWER_S,
        each: float | None = None,
    ) -> None:
        self.started = time.monotonic()
        self.window = window
        self._each = window if each is None else each
        self._where = where
        self._done = threading.Event()
        self._why: StoreError | None = None
        self._ended = self.started
        if connect is None:
            self._done.set()
        else:
            name = "honeycomb-store-knock"
            threading.Thread(target=self._run, args=(connect,), name=name, daemon=True).start()

    def _run(self, connect: Callable[[float], None]) -> None:
        try:
            connect(self._each)
        except StoreError as exc:
            self._why = exc
        except Exception as exc:  # not the server's word: told as a failed try
            why = f"cannot connect to the run store: {type(exc).__name__}: {exc}"
            self._why = StoreError(why, path=self._where)
        finally:
            self._ended = time.monotonic()
            self._done.set()

    def left(self) -> float:
        """How long until what it heard is known, at the latest."""
        if self._done.is_set():
            return 0.0
        return max(0.0, self.started + self.window - time.monotonic())

    def heard(self) -> Heard:
        """What it heard (waiting until that is known)."""
        done = self._done.wait(self.left())
        if self._answered(done):
            return Heard(why=self._why)
        if done and self._why is not None and self._ended <= self.started + self.window:
            return Heard(why=self._why, silent=True)  # failed at once: libpq's reason
        return Heard(why=StoreError(_silence(self.window), path=self._where), silent=True)

    def fresh(self) -> bool:
        """Whether it tells of the server now: under way, or heard a moment ago, a
        connection let in or nothing (the waits and reads of a busy service knock once
        a moment, not once each); a refusal is asked about again."""
        if self.left() > 0:
            return True
        done = self._done.is_set()
        if done and self._why is None:
            return time.monotonic() < self._ended + self.window
        return not self._answered(done) and time.monotonic() < self.started + 2 * self.window

    def _answered(self, done: bool) -> bool:
        """Whether what it heard (``done``: its try ended) is an answer: a connection
        let in, or refused in time by the server itself. A try that failed without its
        word (a name not resolved, a network or host unreachable, nothing listening, a
        timeout) is not: the network may be down for the store's own connections too."""
        if not done:
            return False
        if self._why is None:
            return True
        return self._ended <= self.started + self.window and spoke(str(self._why))


class Knocker:
    """The knocks of one store: one at a time, shared by whoever asks meanwhile (the
    runs of a service stopping together knock once). A server slow to let a connection
    in (far away, TLS, a proxy) is given :data:`SLOW_CONNECTS` times as long as the
    writer's last connection took to be made (:meth:`timed`), :data:`ANSWER_S` at least.

    A store of several hosts (``host=a,b``: libpq tries each in turn, each for its
    connect timeout, a second more than its time) gives a knock that much more for
    each host before the last.

    Args:
        connect: As :class:`Knock`'s.
        where: The store, as errors name it.
        hosts: How many hosts it has.
    """

    def __init__(self, connect: Callable[[float], None] | None, where: str, hosts: int = 1) -> None:
        self._connect = connect
        self._where = where
        self._hosts = hosts
        self._connect_s = 0.0  # how long the writer's last connection took to be made
        self._lock = threading.Lock()
        self._last: Knock | None = None
        forked.inherited(self)

    def forked(self) -> None:
        """In a child made by fork: a knock under way is the parent's (its thread is
        not in the child), and is asked no more."""
        self._lock = threading.Lock()
        self._last = None

    def knock(self) -> Knock:
        """A knock that tells of the server now: the last one, or a new one."""
        with self._lock:
            if self._last is None or not self._last.fresh():
                each = max(ANSWER_S, SLOW_CONNECTS * self._connect_s)
                window = each + (self._hosts - 1) * (math.ceil(each) + 1)
                self._last = Knock(self._connect, self._where, window, each)
            return self._last

    def timed(self, connect: Callable[[], T]) -> T:
        """``connect()``, the writer's connection, timed: knocks are given that long."""
        started = time.monotonic()
        made = connect()
        self._connect_s = time.monotonic() - started
        return made


class Server(Protocol):
    """What the waits ask of a store's database (see
    :class:`~honeycomb.store.database.Database`)."""

    away: bool

    def knock(self) -> Knock: ...


def waits(database: Server, moment: float) -> Iterator[float]:
    """How long a wait for the writer (each time it is not over yet) waits next: a
    moment (none once the store is away: the server is known to be gone), then until a
    knock is heard, and again, for as long as the server answers. It ends once the
    server answered nothing: the store is then ``away``, and reads wait no more."""
    wait = 0.0 if database.away else moment
    while True:
        yield wait
        knock = database.knock()
        while (left := knock.left()) > 0:
            yield min(left, moment)  # (what it heard is known as soon as it is)
        if knock.heard().silent:
            database.away = True
            return
        wait = moment


_SPOKE = re.compile(r"failed: [^:\n]+:  ")
"""How libpq tells what the server said as it refused a connection: its message's
severity (in the server's language), a colon and two spaces ("... failed: FATAL:
too many clients already"); what the network or libpq itself says has no such word."""


def hosts(conninfo: str) -> int:
    """How many hosts libpq tries for ``conninfo`` (``host=a,b``, or a URL's
    ``a:1,b:2``), one at least."""
    from psycopg.conninfo import conninfo_to_dict

    given = conninfo_to_dict(conninfo)
    return max(1, *(len(str(given.get(key, "")).split(",")) for key in ("host", "hostaddr")))


def spoke(why: str) -> bool:
    """Whether a connection's failure ``why`` is the server's own word (see
    :data:`_SPOKE`): a refusal, by a server that answers."""
    return _SPOKE.search(why) is not None


MAY_BE_THERE = "it may be there or not"
MAY_STILL_BE = "it may still be"
"""The words of :func:`unanswered` that say what a wait gave up on may be written after
all (a command's note after it stopped reads them: ``honeycomb/cli/resuming.py``)."""


def unanswered(where: str, *, sent: bool, within: float = ANSWER_S) -> StoreError:
    """The error of a wait that ended on a silent server (``sent``: the commit of what
    it waited for had been sent to it; ``within``: its knock's window)."""
    known = (
        f"the commit of what it waited for was sent: {MAY_BE_THERE}"
        if sent
        else f"nothing of what it waited for is written yet: {MAY_STILL_BE}, if the "
        "server answers the store's writer, which holds it, before this process ends"
    )
    return StoreError(f"{_silence(within)}; {known}", path=where)


def _silence(within: float) -> str:
    """What a silent server is told as (``within``: the knock's window)."""
    return (
        f"the run store's server answered nothing in {round(within, 1):g} s (a network "
        "cut, or its host paused?)"
    )
