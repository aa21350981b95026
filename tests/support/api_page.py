"""docs/api.md, the reference of Honeycomb's public surface: one section a public
module (``## `honeycomb.events```), one table row a name (``| `RunFinished` | ... |``).
The tests read which modules are public from it."""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys

from tests.support import ROOT

__all__ = ["API_PAGE", "bound_on_import", "documented_names", "moved_names", "public_modules"]

API_PAGE = ROOT / "docs" / "api.md"

_SECTION = re.compile(r"^## `(honeycomb(?:\.\w+)?)`\n(.*?)(?=^## |\Z)", re.M | re.S)
_ROW = re.compile(r"^\| `(\w+)` \|", re.M)
_MOVED = re.compile(r"^\| `(honeycomb\.\w+)` \| (`.*`) \|$", re.M)


def _sections() -> dict[str, str]:
    return {m[1]: m[2] for m in _SECTION.finditer(API_PAGE.read_text(encoding="utf-8"))}


def public_modules() -> list[str]:
    """``honeycomb`` and the namespaces the page documents, sorted."""
    return sorted(_sections())


def documented_names(module: str) -> list[str]:
    """The names the page's section on ``module`` lists, in the page's order."""
    return _ROW.findall(_sections()[module])


def moved_names() -> dict[str, list[str]]:
    """The page's table of where names went: the names each namespace took from
    ``honeycomb``."""
    page = API_PAGE.read_text(encoding="utf-8")
    table = page[page.index("## Where names went") :].split("\n## ", 1)[0]
    return {m[1]: re.findall(r"`(\w+)`", m[2]) for m in _MOVED.finditer(table)}


_BOUND_PROBE = """\
import json, os, sys

OURS = ("honeycomb", "runtime", "workers")


def fresh(name):
    # In a child forked from this process, which has imported none of ours: the
    # names the module binds as it is imported, and the modules it loads.
    before = set(sys.modules)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        __import__(name)
        found = {"bound": list(vars(sys.modules[name])),
                 "loaded": [m for m in sys.modules if m not in before]}
        with os.fdopen(write, "w") as out:
            json.dump(found, out)
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as answer:
        text = answer.read()
    if os.waitpid(pid, 0)[1] != 0:
        raise SystemExit(f"importing {name} failed")
    return json.loads(text)


names = sys.argv[1:]
bound = {names[0]: fresh(names[0])}
# What the first import loaded of others' (pydantic, anyio ...), which every module
# of ours loads as it imports honeycomb: imported here once, not in each child.
for module in bound[names[0]]["loaded"]:
    if module.partition(".")[0] not in OURS:
        try:
            __import__(module)
        except Exception:
            pass  # (a child imports whatever this could not)
bound.update((name, fresh(name)) for name in names[1:])
print(json.dumps({name: found["bound"] for name, found in bound.items()}))
"""


@functools.cache
def bound_on_import() -> dict[str, set[str]]:
    """The names each public module binds as it is imported in an interpreter that has
    imported none of Honeycomb's modules: each in a child forked from one process,
    which imported the other packages ``import honeycomb`` loads once (a Python
    a module, each importing pydantic and the rest again, spent ten seconds of CPU)."""
    modules = public_modules()
    assert modules[0] == "honeycomb"
    done = subprocess.run([sys.executable, "-c", _BOUND_PROBE, *modules],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return {name: set(names) for name, names in json.loads(done.stdout).items()}
