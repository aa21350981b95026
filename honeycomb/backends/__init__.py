"""Where subtask workers run: in each run's own event loop (the default), or in a
pool of Ray actors (:class:`RayBackend`, the ``ray`` extra)."""

from honeycomb.backends.ray import RayBackend, RemoteFailure, WorkerLost

__all__ = ["RayBackend", "RemoteFailure", "WorkerLost"]
