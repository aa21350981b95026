"""The README's commands are the ones CI runs, and its example runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT

README = (ROOT / "README.md").read_text()


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)


def test_ci_runs_the_readme_test_command() -> None:
    shell = blocks("sh")
    install_and_test = shell[1].strip()
    assert install_and_test.endswith(".venv/bin/pytest")
    assert install_and_test in (ROOT / ".ci" / "run").read_text()
    assert shell[0].strip().endswith("honeycomb demo")


def test_the_example_runs(tmp_path: Path) -> None:
    example = blocks("python")[0]
    assert 'OpenAIModel("gpt-4o-mini")' in example
    offline = example.replace('OpenAIModel("gpt-4o-mini")', "OfflineModel(latency=0)")
    offline = offline.replace("import Executor, OpenAIModel,", "import Executor, OfflineModel,")
    script = tmp_path / "example.py"
    script.write_text(offline)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "[offline simulation]" in done.stdout
    assert "speedup" in done.stdout


def _shape(timeline: str) -> tuple[list[str], list[str]]:
    """A timeline's row names, and the names of its footer's lines, in their order."""
    rows = re.findall(r"^[★ ] (\S+) .* \d+\.\d+s \w+$", timeline, flags=re.M)
    footer = timeline.split("\n\n", 1)[1].splitlines()
    names = [re.split(r"\s{2,}", line)[0] for line in footer if not line.startswith(("█", "★"))]
    return rows, names  # (not the legend, which a narrow terminal draws on two lines)


def test_the_readme_draws_the_timeline_honeycomb_trace_draws(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its rows were named as the workers once were (meteorologist-1), not as the
    demo's trace names them (s1), and half its footer was missing."""
    from honeycomb.cli.main import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HONEYCOMB_DEMO_TOOL_LATENCY", "0")
    monkeypatch.setenv("HONEYCOMB_OUTBOX", str(tmp_path / "outbox"))
    assert main(["demo", "--latency", "0", "--plain", "--run-id", "readme"]) == 0
    capsys.readouterr()
    assert main(["trace", "readme"]) == 0
    drawn = capsys.readouterr().out
    shown = next(block for block in blocks("text") if block.startswith("run "))
    assert _shape(shown) == _shape(drawn)
    assert _shape(shown)[0] == ["plan", "s1", "s2", "s3", "s4", "aggregate"]


def test_the_readme_says_how_to_activate_the_environment_before_it_says_honeycomb() -> None:
    """The setup runs ``.venv/bin/honeycomb``; what follows says ``honeycomb``, which a
    shell finds only with the environment active."""
    activate = README.index("source .venv/bin/activate")
    bare = re.search(r"(?<![/\w-])honeycomb (?:init|run|demo|validate|trace)\b", README)
    assert bare is not None
    assert activate < bare.start()


def readme_section(title: str) -> str:
    return README.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


@pytest.mark.parametrize(
    "development",
    [readme_section("Development"), (ROOT / "docs" / "development.md").read_text()],
    ids=["README.md", "docs/development.md"],
)
def test_the_development_section_says_how_to_get_chromium_for_the_browser_tests(
    development: str,
) -> None:
    assert "sudo apt-get install chromium" in development
    assert "pytest -rs" in development  # how to see which tests it skipped
    needs = "from tests.support.chromium import"  # its program, or the browser it launched
    browser_tests = sorted(
        {
            p.parent.name
            for p in (ROOT / "tests").rglob("*.py")
            if needs in p.read_text() and p != Path(__file__)
        }
    )
    assert browser_tests == ["trace", "web"]
    assert "`honeycomb serve`" in development
    assert "trace page" in development
