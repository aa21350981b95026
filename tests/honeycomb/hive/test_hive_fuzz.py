"""Hive files fuzzed with hypothesis: loading one, or validating it from the command
line, either succeeds or reports ConfigErrors naming the file (and the field), never
a traceback."""

from __future__ import annotations

import contextlib
import copy
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from honeycomb.cli.main import demo_hive_path, main
from honeycomb.hive import load_hive
from runtime import ConfigError, ConfigErrors, HoneycombError, YamlPath, format_path
from tests.honeycomb.hive.test_hive import GOOD
from tests.support.data_paths import paths_in

SLOW_OK = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
TEXT_EXAMPLES = 200
MUTATION_EXAMPLES = 75

# Errors about the file as a whole, which no field is involved in.
WHOLE_FILE = ("invalid YAML", "a hive file must be a mapping", "the file is not UTF-8")


def root_is_mapping(path: Path) -> bool:
    try:
        return isinstance(yaml.safe_load(path.read_bytes()), dict)
    except (yaml.YAMLError, ValueError, LookupError, AttributeError, TypeError, RecursionError):
        return False  # PyYAML's own loader fails in all these ways on bad scalars


def trip_hive() -> dict[str, Any]:
    text = demo_hive_path().read_text().replace("trip_tools:", "examples.trip.trip_tools:")
    loaded: dict[str, Any] = yaml.safe_load(text)
    return loaded


BASES: list[dict[str, Any]] = [yaml.safe_load(GOOD), trip_hive()]


def check_loading(path: Path) -> ConfigErrors | None:
    """Load ``path`` and validate it from the command line; the error, if any."""
    caught: HoneycombError | None = None
    try:
        load_hive(path).check_runnable()  # what validate checks: that run can run it
    except HoneycombError as exc:  # anything else escaping fails the test
        caught = exc
    if caught is not None:
        assert isinstance(caught, ConfigErrors), repr(caught)
        assert str(path) in str(caught), str(caught)
        assert caught.errors, str(caught)
        for error in caught.errors:
            assert error.file is not None, str(error)
            assert error.message, str(error)
            if error.file == str(path) and not error.message.startswith(WHOLE_FILE):
                # only an error about the document as a whole has no field
                assert error.field or not root_is_mapping(path), str(error)
    failure = caught
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["validate", str(path)])
    assert code == (1 if failure is not None else 0)
    assert out.getvalue().startswith(f"{path}: "), out.getvalue()
    return failure


# --- random text --------------------------------------------------------------------

YAML_BITS = st.sampled_from(
    [":", ": ", "- ", "\n", "\n  ", "\t", "{", "}", "[", "]", ",", "&a ", "*a", "&b ", "*b",
     "<<: ", "!!int ", "!!bool ", "!!timestamp ", "!!binary ", "!!python/object ", "? ", "#",
     "'", '"', "|", ">", "---\n", "...\n", "%YAML 1.1\n", "${X}", "${HOME:-x}", "null", "~",
     "9" * 4400, "0x" + "f" * 1030, "1e400", ".nan", "-.inf", "models", "roles", "policy",
     "tools", "default: offline", "planner", "aggregator", "name", "\x00", "\x07", "\ufffe",
     "\ud800", "\U0001f600", "é"]
)  # fmt: skip

yaml_ish = st.lists(st.one_of(YAML_BITS, st.text(max_size=8)), max_size=30).map("".join)


def write_text(path: Path, text: str) -> None:
    # Lone surrogates cannot be UTF-8: they make a file that is not UTF-8 text at all.
    path.write_bytes(text.encode("utf-8", "surrogatepass"))


LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 10)}]\n"
    for p, n in zip("abcdefgh", "bcdefghi", strict=True)
)


@settings(max_examples=TEXT_EXAMPLES, deadline=None, suppress_health_check=SLOW_OK)
@given(text=st.one_of(yaml_ish, st.text(max_size=200)))
@example(text="[" * 3000 + "]" * 3000)  # deeper than Python's recursion limit
@example(text="a: &a [*a]\n")  # an alias inside its own anchor
@example(text=LAUGHS)  # 10**9 values from ten lines
@example(text="name: " + "9" * 5000)  # too many digits for int()
@example(text="name: 0x" + "f" * 5000)  # an int too long to print in an error
@example(text="name: !!bool maybe\nroles: !!int x\nmodels: !!timestamp 2001-13-45")
@example(text="models: {default: offline}\n\troles: {}\n")
@example(text="name: \x01")
@example(text="name: \ud800")
@example(text="? [a, b]\n: c\n")  # a key pydantic mistakes for a union member's name
def test_random_text_never_escapes_as_a_traceback(tmp_path: Path, text: str) -> None:
    path = tmp_path / "hive.yaml"
    write_text(path, text)
    check_loading(path)


def test_the_safety_limits_name_their_place(tmp_path: Path) -> None:
    path = tmp_path / "hive.yaml"
    write_text(path, LAUGHS)
    assert "expands to more than 100,000 values" in str(check_loading(path))
    write_text(path, "models:\n  x: &a [*a]\n")
    assert f"{path}:2:6: models.x[0]: an alias refers to its own anchor" in str(check_loading(path))
    write_text(path, "roles:\n  a: {max_turns: " + "9" * 5000 + "}\n")
    assert f"{path}:2:18: roles.a.max_turns: number too large" in str(check_loading(path))
    write_text(path, "name: ok\ndefault_model: \x07\n")
    assert f"{path}:2:16: invalid YAML: character U+0007 is not allowed" in str(check_loading(path))
    write_text(path, "name: \ud800\n")
    assert f"{path}: the file is not UTF-8 text" in str(check_loading(path))


# --- valid hives, mutated ---------------------------------------------------------

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**70, max_value=2**200),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["offline", "gpt", "planner", "aggregator", "quorum", "str", "int[0]"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)

# Import paths that do not import, or import something that is not a tool.
bad_imports = st.one_of(
    st.from_regex(r"hc_fuzz_missing_[a-z]{1,8}(\.[a-z]{1,5})?:[a-z_]{1,8}", fullmatch=True),
    st.sampled_from(
        [
            "tests.support.role_tools:missing",
            "tests.support.role_tools:NOT_A_MODEL",
            "tests.support.role_tools:Summary",
            "tests.support.role_tools:shout.upper",
            "json:JSONDecoder",
            "json:dumps",
            "math:pi",
            "os:sep",
            "os:path",
            "collections:OrderedDict",
            "builtins:print",
            "..relative:x",
            ":x",
            "json:",
            "no colon",
            "a\x00b:c",
        ]
    ),
)


def tool_paths(data: dict[str, Any]) -> list[YamlPath]:
    return [p for p in paths_in(data) if len(p) >= 3 and p[-2] == "tools"] + [
        p for p in paths_in(data) if len(p) == 2 and p[0] == "tools"
    ]


def parent_of(data: Any, path: YamlPath) -> Any:
    for part in path[:-1]:
        data = data[part]
    return data


Mutation = tuple[str, YamlPath]


@st.composite
def mutated_hives(draw: st.DrawFn) -> tuple[dict[str, Any], list[Mutation]]:
    """A valid hive with one to three mutations, and what they were."""
    data = copy.deepcopy(draw(st.sampled_from(BASES)))
    done: list[Mutation] = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["delete", "replace", "add", "import"]))
        if kind == "import":
            candidates = tool_paths(data)
            if not candidates:
                continue
            path = draw(st.sampled_from(candidates))
            parent_of(data, path)[path[-1]] = draw(bad_imports)
            done.append((kind, path))
            continue
        candidates = paths_in(data)
        if kind == "add":
            containers = [p for p in candidates if isinstance(parent_of(data, (*p, 0)), dict)]
            path = draw(st.sampled_from([(), *containers]))
            target = parent_of(data, (*path, "x"))
            key = draw(st.one_of(st.text(max_size=10), st.integers(), st.booleans(), st.none()))
            if key in target:
                continue
            target[key] = draw(values)
            # as YAML reads a key (its own spelling, 'false', 'null': the file's words)
            read = (
                yaml.safe_dump(key).split("\n", 1)[0]
                if key is None or isinstance(key, bool)
                else key
            )
            done.append((kind, (*path, read)))
            continue
        if not candidates:
            continue
        path = draw(st.sampled_from(candidates))
        parent = parent_of(data, path)
        if kind == "delete":
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(values)
        done.append((kind, path))
    return data, done


@settings(max_examples=MUTATION_EXAMPLES, deadline=None, suppress_health_check=SLOW_OK)
@given(mutated=mutated_hives())
def test_mutated_hives_load_or_name_file_and_field(
    tmp_path: Path, mutated: tuple[dict[str, Any], list[Mutation]]
) -> None:
    data, done = mutated
    hive = tmp_path / "hive.yaml"
    hive.write_text(yaml.safe_dump(data, allow_unicode=True))
    failure = check_loading(hive)
    if failure is not None and len(done) == 1 and done[0][0] in ("replace", "import", "add"):
        # one value changed or added broke the hive: an error names a field under the
        # same top-level key (the value itself, or a reference to what it changed)
        path = done[0][1]
        fields = [e.field or "" for e in failure.errors]
        # Or the YAML it now holds is read as a mistake where it stands (a key that is a
        # lone non-breaking space, as text copied from a web page holds): at its line.
        at_its_line = any(e.message.startswith(WHOLE_FILE) and e.line for e in failure.errors)
        named = any(f.startswith(format_path(path[:1])) for f in fields)
        assert named or at_its_line, (path, str(failure))


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (
            lambda d: d["roles"]["counter"].update(tools=["hc_fuzz_missing:x"]),
            "roles.counter.tools[0]",
        ),
        (lambda d: d["roles"]["counter"].update(tools=["math:pi"]), "roles.counter.tools[0]"),
        (lambda d: d["roles"]["counter"].update(tools=[["x"]]), "roles.counter.tools[0]"),
        (lambda d: d["roles"].update(counter=None), "roles.counter"),
        (lambda d: d["models"].update(gpt={"model": None}), "models.gpt"),
        (lambda d: d["policy"].update(max_workers=2**5000), "policy.max_workers"),
        (lambda d: d["policy"].update(budgets=[1]), "policy.budgets"),
        (lambda d: d.update({"str": 1}), "str"),
        (lambda d: d["roles"].update({"int": {"max_turns": "x"}}), "roles.int.max_turns"),
        (lambda d: d.update(tools={"t": "json:dumps"}), "tools.t"),
    ],
)
def test_each_kind_of_mistake_names_its_field(
    tmp_path: Path, change: Callable[[dict[str, Any]], None], field: str
) -> None:
    data = copy.deepcopy(BASES[0])
    change(data)
    hive = tmp_path / "hive.yaml"
    hive.write_text(yaml.safe_dump(data))
    failure = check_loading(hive)
    assert failure is not None
    assert field in [e.field for e in failure.errors], str(failure)


def test_the_bases_are_valid(tmp_path: Path) -> None:
    for index, data in enumerate(BASES):
        hive = tmp_path / f"hive{index}.yaml"
        hive.write_text(yaml.safe_dump(data))
        assert check_loading(hive) is None


def test_config_errors_are_honeycomb_errors() -> None:
    assert issubclass(ConfigErrors, ConfigError)
    assert issubclass(ConfigError, HoneycombError)
