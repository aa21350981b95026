"""A hive's ``backend:``: its forms, the Executor it gives a backend to, and each kind of
mistake with its file, line and field. Nothing here starts Ray."""

from __future__ import annotations

import importlib.util
import os
import textwrap
from pathlib import Path
from typing import Any

import pytest

from honeycomb import Executor
from honeycomb.backends import RayBackend
from honeycomb.hive import load_hive
from tests.support.hives import errors_of

pytest.importorskip("ray")

HIVE = """\
models:
  default: offline
roles:
  planner:
    description: Plans.
  worker:
    description: Works.
"""


def hive(tmp_path: Path, backend: str) -> Path:
    path = tmp_path / "hive.yaml"
    path.write_text(HIVE + textwrap.dedent(backend))
    return path


def test_without_backend_or_with_backend_local_the_workers_run_locally(tmp_path: Path) -> None:
    for text in ("", "backend: local\n", "backend:\n"):
        loaded = load_hive(hive(tmp_path, text))
        assert loaded.backend.name == "local"
        assert Executor.from_hive(loaded).shared.backend is None


def test_backend_ray_is_ray_with_its_defaults(tmp_path: Path) -> None:
    for text in ("backend: ray\n", "backend:\n  ray:\n", "backend: {ray: {}}\n"):
        backend = Executor.from_hive(load_hive(hive(tmp_path, text))).shared.backend
        assert isinstance(backend, RayBackend)
        assert backend.address is None  # a private local Ray
        assert (backend.actors, backend.workers_per_actor) == (2, None)
        assert (backend.actor_cpus, backend.num_cpus) == (1.0, None)
        assert backend.max_actor_deaths == 3
        assert backend._pool is None  # nothing started


def test_every_ray_setting_reaches_the_backend(tmp_path: Path) -> None:
    (tmp_path / "code").mkdir()
    (tmp_path / "requirements.txt").write_text("six\n")
    path = hive(
        tmp_path,
        """\
        backend:
          ray:
            address: ray://head:10001
            actors: 4
            workers_per_actor: 50
            actor_cpus: 0.5
            max_actor_deaths: 5
            runtime_env: {working_dir: code, pip: requirements.txt, env_vars: {MODE: fast}}
        """,
    )
    backend = Executor.from_hive(load_hive(path)).shared.backend
    assert isinstance(backend, RayBackend)
    assert backend.address == "ray://head:10001"
    assert (backend.actors, backend.workers_per_actor, backend.actor_cpus) == (4, 50, 0.5)
    assert backend.max_actor_deaths == 5
    # Paths are the hive file's; the hive's folder leads the actors' import path, so
    # tools next to it import there too.
    folder = tmp_path.resolve()
    assert backend.runtime_env["working_dir"] == str(folder / "code")
    assert backend.runtime_env["pip"] == str(folder / "requirements.txt")
    assert backend.runtime_env["env_vars"] == {
        "MODE": "fast",
        "PYTHONPATH": f"{folder}{os.pathsep}${{PYTHONPATH}}",
    }


def test_a_local_ray_takes_num_cpus_and_address_local_is_no_address(tmp_path: Path) -> None:
    path = hive(tmp_path, "backend: {ray: {address: local, num_cpus: 1, actors: 1}}\n")
    loaded = load_hive(path)
    assert loaded.backend.described() == "Ray, 1 actor, a private local Ray"
    backend = Executor.from_hive(loaded).shared.backend
    assert isinstance(backend, RayBackend)
    assert (backend.address, backend.num_cpus) == (None, 1)


def test_a_backend_given_in_code_wins_over_the_hive_s(tmp_path: Path) -> None:
    loaded = load_hive(hive(tmp_path, "backend: ray\n"))
    assert Executor.from_hive(loaded, backend=None).shared.backend is None
    mine = RayBackend(actors=1)
    assert Executor.from_hive(loaded, backend=mine).shared.backend is mine


@pytest.mark.parametrize(
    ("text", "line", "field", "message"),
    [
        ("backend: rey\n", 8, "backend", "unknown backend 'rey' (did you mean 'ray'?)"),
        ("backend: [ray]\n", 8, "backend", "a backend is a name or a mapping, not a list"),
        (
            "backend:\n  ray:\n    actors: 0\n",
            10,
            "backend.ray.actors",
            "Input should be greater than or equal to 1 (got 0)",
        ),
        (
            "backend:\n  ray:\n    actors: two\n",
            10,
            "backend.ray.actors",
            "Input should be a valid integer",
        ),
        (
            "backend:\n  ray:\n    workers_per_actor: 0\n",
            10,
            "backend.ray.workers_per_actor",
            "greater than or equal to 1",
        ),
        (
            "backend:\n  ray:\n    actor_cpus: -1\n",
            10,
            "backend.ray.actor_cpus",
            "greater than or equal to 0",
        ),
        (
            "backend:\n  ray:\n    actorz: 2\n",
            10,
            "backend.ray.actorz",
            "unknown field 'actorz' (did you mean 'actors'?); allowed: actor_cpus, actors",
        ),
        (
            "backend:\n  kubernetes: {}\n",
            9,
            "backend.kubernetes",
            "unknown field 'kubernetes'; allowed: ray",
        ),
        ("backend:\n  ray:\n    address: ''\n", 10, "backend.ray.address", "at least 1"),
        (
            "backend:\n  ray:\n    address: 127.0.0.1\n",
            10,
            "backend.ray.address",
            "the address of Ray's head, 127.0.0.1, names no port: name the head's GCS port",
        ),
        (
            "backend:\n  ray: {address: 'head:6379', num_cpus: 2}\n",
            9,
            "backend.ray",
            "num_cpus is for a local Ray started here; the cluster at head:6379 has its own",
        ),
        (
            "backend:\n  ray:\n    runtime_env: {env_vars: [A]}\n",
            10,
            "backend.ray.runtime_env",
            "env_vars must map names to text",
        ),
        # What Ray refuses of runtime_env is told as the hive is read, not as the first
        # worker starts (with no file nor line); a misspelt field, which Ray takes for
        # a plugin's and ignores, too.
        (
            "backend:\n  ray:\n    runtime_env:\n      working_dir: nowhere\n",
            11,
            "backend.ray.runtime_env.working_dir",
            "Ray refuses it: ",
        ),
        (
            "backend:\n  ray:\n    runtime_env:\n      pip: 3\n",
            11,
            "backend.ray.runtime_env.pip",
            "Ray refuses it: runtime_env['pip'] must be of type str or List[str]",
        ),
        (
            "backend:\n  ray:\n    runtime_env:\n      env_var: {OPENAI_API_KEY: sk-12345678}\n",
            11,
            "backend.ray.runtime_env.env_var",
            "unknown field 'env_var' (did you mean 'env_vars'?); Ray's: conda, config",
        ),
    ],
)
def test_each_mistake_is_named_with_its_file_line_and_field(
    tmp_path: Path, text: str, line: int, field: str, message: str
) -> None:
    path = hive(tmp_path, text)
    (error,) = errors_of(path)
    assert error.startswith(f"{path}:{line}:")
    assert f" {field}: " in error
    assert message in error


def test_a_runtime_env_field_of_a_plugin_is_passed_on(tmp_path: Path) -> None:
    path = hive(tmp_path, "backend:\n  ray:\n    runtime_env: {my_plugin: {size: 1}}\n")
    backend = Executor.from_hive(load_hive(path)).shared.backend
    assert isinstance(backend, RayBackend)
    assert backend.runtime_env["my_plugin"] == {"size": 1}


def test_a_secret_in_the_actors_environment_is_never_shown(tmp_path: Path) -> None:
    path = hive(
        tmp_path, "backend:\n  ray:\n    runtime_env: {env_vars: {OPENAI_API_KEY: 12345}}\n"
    )
    (error,) = errors_of(path)
    assert "12345" not in error
    assert "backend.ray.runtime_env" in error


def test_without_the_ray_extra_the_error_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "ray" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    path = hive(tmp_path, "backend:\n  ray: {actors: 2}\n")
    (error,) = errors_of(path)
    assert error.startswith(f"{path}:8:1: backend: the Ray backend needs Ray")
    assert "pip install 'honeycomb-agents[ray]'" in error
    assert load_hive(hive(tmp_path, "backend: local\n")).backend.name == "local"
