"""Where subtask workers run: in each run's own event loop (the default), or in a
pool of Ray actors (:class:`RayBackend`, the ``ray`` extra); :class:`Backend` is what
``Executor(backend=...)`` takes."""

from honeycomb.backends.ray import RayBackend, RemoteFailure, WorkerLost
from honeycomb.run.context import Backend

__all__ = ["Backend", "RayBackend", "RemoteFailure", "WorkerLost"]
