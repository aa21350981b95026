"""The documentation's code runs, and its links and command options are real.

Every fenced block in README.md and docs/*.md has a language. Each ``python`` block is
run: the blocks of one page in order, in one namespace (a block may use what an
earlier one on the page defined), in a fresh folder that holds ``examples/`` (as the
root of a clone does), offline (the network guard of ``conftest.py`` holds); then once
more, in the same folder, where it must print the same (a page's example may be run
twice: what it leaves behind must not change what it does). A block
may use top-level ``await``, as in ``python -m asyncio``; such blocks run on one
event loop per page, the others outside any loop.

A block that shows a real endpoint is marked, on the line before its fence, with::

    <!-- docs-test: offline -->

and runs with every ``OpenAIModel(...)`` call in it replaced by
``OfflineModel(latency=0)``.

A ``python`` block imports Honeycomb's names from ``honeycomb`` and its public
namespaces (those docs/api.md documents, ``honeycomb.testing`` ...), as a program
does: never from ``runtime``, ``workers`` or another subpackage of ``honeycomb``, which
are there for reading the code.

Each ``honeycomb`` command of an ``sh`` block (in README.md, docs/ and the examples'
READMEs) and of a hive's header comments runs, in order, and succeeds; ``RUN_ID``
stands for the run before it. Commands that need a network (a ``--model`` other than
``offline``, a ``--base-url``) or take long (``bench``) are left out.

Each ``yaml`` block is parsed; one that is a whole hive (it has ``models`` and
``roles``) is loaded with :func:`~honeycomb.hive.load_hive`, beside the example's
tools (``trip_tools``) and with ``OPENAI_API_KEY`` set, as a hive is used.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import inspect
import io
import os
import re
import shlex
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from honeycomb import OfflineModel, Role
from honeycomb.cli.main import main
from honeycomb.evals.spec import CasesSpec
from honeycomb.hive import load_hive
from honeycomb.hive.specs import HiveSpec
from tests.support import ROOT
from tests.support.api_page import public_modules

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LANGUAGES = {"python", "yaml", "sh", "text", "json"}
OFFLINE = "<!-- docs-test: offline -->"

pytestmark = pytest.mark.timeout(120)


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the fence, 1-based
    language: str
    code: str
    marker: str  # the line before the fence

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of a page, in order."""
    found: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        opening = re.fullmatch(r"(\s*)```(\S*)\s*", lines[index])
        if opening is None:
            index += 1
            continue
        end = index + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        assert end < len(lines), f"{page.relative_to(ROOT)}:{index + 1}: a fence is not closed"
        indent = len(opening[1])
        code = "\n".join(line[indent:] for line in lines[index + 1 : end]) + "\n"
        marker = lines[index - 1].strip() if index > 0 else ""
        found.append(Block(page, index + 1, opening[2], code, marker))
        index = end + 1
    return found


def of(language: str) -> list[Block]:
    return [b for page in PAGES for b in blocks(page) if b.language == language]


def test_every_block_has_a_known_language() -> None:
    unknown = [
        f"{block}: {block.language or 'no language'}"
        for page in PAGES
        for block in blocks(page)
        if block.language not in LANGUAGES
    ]
    assert unknown == []


class _Offline(ast.NodeTransformer):
    """Every ``OpenAIModel(...)`` call becomes ``OfflineModel(latency=0)``."""

    def __init__(self) -> None:
        self.replaced = 0

    def visit_Call(self, node: ast.Call) -> Any:
        self.generic_visit(node)
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if name != "OpenAIModel":
            return node
        self.replaced += 1
        offline = ast.Call(
            func=ast.Name("OfflineModel", ast.Load()),
            args=[],
            keywords=[ast.keyword("latency", ast.Constant(0))],
        )
        return ast.copy_location(offline, node)


def compiled(block: Block) -> Any:
    """The block as code whose line numbers and file name are the page's."""
    source = "\n" * block.line + block.code
    tree = ast.parse(source, filename=str(block.page))
    if block.marker == OFFLINE:
        offline = _Offline()
        tree = ast.fix_missing_locations(offline.visit(tree))
        assert offline.replaced, f"{block} is marked offline but makes no OpenAIModel"
    return compile(tree, str(block.page), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh folder that has ``examples/`` as a clone's root does. The demo's tools
    and the offline model answer at once: what a page shows runs the same without
    their simulated latency (0.15 s a model call), which was 45 s of this module."""
    (tmp_path / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HONEYCOMB_DEMO_TOOL_LATENCY", "0")
    monkeypatch.setenv("HONEYCOMB_OUTBOX", str(tmp_path / "outbox"))
    monkeypatch.setattr(OfflineModel, "delay", lambda self, request: 0.0)
    return tmp_path


PYTHON_PAGES = sorted({b.page for b in of("python")})


@pytest.mark.parametrize("block", of("python"), ids=str)
def test_each_python_block_compiles(block: Block) -> None:
    compiled(block)


def run_page(page: Path) -> str:
    """Run the python blocks of a page in order, in one namespace; what they print."""
    from honeycomb import OfflineModel

    namespace: dict[str, Any] = {"__name__": "__docs__", "OfflineModel": OfflineModel}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), asyncio.Runner() as runner:
        for block in (b for b in blocks(page) if b.language == "python"):
            code = compiled(block)
            if code.co_flags & inspect.CO_COROUTINE:
                runner.run(eval(code, namespace))
            else:
                exec(code, namespace)
    return printed.getvalue()


_VARYING = re.compile(r"\b[0-9a-f]{12}\b|\d+(?:\.\d+)?(?:e-?\d+)?|[█▒░·]+")
"""What differs from one run of a page to the next: run ids, timings, timeline bars."""


def unvarying(printed: str) -> str:
    """What a page printed, what differs from one run to the next made alike (and the
    spaces that set timeline bars where they fall)."""
    return re.sub(r"~( ~)+", "~", re.sub(r"[ \t]+", " ", _VARYING.sub("~", printed)))


@pytest.mark.parametrize("page", PYTHON_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_python_blocks_of_a_page_run_and_run_again_alike(page: Path, folder: Path) -> None:
    """A page run a second time in the same folder (with what the first run left there,
    stores and memory files) runs, and prints what it printed the first time."""
    first = run_page(page)
    again = run_page(page)
    assert unvarying(again) == unvarying(first)


PACKAGES = {"honeycomb", "runtime", "workers", "benchmarks"}
"""The top-level packages of the repository; of them, a snippet imports ``honeycomb``
and its public namespaces."""


def imports_of(block: Block) -> Iterator[tuple[int, str]]:
    """The line (of the page) and module of each import in a block."""
    for node in ast.walk(ast.parse(block.code)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield block.line + node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            yield block.line + node.lineno, "." * node.level + (node.module or "")


def test_python_blocks_import_from_honeycomb_and_its_namespaces_alone() -> None:
    public = set(public_modules())
    elsewhere = [
        f"{block.page.relative_to(ROOT)}:{line}: {module}"
        for block in of("python")
        for line, module in imports_of(block)
        if module not in public and (module.startswith(".") or module.split(".")[0] in PACKAGES)
    ]
    assert elsewhere == []


def test_the_examples_python_files_import_from_honeycomb_and_its_namespaces_alone() -> None:
    """An example is a program to copy: examples/service.py imported ``dump_value`` from
    ``runtime``, which docs/api.md says programs never import."""
    public = set(public_modules())
    elsewhere = [
        f"{path.relative_to(ROOT)}:{line}: {module}"
        for path in sorted((ROOT / "examples").rglob("*.py"))
        for line, module in imports_of(Block(path, 0, "python", path.read_text(), ""))
        if module not in public and (module.startswith(".") or module.split(".")[0] in PACKAGES)
    ]
    assert elsewhere == []


YAML_BLOCKS = of("yaml")


def whole_hive(data: object) -> bool:
    return isinstance(data, dict) and "models" in data and "roles" in data


@pytest.mark.parametrize("block", YAML_BLOCKS, ids=str)
def test_each_yaml_block_parses_and_each_hive_loads(
    block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = yaml.safe_load(block.code)
    if not whole_hive(data):
        return
    folder = tmp_path / "trip"
    shutil.copytree(ROOT / "examples" / "trip", folder)
    hive = folder / "hive.yaml"
    hive.write_text(block.code, encoding="utf-8")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-docs-test")
    loaded = load_hive(hive)
    assert set(loaded.roles) >= set(data["roles"])


PARTS = [
    b
    for b in YAML_BLOCKS
    if isinstance(data := yaml.safe_load(b.code), dict)
    and not whole_hive(data)
    and (set(data) <= set(HiveSpec.model_fields) or set(data) <= set(Role.model_fields))
]


@pytest.mark.parametrize("block", PARTS, ids=str)
def test_each_yaml_block_that_is_part_of_a_hive_is_valid_as_that_part(block: Block) -> None:
    """A section of a hive (``roles:``, ``store:``, ``mcp_servers:``), or a role file,
    shown alone: its fields and values are the ones a hive takes (only its references,
    to models, tools and files, are left unchecked)."""
    data = yaml.safe_load(block.code)
    if set(data) <= set(HiveSpec.model_fields):
        HiveSpec.model_validate(data)
        roles = data.get("roles") or {}
    else:
        roles = {data["name"]: data}
    for name, role in roles.items():
        Role.model_validate({"name": name, **role})


@pytest.mark.parametrize(
    "block", [b for b in YAML_BLOCKS if "cases" in (yaml.safe_load(b.code) or {})], ids=str
)
def test_each_cases_file_a_page_shows_is_valid(block: Block) -> None:
    """Its fields and checks are those a cases file takes (the files it names, of
    more cases and of judges, are left unread)."""
    CasesSpec.model_validate(yaml.safe_load(block.code))


def test_the_hive_page_opens_with_a_whole_hive() -> None:
    first = next(b for b in YAML_BLOCKS if b.page.name == "hive.md")
    assert whole_hive(yaml.safe_load(first.code))


# --- links --------------------------------------------------------------------------

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """The anchors of a page's headings, as GitHub makes them."""
    found = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"#{1,6} (.*)", line)
        if heading:
            text = re.sub(r"[^\w\- ]", "", heading[1].strip().lower().replace("`", ""))
            found.add(text.replace(" ", "-"))
    return found


def links() -> Iterator[tuple[Path, str]]:
    for page in PAGES:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for target in LINK.findall(text):
            if not re.match(r"[a-z]+:", target):
                yield page, target


def test_every_link_leads_somewhere() -> None:
    broken = []
    for page, target in links():
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{page.relative_to(ROOT)}: {target}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert broken == []


def test_the_index_lists_every_page() -> None:
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    listed = set(LINK.findall(index))
    pages = {p.name for p in (ROOT / "docs").glob("*.md") if p.name != "README.md"}
    assert pages <= listed


def test_the_readme_links_to_where_the_work_is_done() -> None:
    linked = {target for page, target in links() if page == ROOT / "README.md"}
    for file in (
        "workers/loop.py",
        "runtime/tools/dispatch.py",
        "honeycomb/executor.py",
        "honeycomb/run/run.py",
        "honeycomb/run/scheduler.py",
        "honeycomb/store/store.py",
        "docs/README.md",
        "benchmarks/README.md",
    ):
        assert file in linked, file


# --- the command line ---------------------------------------------------------------

COMMANDS = [["demo"], ["init"], ["run"], ["resume"], ["approve"], ["runs"], ["trace"],
            ["serve"], ["validate"], ["bench"], ["bench", "--peers"], ["memory", "list"],
            ["memory", "search"], ["memory", "forget"], ["eval"], ["eval", "compare"],
            ["chat"], ["sessions"], ["sessions", "show"], ["sessions", "forget"],
            ["sessions", "prune"]]  # fmt: skip


def options(command: list[str]) -> set[str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main([*command, "--help"])
    return set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", out.getvalue())) - {"--help"}


def section(command: list[str]) -> str:
    """The part of docs/cli.md about one command (its heading down to the next)."""
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    title = f"## `honeycomb {' '.join(command)}`"
    assert title in text, f"docs/cli.md has no section {title!r}"
    return text.split(title, 1)[1].split("\n## ", 1)[0]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_the_cli_page_names_every_option_of_a_command_and_no_other(command: list[str]) -> None:
    documented = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", section(command)))
    assert documented - {"--help", "--peers"} == options(command) - {"--peers"}


_SPAN = re.compile(r"`(honeycomb [^`]+)`")
_OPTION = re.compile(r"(?<![\w-])--[a-z][a-z-]*")


def commands_named(page: Path) -> Iterator[str]:
    """Every ``honeycomb ...`` a page names: a line of a block, or a code span."""
    text = page.read_text(encoding="utf-8")
    for block in blocks(page):
        if block.language in ("sh", "text"):
            lines = (line.strip().removeprefix("$ ") for line in block.code.splitlines())
            yield from (line for line in lines if line.startswith("honeycomb "))
    yield from _SPAN.findall(re.sub(r"```.*?```", "", text, flags=re.S).replace("\n", " "))


def command_of(named: str) -> list[str] | None:
    """The command (``["memory", "list"]``) a ``honeycomb ...`` names, if any."""
    words = [w.rstrip(":") for w in named.split()[1:3]]
    return max((c for c in COMMANDS if words[: len(c)] == c), key=len, default=None)


@pytest.mark.parametrize("page", [*PAGES, *sorted(ROOT.glob("examples/*/README.md"))], ids=str)
def test_each_option_a_page_gives_a_command_is_one_of_that_command(page: Path) -> None:
    """Not only in the CLI page's sections: docs/ray.md named ``honeycomb approve
    --edit``, which ``approve`` does not take (``--arguments`` edits)."""
    wrong = [
        f"{named!r}: {option}"
        for named in commands_named(page)
        if (command := command_of(named)) is not None and command != ["bench"]
        for option in set(_OPTION.findall(named.split("  #")[0])) - options(command) - {"--help"}
    ]
    assert wrong == []


# --- the commands shown -------------------------------------------------------------

TEMPLATES = sorted(p.parent.name for p in ROOT.glob("examples/*/hive.yaml"))
_NEEDS_NETWORK = ("--base-url", "bench")
_COMMAND = re.compile(r'honeycomb(?: (?:[^\s"]+|"[^"]*"))+')


def shown_commands(page: Path) -> list[list[str]]:
    """The ``honeycomb`` commands a page shows that run offline, as argument lists."""
    if page.suffix == ".yaml":  # "#   honeycomb demo      or   honeycomb run x.yaml"
        comments = (c for c in page.read_text().splitlines() if c.startswith("#"))
        text = "\n".join(m for c in comments for m in _COMMAND.findall(c))
    else:
        text = "\n".join(b.code for b in blocks(page) if b.language == "sh")
    found: list[list[str]] = []
    for line in text.splitlines():
        for part in line.split("  #")[0].split("&&"):
            argv = shlex.split(part.strip())
            if not argv or Path(argv[0]).name != "honeycomb":
                continue
            model = argv[argv.index("--model") + 1] if "--model" in argv else "offline"
            if model == "offline" and not any(a in argv for a in _NEEDS_NETWORK):
                found.append(argv[1:])
    return found


SHOWN = [p for p in PAGES if shown_commands(p)]


def template_pages(folder: Path) -> list[Path]:
    """The pages of a template that show commands: its README, and the header
    comments of its hives (``hive.yaml``, ``rounds.yaml`` ...)."""
    hives = (p for p in sorted(folder.glob("*.yaml")) if whole_hive(yaml.safe_load(p.read_text())))
    return [p for p in [folder / "README.md", *hives] if shown_commands(p)]


def test_the_pages_show_commands_to_run() -> None:
    shown = {p.relative_to(ROOT).as_posix() for p in SHOWN}
    assert {"README.md", "docs/first-steps.md"} <= shown
    for template in TEMPLATES:
        pages = template_pages(ROOT / "examples" / template)
        assert ROOT / "examples" / template / "README.md" in pages, template
    assert len(template_pages(ROOT / "examples" / "research")) == 3  # its README, both hives


def run_shown(page: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Run the commands a page shows, in order, each to succeed."""
    from honeycomb.store import RunStore

    for argv in shown_commands(page):
        if "RUN_ID" in argv:
            (last,) = RunStore(Path(".honeycomb/runs.db")).runs(limit=1)
            argv = [last.run_id if a == "RUN_ID" else a for a in argv]
        code = main(argv)
        out = capsys.readouterr()
        assert code == 0, f"{page}: honeycomb {shlex.join(argv)}\n{out}"
        if argv[0] in ("run", "demo"):
            assert "[offline simulation]" in out.out
            assert "did not succeed" not in out.out, out.out


@pytest.mark.parametrize("page", SHOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_commands_a_page_shows_run(
    page: Path, folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_shown(page, capsys)


@pytest.mark.parametrize("template", TEMPLATES)
def test_the_commands_a_template_shows_run_in_the_folder_init_makes(
    template: str, folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its README and its hives' comments speak from that folder, where a user of
    ``honeycomb init`` reads them: the hives' comments said ``honeycomb run
    examples/research/hive.yaml``, a file the folder does not have."""
    assert main(["init", "here", "--template", template]) == 0
    capsys.readouterr()
    os.chdir("here")
    for page in template_pages(Path.cwd()):
        run_shown(page, capsys)


@pytest.mark.parametrize(("example", "kept"), [("starter", "notes"), ("review", "reports")])
def test_an_example_run_twice_keeps_what_each_run_saved(
    example: str, kept: str, folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its README says the note (the report) lands in a folder: the second run's took
    the name of the first's, a file named by the call's id, which the offline model
    gives alike to a task's runs (and a local model numbers call_1 in every run). The
    second run replays the first's model calls: what the tool answers is the same to
    a cassette (a name made unique by a digest of the run was not)."""
    shutil.copytree(ROOT / "examples" / example, folder / "here")
    os.chdir(folder / "here")
    for tape in ("--record", "--replay"):
        assert main(["run", "hive.yaml", "--plain", tape, "calls.jsonl"]) == 0, capsys.readouterr()
    capsys.readouterr()
    assert len(list(Path(kept).glob("*.md"))) == 2


TRANSCRIPTS = [
    b for b in of("text") if b.code.startswith("$ honeycomb ") and "--model offline" in b.code
]


@pytest.mark.parametrize("block", TRANSCRIPTS, ids=str)
def test_a_terminal_session_a_page_shows_is_what_the_command_prints(
    block: Block, folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run with what it shows typed (``you> ...``), it prints the lines it shows, one
    after the other, but for figures and ids; a line ending ``...`` is as far as it
    goes, and may be followed by lines it leaves out. The chat of docs/sessions.md
    lacked the line that says a conversation starts."""
    command, *shown = block.code.splitlines()
    typed = [line.removeprefix("you> ") for line in shown if line.startswith("you> ")]
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(f"{line}\n" for line in typed)))
    assert main(shlex.split(command.removeprefix("$ honeycomb "))) == 0
    out = capsys.readouterr().out
    printed = [s for s in unvarying(out).replace("you> ", "\n").splitlines() if s.strip()]
    at, elided = 0, False
    for line in (s for s in shown if s.strip() and not s.startswith("you> ")):
        expected = unvarying(line.removesuffix(" ...")).strip()
        found = next((i for i in range(at, len(printed)) if expected in printed[i]), None)
        assert found is not None, f"{block}: not printed, or not in this order: {line!r}\n{out}"
        left_out = printed[at:found]
        assert elided or not left_out, f"{block}: printed before {line!r}: {left_out}"
        at, elided = found + 1, line.endswith(" ...")


def _awaits_at_top_level(code: str) -> bool:
    try:
        compile(code, "<block>", "exec")
    except SyntaxError:
        compile(code, "<block>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        return True
    return False


@pytest.mark.parametrize("page", [ROOT / "README.md", ROOT / "docs" / "first-steps.md"])
def test_the_pages_a_newcomer_starts_from_say_how_to_run_what_they_show(page: Path) -> None:
    """Their commands are the environment's, which they say how to activate; a block
    with top-level ``await`` says where it runs as it stands."""
    text = page.read_text(encoding="utf-8")
    assert "source .venv/bin/activate" in text
    if any(_awaits_at_top_level(b.code) for b in blocks(page) if b.language == "python"):
        assert "python -m\nasyncio" in text or "python -m asyncio" in text


def test_the_error_tree_of_the_concepts_page_is_the_error_classes_tree() -> None:
    """Every error of ``honeycomb.errors`` that is a ``HoneycombError`` is drawn under its
    base, and nothing else is drawn (the drawing lacked 17 of them)."""
    import honeycomb.errors
    from runtime.errors import HoneycombError

    page = (ROOT / "docs" / "concepts.md").read_text()
    drawing = page[page.index("```text\nHoneycombError\n") + len("```text\n") :]
    drawing = drawing[: drawing.index("```")]
    drawn: dict[str, str] = {}
    under: list[str] = []  # the names of the branches above the line, by depth
    for line in drawing.splitlines():
        name = line.lstrip("│├└─ ").split()[0]
        depth = (len(line) - len(line.lstrip("│├└─ "))) // 4
        under[depth:] = [name]
        drawn[name] = under[depth - 1] if depth else ""
    errors = {
        name: found
        for name in honeycomb.errors.__all__
        if isinstance(found := getattr(honeycomb.errors, name), type)
        and issubclass(found, HoneycombError)
    }
    bases = {
        name: next(b.__name__ for b in error.__mro__[1:] if issubclass(b, HoneycombError))
        for name, error in errors.items()
        if error is not HoneycombError
    }
    assert {name: base for name, base in drawn.items() if base} == bases


def test_the_roles_table_of_the_concepts_page_names_every_field_of_a_role() -> None:
    """The table lacked memory, approvals and session, which a hive's roles take."""
    from honeycomb import Role

    page = (ROOT / "docs" / "concepts.md").read_text()
    section = page[page.index("\n## Roles\n") :]
    table = section[: section.index("\n\n", section.index("| field |"))]
    named = re.findall(r"^\| `(\w+)` \|", table, flags=re.M)
    assert named == list(Role.model_fields)
