"""The package as users install it: the wheel, built and installed in a fresh virtual
environment. Its ``honeycomb`` command works, and has no ``bench``: the benchmarks are
not part of the package, they run from a clone (``honeycomb bench`` there, as
tests/test_benchmarks.py runs it, or ``python -m benchmarks.fanout``).

Offline: the wheel is built without build isolation (hatchling comes with the dev
extra) and installed without its dependencies, which the environment finds in this
one's site-packages.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _pip(*args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args, "--no-index", "-q"],
        check=True, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``bin`` folder of a fresh virtual environment holding the wheel."""
    where = tmp_path_factory.mktemp("wheel")
    _pip("wheel", "--no-deps", "--no-build-isolation", str(ROOT), "-w", str(where / "dist"))
    (wheel,) = (where / "dist").glob("honeycomb_agents-*.whl")
    venv.create(where / "env", with_pip=False)
    python = where / "env" / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    # The dependencies: a path line of a .pth file, so this environment's own .pth
    # files (the editable install's, which would put the clone on sys.path) are not read.
    (Path(purelib) / "dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    _pip("--python", str(python), "install", "--no-deps", str(wheel))
    return python.parent


def _command(installed: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        [installed / "honeycomb", *args],
        capture_output=True, text=True, cwd=cwd, env=env, timeout=60, check=False,
    )  # fmt: skip


def test_the_installed_package_is_the_wheel_and_its_command_works(
    installed: Path, tmp_path: Path
) -> None:
    where = subprocess.run(
        [installed / "python", "-c", "import honeycomb; print(honeycomb.__file__)"],
        capture_output=True, text=True, cwd=tmp_path, check=True,
    ).stdout  # fmt: skip
    assert Path(where).is_relative_to(installed.parent)
    (tmp_path / "hive.yaml").write_text(
        "models: {default: offline}\nroles:\n  writer: {description: Writes.}\nplanner: writer\n"
    )
    done = _command(installed, "validate", "hive.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "hive.yaml: OK" in done.stdout


def test_the_installed_command_has_no_bench_and_says_where_the_benchmarks_run(
    installed: Path, tmp_path: Path
) -> None:
    listed = _command(installed, "--help", cwd=tmp_path)
    assert listed.returncode == 0
    assert "validate" in listed.stdout
    assert "bench" not in listed.stdout
    done = _command(installed, "bench", "--smoke", cwd=tmp_path)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "not installed with the package" in done.stderr
    assert "clone of the repository" in done.stderr
    assert "python -m benchmarks.fanout" in done.stderr


def test_a_clones_command_has_bench() -> None:
    listed = subprocess.run(
        [sys.executable, "-m", "honeycomb", "--help"],
        capture_output=True, text=True, cwd=ROOT, check=True,
    )  # fmt: skip
    assert "bench" in listed.stdout


def test_the_installed_command_makes_a_hive_that_runs_offline(
    installed: Path, tmp_path: Path
) -> None:
    listed = _command(installed, "init", "--list", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    for name in ("starter", "research", "review", "triage", "trip"):
        assert name in listed.stdout
    made = _command(installed, "init", "myhive", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    for name in ("hive.yaml", "tools.py", "README.md"):
        assert (tmp_path / "myhive" / name).is_file()
    assert _command(installed, "validate", "myhive/hive.yaml", cwd=tmp_path).returncode == 0
    done = _command(installed, "run", "myhive/hive.yaml", "--plain", "--no-store", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[offline simulation]" in done.stdout
    assert "Lisbon" in done.stdout
    again = _command(installed, "init", "myhive", cwd=tmp_path)
    assert again.returncode == 1
    assert "not overwritten" in again.stderr
