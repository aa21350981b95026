"""What a model-call layer is: its parts before and after a call, run around the
call's one await.

A worker's model call is one :class:`ModelCall`. Each layer's
:meth:`~ModelLayer.opened` runs before the model is asked, outermost first: a layer
may refuse the call (it raises) or replace its request. Then the model is awaited,
once. Then each layer that opened sees how the call ended, innermost first:
:meth:`~ModelLayer.answered` with the answer (a layer may check it, and fail the call
by raising) or :meth:`~ModelLayer.failed` with the error (a layer may translate it).
While the model's own retries go on, each layer is told of an attempt its timeout cut
off (:meth:`~ModelLayer.timed_out`, as an adapter says so) and of each retry about to
be sent (:meth:`~ModelLayer.retried`, which it may refuse by raising). A layer that
keeps something for the length of a call keeps it on the call.

No layer holds a frame of its own while the model works: a worker waiting on its
model holds its loop's frame and the call, nothing else (benchmarks A and E, where
10,000 workers wait at once). The model's own layers (its slots, cassette, retries,
rate limit) are models inside it, each holding the next
(:class:`~runtime.model.WrapperModel`).
"""

from __future__ import annotations

from asyncio import CancelledError
from collections.abc import Coroutine
from contextvars import Token
from typing import Any, Protocol

from runtime.events import Caller, CallReport
from runtime.limits import Budget, CallInFlight
from runtime.limits.budget import attempting
from runtime.model import (
    Model,
    ModelRequest,
    ModelResponse,
    TextSink,
    call_model,
    tells_attempts,
)
from runtime.secrets import HeldText, any_known

__all__ = ["CallSite", "ModelCall", "ModelCalls", "ModelLayer"]


class ModelLayer:
    """One layer of a model call: each part passes the call on unless overridden."""

    __slots__ = ()

    def opened(self, call: ModelCall) -> None:
        """Before the model is asked, outermost first. Raise to refuse the call (the
        layers that opened before this one see the error in :meth:`failed`)."""

    def answered(self, call: ModelCall, response: ModelResponse) -> ModelResponse:
        """The model answered ``response``, as the layers inside this one passed it
        on; what the layers outside see. Raise to fail the call."""
        return response

    def failed(self, call: ModelCall, error: BaseException) -> BaseException:
        """The call failed with ``error`` (the model's, or a layer's inside this one);
        what the layers outside see, and the caller gets."""
        return error

    def timed_out(self, call: ModelCall) -> None:
        """An attempt of the call was cut off by its timeout, its request sent, and the
        model's retries go on (or the call fails): :attr:`ModelCall.timeouts` counts it."""

    def retried(self, call: ModelCall) -> None:
        """Another attempt of the call is about to be sent, or its first once it had
        room (a slot, its rate limiter's start). Raise to send none (the call fails
        with the error)."""


class CallSite(Protocol):
    """Where model calls are made from: the model with the layers around its calls, and
    whose calls they are. A :class:`ModelCalls` is one; a worker's loop is one too, as
    it makes its turns' calls in its own frame (no object of its own per worker:
    benchmarks A and E)."""

    @property
    def model(self) -> Model:
        """The model, its own layers (slots, rate limit, retries, price) in it."""
        ...

    @property
    def layers(self) -> tuple[ModelLayer, ...]:
        """The layers around each call, outermost first."""
        ...

    @property
    def budget(self) -> Budget | None:
        """The run's budget (None: none is kept)."""
        ...

    @property
    def caller(self) -> Caller | None:
        """Whose calls they are and where their events go (None: not traced)."""
        ...

    @property
    def who(self) -> str | None:
        """Whose calls they are, as the calls in flight are reported."""
        ...

    @property
    def kind(self) -> str:
        """What the calls are: ``turn``, ``summary``, ``judge``."""
        ...

    @property
    def tells(self) -> bool:
        """Whether the model tells its calls of their attempts
        (:func:`~runtime.model.tells_attempts`)."""
        ...


class ModelCall(CallInFlight):
    """One model call of ``request`` made from ``site``, from its first layer's opening
    (:meth:`open`) to its last layer's close; it is the call in flight its budget
    reports (:class:`~runtime.limits.CallInFlight`).

    Attributes:
        request: What the model is sent (a layer may replace it as it opens).
        on_text: Where the answer's text goes as it is written (None: one-shot).
        model: The model asked, its own layers in it.
        budget: The run's budget (None: none is kept).
        caller: Whose call it is and where its events go (None: not traced).
        layers: The layers it goes through, outermost first.
        opened: How many of them opened it (the outermost ones): those that see how
            it ended.
        held: Its streamed text on the way to ``on_text``, with the end that could
            begin a secret held back until the next piece or the answer (None: not
            streamed, or no secret was known as it started): a secret split across
            pieces is masked whole, whatever the model.
        report: Its attempts, while tracing has it open (the retry policy tells it
            of each retry).
        reported: Undoes the report's setting as the model call in progress.
        timed: When tracing opened it (``time.perf_counter``).
        counting: Undoes its setting as the call whose attempts are made
            (:data:`~runtime.limits.budget.attempting`), while a budget or a tracer
            counts those its endpoint did not answer in time (None: nobody does).
    """

    # benchmark E: one per model call in flight (A at N=10000 has 10,000), no instance dict
    __slots__ = (
        "budget",
        "caller",
        "counting",
        "held",
        "layers",
        "model",
        "on_text",
        "opened",
        "report",
        "reported",
        "request",
        "tells",
        "timed",
    )

    report: CallReport | None
    reported: Token[CallReport | None] | None
    counting: Token[CallInFlight | None] | None

    def __init__(self, site: CallSite, request: ModelRequest, on_text: TextSink | None) -> None:
        super().__init__(site.who or "model", site.kind, request.turn)
        self.request, self.on_text = request, on_text
        self.model, self.budget, self.caller = site.model, site.budget, site.caller
        self.layers = layers = site.layers
        self.opened = len(layers)  # lowered when one refuses the call
        self.held: HeldText | None = None
        self.report = self.reported = self.counting = None
        self.timed = 0.0
        # Its attempts are told to it (timeouts, retries) when its model tells them and
        # someone counts them: its budget, or its trace.
        self.tells = site.tells and (site.budget is not None or site.caller is not None)

    def open(self) -> ModelCall:
        """The call, every layer opened, outermost first.

        Raises:
            HoneycombError: a layer's, when it refuses the call (the layers that
                opened before it saw the error).
        """
        place = 0
        try:
            for layer in self.layers:
                layer.opened(self)
                place += 1
        except BaseException as error:
            self.opened = place  # those outside it opened
            raise self.failed(error)  # noqa: B904 (its cause is the layer's to set)
        return self

    def made(self) -> Coroutine[Any, Any, ModelResponse]:
        """The model's answer to the request, its text streamed when asked for."""
        if self.tells:  # of its attempts: counted by its budget, and traced
            self.counting = attempting.set(self)
        if self.on_text is None:
            return self.model.complete(self.request)
        if not any_known():  # nothing to hold back (benchmark J: a call a piece fewer)
            return call_model(self.model, self.request, self._text)
        self.held = HeldText(self._text)
        return call_model(self.model, self.request, self.held)

    def timed_out(self) -> None:
        """An attempt its timeout cut off (:func:`runtime.limits.budget.timed_out`):
        counted, and told to the layers, outermost first."""
        if self.pieces is not None:
            return  # the streamed attempt's prompt counts with its text, as the call ends
        self.timeouts += 1
        for layer in self.layers[: self.opened]:
            layer.timed_out(self)

    def retried(self) -> None:
        """Another attempt is about to be sent (:func:`runtime.limits.budget.retried`):
        told to the layers, outermost first.

        Raises:
            HoneycombError: a layer's, when it refuses the attempt.
        """
        for layer in self.layers[: self.opened]:
            layer.retried(self)

    def _made(self) -> None:
        """No attempt of the call is made any more."""
        if self.counting is not None:
            attempting.reset(self.counting)
            self.counting = None

    def _text(self, text: str) -> None:
        self.streamed(text)  # what a stopped run reports of the call
        if self.on_text is not None:
            self.on_text(text)

    def answered(self, response: ModelResponse) -> ModelResponse:
        """The answer, once every layer that opened passed it, innermost first.

        Raises:
            HoneycombError: a layer's, when it fails the call (the layers outside it
                see the error).
        """
        if self.held is not None:
            self.held.flush()  # the answer's last text, before any layer reports its end
        self._made()
        layers, place = self.layers, self.opened
        try:
            while place:
                place -= 1
                response = layers[place].answered(self, response)
        except BaseException as error:
            self.opened = place  # those outside it see the error
            raise self.failed(error)  # noqa: B904 (its cause is the layer's to set)
        return response

    def failed(self, error: BaseException) -> BaseException:
        """What the call fails with once every layer that opened saw ``error``,
        innermost first."""
        if self.held is not None:
            self.held.drop()  # the end of a failed call's text was never shown
        self._made()
        if not isinstance(error, Exception | CancelledError):  # it stops the run: say who
            error.add_note(f"raised by the {self.kind} model call of {self.who}")
        layers = self.layers
        for place in range(self.opened - 1, -1, -1):
            error = layers[place].failed(self, error)
        self.opened = 0
        return error


class ModelCalls:
    """A model with the layers a worker adds around its calls, outermost first
    (composed in :func:`workers.calls.model_calls`). It is a model itself:
    :meth:`complete` and :meth:`stream` make one call through every layer; a caller
    that awaits the model in a frame of its own opens the call (:meth:`open`), awaits
    :meth:`ModelCall.made`, and closes it (:meth:`ModelCall.answered`, or
    :meth:`ModelCall.failed`, whose error it raises).

    Args:
        model: The model, its own layers (slots, rate limit, retries, price) in it.
        layers: The layers, outermost first.
        budget: The run's budget (None: none is kept).
        caller: Whose calls they are and where their events go (None: not traced).
        who: Whose calls they are, as the calls in flight are reported (a worker, a
            judge role).
        kind: What the calls are: ``turn``, ``summary``, ``session summary``, ``judge``.
    """

    # benchmark E: one per worker (A at N=10000 has 10,000 at once), no instance dict
    __slots__ = ("budget", "caller", "kind", "layers", "model", "tells", "who")

    def __init__(
        self,
        model: Model,
        layers: tuple[ModelLayer, ...],
        *,
        budget: Budget | None = None,
        caller: Caller | None = None,
        who: str | None = None,
        kind: str = "turn",
    ) -> None:
        self.model = model
        self.layers = layers
        self.budget = budget
        self.caller = caller
        self.who = who
        self.kind = kind
        self.tells = tells_attempts(model)

    def open(self, request: ModelRequest, on_text: TextSink | None = None) -> ModelCall:
        """A call of ``request``, every layer opened (:meth:`ModelCall.open`)."""
        return ModelCall(self, request, on_text).open()

    def complete(self, request: ModelRequest) -> Coroutine[Any, Any, ModelResponse]:
        return self._made(request, None)

    def stream(
        self, request: ModelRequest, on_text: TextSink
    ) -> Coroutine[Any, Any, ModelResponse]:
        return self._made(request, on_text)

    async def _made(self, request: ModelRequest, on_text: TextSink | None) -> ModelResponse:
        call = self.open(request, on_text)
        try:
            response = await call.made()
        except BaseException as error:
            raise call.failed(error)  # noqa: B904 (its cause is the layer's to set)
        return call.answered(response)

    def __repr__(self) -> str:
        layers = ", ".join(type(layer).__name__ for layer in self.layers)
        return f"ModelCalls({self.model!r}, [{layers}])"
