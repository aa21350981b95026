"""A hive's ``backend:``: where its subtask workers run.

``backend: local`` (the default) runs them in each run's own event loop; ``backend:
ray``, or ``backend: {ray: {address: ..., actors: ..., ...}}``, in a pool of Ray actors
(:class:`~honeycomb.backends.RayBackend`, the ``ray`` extra). Reading the field starts
nothing: Ray starts with the first worker, or when the command line starts it.

The actors import the roles' tools by import path, and a hive's tools may be modules
next to it (``tools:parse``): its folder leads the actors' ``PYTHONPATH``. Local paths
in ``runtime_env`` (``working_dir``, ``py_modules``, a requirements file of ``pip`` or
``uv``, an environment file of ``conda``) are relative to the hive file, as its other
paths are, and Ray checks them (and its other fields) as the hive is read, so that a
mistake there is told at its line, not as the first worker starts.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from honeycomb.hive.paths import beside
from runtime import ConfigError, YamlDocument, did_you_mean
from runtime.errors import kind_of

if TYPE_CHECKING:
    from honeycomb.backends import RayBackend
    from honeycomb.run.context import Backend

__all__ = [
    "BACKENDS",
    "RAY_MISSING",
    "BackendSpec",
    "RaySpec",
    "backend_problems",
    "backend_shorthand",
    "imports_beside",
    "ray_missing",
]

BACKENDS = ("local", "ray")
"""The backends by name (``backend: local``, ``backend: ray``, ``--backend``)."""

RAY_MISSING = (
    "the Ray backend needs Ray, which is not installed: pip install "
    "'honeycomb-agents[ray]' (or run on the local backend: backend: local)"
)


def ray_missing() -> bool:
    """Whether Ray (the ``ray`` extra) is not installed; nothing is imported."""
    return importlib.util.find_spec("ray") is None


class RaySpec(BaseModel):
    """``backend: {ray: {...}}``: the arguments of :class:`~honeycomb.backends.RayBackend`.

    ``address`` names the cluster to join (``host:port`` or ``ray://host:port``); none
    (or ``local``) starts a private Ray for the process, on 127.0.0.1. ``num_cpus`` is
    the CPUs of that local Ray: a cluster has its own.
    """

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    address: str | None = Field(default=None, min_length=1)
    actors: int = Field(default=2, ge=1)
    workers_per_actor: int | None = Field(default=None, ge=1)
    runtime_env: dict[str, Any] = Field(default_factory=dict)
    actor_cpus: float = Field(default=1.0, ge=0)
    num_cpus: int | None = Field(default=None, ge=1)
    switch_interval_s: float | None = Field(default=0.05, gt=0)
    max_actor_deaths: int = Field(default=3, ge=1)

    @field_validator("runtime_env")
    @classmethod
    def _env_vars_are_text(cls, value: dict[str, Any]) -> dict[str, Any]:
        variables = value.get("env_vars")
        if variables is not None and not (
            isinstance(variables, Mapping)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in variables.items())
        ):
            raise ValueError("runtime_env: env_vars must map names to text ({NAME: value})")
        for key in ("working_dir", "py_modules"):
            if key in value and not isinstance(value[key], str | list):
                raise ValueError(f"runtime_env: {key} must be a path or a URI")
        return value

    @field_validator("address")
    @classmethod
    def _local_is_no_address(cls, value: str | None) -> str | None:
        if value is None or value == "local":
            return None
        from honeycomb.backends.ray import address_problem  # (no Ray imported)

        problem = address_problem(value)  # told at its line, as the hive is read
        if problem is not None:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _num_cpus_is_for_a_local_ray(self) -> Self:
        if self.address is not None and self.num_cpus is not None:
            raise ValueError(
                f"num_cpus is for a local Ray started here; the cluster at {self.address} "
                "has its own CPUs: remove num_cpus (or address, to run on a local Ray)"
            )
        return self

    def build(self, folder: Path) -> RayBackend:
        """The backend, for a hive in ``folder`` (nothing starts yet).

        Raises:
            ConfigError: for values :class:`~honeycomb.backends.RayBackend` refuses.
        """
        from honeycomb.backends import RayBackend  # 100 ms of modules, for Ray only

        return RayBackend(
            self.address,
            actors=self.actors,
            workers_per_actor=self.workers_per_actor,
            runtime_env=_runtime_env(self.runtime_env, folder),
            actor_cpus=self.actor_cpus,
            num_cpus=self.num_cpus,
            switch_interval_s=self.switch_interval_s,
            max_actor_deaths=self.max_actor_deaths,
        )

    def described(self) -> str:
        """What runs, in a few words: ``Ray, 4 actors at head:6379``."""
        where = f" at {self.address}" if self.address else ", a private local Ray"
        return f"Ray, {self.actors} actor{'s' if self.actors != 1 else ''}{where}"


class BackendSpec(BaseModel):
    """A hive's ``backend:``: the local one (no ``ray``), or a pool of Ray actors."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    ray: RaySpec | None = None

    @field_validator("ray", mode="before")
    @classmethod
    def _bare_ray(cls, value: Any) -> Any:
        """``ray:`` with nothing under it is Ray with its defaults."""
        return {} if value is None else value

    @property
    def name(self) -> str:
        """``local`` or ``ray``."""
        return "local" if self.ray is None else "ray"

    def build(self, folder: Path) -> RayBackend | None:
        """The backend the Executor is given: None for the local one."""
        return self.ray.build(folder) if self.ray is not None else None

    def described(self) -> str:
        return "local" if self.ray is None else self.ray.described()


class _Folded(Protocol):
    """What :func:`imports_beside` reads of a hive: its folder, and the hives its roles
    call as tools."""

    @property
    def folder(self) -> Path: ...
    @property
    def hives(self) -> Mapping[str, _Folded]: ...


def imports_beside(backend: Backend | None, hive: _Folded) -> None:
    """Have the Ray pool that runs ``hive``'s workers (the one it declares, or one
    given: ``backend=``, ``--backend ray``) import the modules beside the hive, and
    beside the hives its roles call as tools (whose workers it runs too)."""
    if backend is None:
        return
    from honeycomb.backends import RayBackend  # a backend was made: its module is loaded

    if isinstance(backend, RayBackend):
        backend.imports_from(*_folders(hive))


def _folders(hive: _Folded) -> list[Path]:
    """The folders of ``hive`` and of the hives it calls as tools, its own first."""
    found = [hive.folder]
    for sub in hive.hives.values():
        found += [f for f in _folders(sub) if f not in found]
    return found


def backend_shorthand(value: Any) -> Any:
    """``backend: local`` and ``backend: ray`` are short for ``{}`` and ``{ray: {}}``;
    ``backend:`` with nothing after it is the default (local).

    Raises:
        ValueError: for another name, saying what may be written.
    """
    if value is None or value == "local":
        return {}
    if value == "ray":
        return {"ray": {}}
    written = "write 'local', 'ray', or {ray: {address: ..., actors: ...}}"
    if isinstance(value, str):
        raise ValueError(f"unknown backend {value!r}{did_you_mean(value, BACKENDS)}: {written}")
    if not isinstance(value, Mapping):
        raise ValueError(f"a backend is a name or a mapping, not {kind_of(value)}: {written}")
    return value


def backend_problems(doc: YamlDocument, backend: BackendSpec) -> list[ConfigError]:
    """What is wrong with the hive ``doc``'s ``backend:`` that its fields' types do not
    show: Ray not installed, or a ``runtime_env`` Ray refuses (a local path that is not
    there, relative to the hive file; a field of the wrong kind; a misspelt field, which
    Ray would take for a plugin's and ignore), each at its line."""
    if backend.ray is None:
        return []
    if ray_missing():
        return [doc.error(("backend",), RAY_MISSING)]
    at = ("backend", "ray", "runtime_env")
    given = backend.ray.runtime_env
    if not given:  # nothing to ask Ray about (whose module takes a third of a second)
        return []
    return [
        doc.error((*at, *field), problem)
        for field, problem in _refused(given, Path(doc.file).resolve().parent)
    ]


def _refused(given: Mapping[str, Any], folder: Path) -> list[tuple[tuple[str, ...], str]]:
    """What Ray refuses of the runtime environment ``given`` for a hive in ``folder``:
    each field alone (its ``env_vars`` are checked as they are read, never shown), then
    the fields together (``pip`` and ``conda`` ...)."""
    from ray.runtime_env import RuntimeEnv  # a hive with backend: ray only

    fields = sorted(f for f in RuntimeEnv.known_fields if not f.startswith("_"))
    found: list[tuple[tuple[str, ...], str]] = []
    env = _local_paths(given, folder)
    for key, value in env.items():
        if key not in RuntimeEnv.known_fields:
            close = did_you_mean(key, fields)
            if close:  # else a plugin's field: the cluster knows its plugins
                found.append(((key,), f"unknown field {key!r}{close}; Ray's: {', '.join(fields)}"))
        elif key != "env_vars":
            problem = _ray_refuses(RuntimeEnv, {key: value})
            if problem is not None:
                found.append(((key,), problem))
    if not found:
        problem = _ray_refuses(RuntimeEnv, {k: v for k, v in env.items() if k != "env_vars"})
        if problem is not None:
            found.append(((), problem))
    return found


def _ray_refuses(make: Any, env: dict[str, Any]) -> str | None:
    """Why Ray refuses ``env`` (None: it takes it)."""
    try:
        make(**env)
    except (TypeError, ValueError) as exc:
        return f"Ray refuses it: {str(exc).strip().splitlines()[0]}"
    return None


def _runtime_env(given: Mapping[str, Any], folder: Path) -> dict[str, Any]:
    """``given``, its local paths relative to the hive's folder, and the folder first on
    the actors' ``PYTHONPATH`` (after it, what the cluster's environment had)."""
    env = _local_paths(given, folder)
    variables = dict(env.get("env_vars") or {})
    # Ray expands ${NAME} from the environment the actor would have had.
    tail = variables.get("PYTHONPATH", "${PYTHONPATH}")
    variables["PYTHONPATH"] = os.pathsep.join([str(folder), str(tail)])
    env["env_vars"] = variables
    return env


def _local_paths(given: Mapping[str, Any], folder: Path) -> dict[str, Any]:
    """``given``, its local paths relative to the hive's folder: ``working_dir``,
    ``py_modules``, a requirements file (``pip``, ``uv``: text rather than a list of
    packages) and an environment file (``conda``: a YAML file rather than a name)."""
    env = dict(given)
    if isinstance(env.get("working_dir"), str):
        env["working_dir"] = _local(env["working_dir"], folder)
    if isinstance(env.get("py_modules"), list):
        env["py_modules"] = [
            _local(m, folder) if isinstance(m, str) else m for m in env["py_modules"]
        ]
    for key in ("pip", "uv"):
        if isinstance(env.get(key), str):
            env[key] = _local(env[key], folder)
    conda = env.get("conda")
    if isinstance(conda, str) and conda.endswith((".yml", ".yaml")):
        env["conda"] = _local(conda, folder)
    return env


def _local(path: str, folder: Path) -> str:
    """A path relative to the hive's folder; a URI (``s3://``, ``https://``) as it is."""
    return path if "://" in path else str(beside(folder, path))
