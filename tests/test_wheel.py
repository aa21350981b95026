"""The package as users install it: the wheel, built and installed in a fresh virtual
environment. Its ``honeycomb`` command works, and has no ``bench``: the benchmarks are
not part of the package, they run from a clone (``honeycomb bench`` there, as
tests/benchmarks/test_benchmarks.py runs it, or ``python -m benchmarks.fanout``).

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

from honeycomb.cli.main import main
from honeycomb.cli.running import DEMOS
from tests.support import ROOT

pytestmark = pytest.mark.xdist_group("wheel")
"""One test process runs them, which then builds and installs the wheel once (spread
over the processes, each of them built its own: 4 s of CPU each)."""


def _pip(*args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args, "--no-index", "-q"],
        check=True, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``bin`` folder of a fresh virtual environment holding the wheel."""
    where = tmp_path_factory.mktemp("wheel")
    # The project's build backend, as ``pip wheel`` calls it (pip itself, a second of
    # CPU more, adds nothing to the wheel).
    wheel = where / "dist" / _build("build_wheel", where / "dist")
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


def _build(hook: str, into: Path) -> str:
    """The file name of the wheel hatchling's ``hook`` builds of the clone into ``into``."""
    built = subprocess.run(
        [sys.executable, "-c", f"import sys, hatchling.build as b; print(b.{hook}(sys.argv[1]))",
         str(into)],
        capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-800:]
    return built.stdout.split()[-1]


@pytest.fixture(scope="module")
def package(installed: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of the ``honeycomb`` package the environment imports (asked once)."""
    return _package(installed, tmp_path_factory.mktemp("elsewhere"))


def _command(
    installed: Path, program: str, *args: str, cwd: Path
) -> subprocess.CompletedProcess[str]:
    """``program`` of the environment (``honeycomb``, ``python``), run as a user would:
    without this one's PYTHONPATH, which could put the clone first."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        [installed / program, *args],
        capture_output=True, text=True, cwd=cwd, env=env, timeout=60, check=False,
    )  # fmt: skip


def _package(installed: Path, cwd: Path) -> Path:
    """The folder of the ``honeycomb`` package the environment imports."""
    probe = "import honeycomb; print(honeycomb.__file__)"
    return Path(_command(installed, "python", "-c", probe, cwd=cwd).stdout.strip()).parent


def test_the_installed_package_is_the_wheel_and_its_command_works(
    installed: Path, package: Path, tmp_path: Path
) -> None:
    assert package.is_relative_to(installed.parent)
    (tmp_path / "hive.yaml").write_text(
        "models: {default: offline}\nroles:\n  lead: {description: Plans.}\n"
        "  writer: {description: Writes.}\nplanner: lead\n"
    )
    done = _command(installed, "honeycomb", "validate", "hive.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "hive.yaml: OK" in done.stdout


def test_the_installed_command_has_no_bench_and_says_where_the_benchmarks_run(
    installed: Path, tmp_path: Path
) -> None:
    listed = _command(installed, "honeycomb", "--help", cwd=tmp_path)
    assert listed.returncode == 0
    assert "validate" in listed.stdout
    assert "bench" not in listed.stdout
    done = _command(installed, "honeycomb", "bench", "--smoke", cwd=tmp_path)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "not installed with the package" in done.stderr
    assert "clone of the repository" in done.stderr
    assert "python -m benchmarks.fanout" in done.stderr


def test_a_clones_command_has_bench(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    assert "bench" in capsys.readouterr().out


def test_the_installed_command_makes_a_hive_that_runs_offline(
    installed: Path, tmp_path: Path
) -> None:
    made = _command(installed, "honeycomb", "init", "myhive", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    for name in ("hive.yaml", "tools.py", "README.md"):
        assert (tmp_path / "myhive" / name).is_file()
    assert (
        _command(installed, "honeycomb", "validate", "myhive/hive.yaml", cwd=tmp_path).returncode
        == 0
    )
    done = _command(
        installed, "honeycomb", "run", "myhive/hive.yaml", "--plain", "--no-store", cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[offline simulation]" in done.stdout
    assert "Lisbon" in done.stdout
    again = _command(installed, "honeycomb", "init", "myhive", cwd=tmp_path)
    assert again.returncode == 1
    assert "not overwritten" in again.stderr


def test_the_wheel_ships_every_example_of_the_clone(package: Path) -> None:
    tracked = subprocess.run(
        ["git", "ls-files", "examples"], capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout.split()
    wanted = sorted(path.removeprefix("examples/") for path in tracked if path.count("/") > 1)
    shipped = package / "examples"
    files = [p.relative_to(shipped) for p in shipped.rglob("*") if p.is_file()]
    # (the examples' own imports leave bytecode in the installed package as they run)
    assert sorted(f.as_posix() for f in files if "__pycache__" not in f.parts) == wanted


def test_the_installed_command_knows_every_example_and_runs_each_demo(
    installed: Path, package: Path, tmp_path: Path
) -> None:
    names = sorted(p.parent.name for p in (ROOT / "examples").glob("*/hive.yaml"))
    listed = _command(installed, "honeycomb", "init", "--list", cwd=tmp_path)
    assert [line.split()[0] for line in listed.stdout.splitlines()] == names
    shipped = package / "examples"
    hives = sorted({*(f"{name}/hive.yaml" for name in names),
                    *(f"{example}/{file}" for example, file in DEMOS.values())})  # fmt: skip
    done = _command(
        installed, "honeycomb", "validate", *(str(shipped / h) for h in hives), cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count(": OK") == len(hives)
    for option in (f"--{name}" for name in DEMOS if name != "trip"):
        ran = _command(
            installed,
            "honeycomb",
            "demo",
            option,
            "--latency",
            "0",
            "--plain",
            "--no-store",
            cwd=tmp_path,
        )
        assert ran.returncode == 0, f"demo {option}: {ran.stdout[-500:]}{ran.stderr}"
        assert "\nAnswer:\n" in ran.stdout


def test_an_editable_install_puts_the_clone_on_the_path(tmp_path: Path) -> None:
    """The README's commands install the clone editable (``pip install -e .``): its
    editable wheel builds, and the environment it goes into imports the clone."""
    wheel = tmp_path / "dist" / _build("build_editable", tmp_path / "dist")
    venv.create(tmp_path / "env", with_pip=False)
    python = tmp_path / "env" / "bin" / "python"
    _pip("--python", str(python), "install", "--no-deps", str(wheel))
    # Found, not imported: the environment has none of its dependencies.
    probe = "import importlib.util as u; print(u.find_spec('honeycomb').origin)"
    done = _command(python.parent, "python", "-c", probe, cwd=tmp_path)
    assert Path(done.stdout.strip()).is_relative_to(ROOT), done.stderr
