"""Cases: :class:`Case` (a task, the expected answer, checks), and :func:`load_cases`,
which reads a cases file (``evals.yaml``) with every mistake told at once at its file,
line and field, as a hive's are; and the JSON lines or CSV files it takes more cases
from (``cases_from:``), each row a case (``id``, ``task``, ``expected``; the other
columns its vars).

A task and the texts of its checks take the case's vars as ``{{name}}``
(``{{expected}}`` is the expected answer); ``defaults:`` gives every case a task
template, vars and checks (run before its own).
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, NamedTuple

import msgspec
from pydantic import BaseModel

from honeycomb.evals.checks import Check, CheckFn, built_check
from honeycomb.evals.fields import field_problem
from honeycomb.evals.rows import ROW_FIELDS, misspelt, records
from honeycomb.evals.spec import CaseSpec, CasesSpec, CheckSpec, valid_part
from honeycomb.hive import Hive, load_hive
from honeycomb.hive.imports import imports_from
from runtime import ConfigError, ConfigErrors, YamlDocument, did_you_mean, load_yaml
from runtime.config.imports import import_object
from runtime.value import Value
from workers.nesting import is_nested_ref, nested_tool_name

__all__ = ["Case", "Cases", "load_cases"]


class Case(Value, frozen=True, kw_only=True):
    """One case of an eval.

    Attributes:
        id: Its name in the report (made from its place when empty: ``case-3``).
        task: What the hive is asked.
        expected: The expected answer, if there is one (``equals`` compares with it).
        checks: Its checks: plain callables ``fn(answer, run)``, or :class:`Check`\\ s
            with a weight and threshold (none: the run must end ``ok``).
        threshold: The weighted score it must reach to pass (None: every check must).
        vars: The values its task was made with.
        description: What it is about.
        judges: The hive whose roles may judge it beside the evaluated hive's: its
            cases file's ``judges:`` (so that a case run alone, ``assert_case``, is
            graded as in the whole eval).
    """

    id: str = ""
    task: str
    expected: Any = None
    checks: tuple[Check | CheckFn, ...] = ()
    threshold: float | None = None
    vars: dict[str, Any] = msgspec.field(default_factory=dict)
    description: str = ""
    judges: Hive | None = None


class Cases(Value, frozen=True, kw_only=True):
    """A cases file, loaded: its name, its cases, the hive whose roles judge beside
    the evaluated hive's (None: only the hive's), and whose long-term memory each run
    has (``own``, or one ``shared`` by the cases)."""

    name: str
    file: str | None = None
    cases: tuple[Case, ...] = ()
    judges: Hive | None = None
    memory: Literal["own", "shared"] = "own"


_VAR = re.compile(r"\{\{\s*([A-Za-z_][\w.-]*)\s*\}\}")


def load_cases(path: str | Path, hive: Hive | None = None) -> Cases:
    """Read and check a cases file, and the case files it names.

    Args:
        path: The cases file (YAML).
        hive: The hive it evaluates: ``json: output_schema`` and the judges' roles
            are checked against it (None: they are not).

    Raises:
        ConfigErrors: every problem, each with file, line and field.
    """
    file = Path(path)
    try:
        doc = load_yaml(file, interpolate=True)
    except ConfigError as exc:
        raise ConfigErrors([exc]) from exc
    if not isinstance(doc.data, Mapping):
        raise ConfigErrors([doc.error((), "a cases file is a mapping (cases:, defaults: ...)")])
    if "roles" in doc.data and "cases" not in doc.data:  # the hive, given for its cases
        raise ConfigErrors(
            [
                doc.error(
                    ("roles",),
                    f"this is a hive file, not an eval's cases file: honeycomb eval {file} "
                    "CASES.yaml runs a cases file's cases on it",
                )
            ]
        )
    spec, rows, errors = _validated(doc)
    folder = file.resolve().parent
    judges = _judges(doc, spec, file.parent, errors)  # its errors named as this file is
    put_in = _vars_put_in(spec.defaults.task, spec.defaults.model_dump(by_alias=True)["assert"])
    for index, name in enumerate(spec.cases_from):
        rows += _rows(folder / name, doc, ("cases_from", index), put_in, errors)
    if not rows and not errors:
        errors.append(doc.error(("cases",), "the file has no cases"))
    builder = _Builder(spec, hive, judges, folder)
    cases = [builder.case(row, n, errors) for n, row in enumerate(rows, 1)]
    seen: dict[str, _Row] = {}
    for case, row in zip(cases, rows, strict=True):  # its id, even if it has errors
        named = row.case.id or (case.id if case is not None else None)
        first = seen.get(named) if named is not None else None
        if first is not None:
            said = f"another case is named {named!r} ({_where(first, row)}): give each its own id"
            errors.append(row.doc.error(row.at, said))
        elif named is not None:
            seen[named] = row
    if errors:
        raise ConfigErrors(_in_order(errors))
    name = spec.name or file.stem
    return Cases(
        name=name,
        file=str(file),
        cases=tuple(c for c in cases if c),
        judges=judges,
        memory=spec.memory,
    )


def _where(row: _Row, beside: _Row) -> str:
    """Where case ``row`` is, as told beside case ``beside``: its line (``line 4``),
    and its file when it is another (``evals.yaml:4``)."""
    line, _ = row.doc.locate(row.at)
    if row.doc.file != beside.doc.file:
        return row.doc.file if line is None else f"{row.doc.file}:{line}"
    return "above" if line is None else f"line {line}"


class _Row(NamedTuple):
    """A case of the file: its spec, the document and path it is at, and the place of
    each of its checks under its ``assert:`` (a case that is not valid keeps only its
    valid checks, each told at its own place)."""

    case: CaseSpec
    doc: YamlDocument
    at: tuple[str | int, ...]
    checks_at: tuple[int, ...] | None = None  # None: all of them, in order


def _validated(doc: YamlDocument) -> tuple[CasesSpec, list[_Row], list[ConfigError]]:
    """The file checked field by field: its spec, its cases, its errors.

    A case that is not valid is told, and what is valid of it (:func:`valid_part`)
    goes on to be checked against the hive and the other cases, so that every mistake
    is told at once; it is never run (the file has errors).

    Raises:
        ConfigErrors: when what is not valid is outside its cases (the defaults, the
            judges ...), which every case depends on.
    """
    spec, errors = doc.validate(CasesSpec, doc.data)
    if spec is not None:
        return spec, [_Row(c, doc, ("cases", n)) for n, c in enumerate(spec.cases)], errors
    listed = doc.data.get("cases")
    frame, _ = doc.validate(CasesSpec, {**doc.data, "cases": []})
    if frame is None or not isinstance(listed, list):
        raise ConfigErrors(_in_order(errors))
    errors = []  # the same errors, told case by case
    rows = [_case(doc, data, ("cases", n), errors) for n, data in enumerate(listed)]
    return frame, [row for row in rows if row is not None], errors


def _with_vars(problems: list[ConfigError]) -> list[ConfigError]:
    """``problems`` of a check once the case's vars were put in, saying so."""
    return [
        ConfigError(
            f"{p.message} (with the case's vars in it)",
            file=p.file,
            line=p.line,
            column=p.column,
            field=p.field,
        )
        for p in problems
    ]


def _in_order(errors: list[ConfigError]) -> list[ConfigError]:
    """``errors`` in the order of the files' lines, as a reader fixes them."""
    return sorted(errors, key=lambda e: (e.file or "", e.line or 0, e.column or 0))


def _case(
    doc: YamlDocument, data: Any, at: tuple[str | int, ...], errors: list[ConfigError]
) -> _Row | None:
    """``data`` as a case; when it is not valid, its errors told and what is valid of it
    kept (None: nothing can be checked further)."""
    case, problems = doc.validate(CaseSpec, data, at)
    errors.extend(problems)
    if case is not None:
        return _Row(case, doc, at)
    part = valid_part(data)
    return _Row(part[0], doc, at, part[1]) if part is not None else None


def _judges(
    doc: YamlDocument, spec: CasesSpec, folder: Path, errors: list[ConfigError]
) -> Hive | None:
    if spec.judges is None:
        return None
    try:
        return load_hive(folder / spec.judges)
    except ConfigError as exc:  # each of its mistakes told at its own file and line
        found = exc.errors if isinstance(exc, ConfigErrors) else (exc,)
        count = f"{len(found)} error{'s' if len(found) != 1 else ''}"
        errors.append(doc.error(("judges",), f"the judges' hive {spec.judges} has {count}"))
        errors.extend(found)
        return None


def _rows(
    file: Path,
    doc: YamlDocument,
    path: tuple[str | int, ...],
    put_in: set[str],
    errors: list[ConfigError],
) -> list[_Row]:
    """The cases of a JSON lines or CSV file, each row located at its line; ``put_in``:
    the vars the defaults' task and checks take."""
    try:
        text = file.read_text(encoding="utf-8-sig")  # a spreadsheet's CSV starts with a BOM
    except (OSError, UnicodeDecodeError) as exc:
        errors.append(doc.error(path, f"cannot read {file}: {exc}"))
        return []
    if file.suffix not in (".jsonl", ".csv"):
        errors.append(doc.error(path, f"{file.name}: cases come from .jsonl or .csv files"))
        return []
    found: list[_Row] = []
    told: set[str] = set()  # a misspelt column is told once, not on each row
    for line, row in records(file, text, errors):
        taken = put_in | _vars_put_in(row.get("task"), row.get("assert"))
        for key, problem in misspelt(row, taken):
            if key not in told:
                told.add(key)
                errors.append(ConfigError(problem, file=str(file), line=line))
        data = {k: v for k, v in row.items() if k in ROW_FIELDS and v not in ("", None)}
        given = row.get("vars", {})  # not a mapping: told as the case's vars are
        others = {k: v for k, v in row.items() if k not in ROW_FIELDS}
        data["vars"] = {**given, **others} if isinstance(given, dict) else given
        at = YamlDocument(data=data, file=str(file), marks={(): (line, 1)})
        case = _case(at, data, (), errors)
        if case is not None:
            found.append(case)
    return found


def _vars_put_in(*texts: Any) -> set[str]:
    """The vars ``texts`` take as ``{{name}}`` (a task, checks as the file wrote them)."""
    return {m.group(1) for m in _VAR.finditer(json.dumps(texts, default=str))}


def _misspelt_task(doc: YamlDocument, path: tuple[str | int, ...]) -> bool:
    """Whether the case at ``path`` of ``doc`` has a field that is ``task`` misspelt
    (``taks:``, ``tasks:``)."""
    data: Any = doc.data
    try:
        for part in path:
            data = data[part]
    except (KeyError, IndexError, TypeError):
        return False
    if not isinstance(data, Mapping):
        return False
    return any(key != "task" and did_you_mean(str(key), ["task"]) for key in data)


class _Builder:
    """Makes each case of a file: its defaults, its vars put in, its checks built."""

    def __init__(
        self, spec: CasesSpec, hive: Hive | None, judges: Hive | None, folder: Path
    ) -> None:
        self.defaults = spec.defaults
        self.hive = hive
        self.judges = judges
        self.folder = folder
        roles = set(hive.roles) if hive is not None else None
        if roles is not None and judges is not None:
            roles |= set(judges.roles)
        if spec.judges is not None and judges is None:  # its hive has errors, told apart
            roles = None  # a judge of its roles is not known to be a mistake
        self.judge_roles = roles
        # A role of both: a judge check would ask the hive's, never the judges' hive's.
        self.both: set[str] = set()
        if hive is not None and judges is not None:
            self.both = set(hive.roles) & set(judges.roles)
        self.schema = _output_schema(hive)
        # Checks made before, by what they say once filled (and the expected answer an
        # ``equals`` compares with): a thousand cases of one file share most checks.
        self._made: dict[str, Check | None] = {}
        self._written: dict[int, tuple[dict[str, Any], bool]] = {}

    def case(self, row: _Row, number: int, errors: list[ConfigError]) -> Case | None:
        spec, doc, path = row.case, row.doc, row.at
        given = {**self.defaults.vars, **spec.vars}
        if spec.expected is not None:
            given.setdefault("expected", spec.expected)
        template = spec.task or self.defaults.task
        if template is None:
            # A task misspelt (``taks:``) is told already, as an unknown field with the
            # one meant: the case's one mistake, as a hive's would be.
            if row.checks_at is None or not _misspelt_task(doc, path):
                errors.append(doc.error(path, "the case has no task (and defaults: gives none)"))
            return None
        start = len(errors)
        task = _filled(template, given, doc, (*path, "task"), errors)
        if len(errors) == start and not task.strip():  # its run would raise, each time
            put = " once the case's vars are put in" if _VAR.search(template) else ""
            errors.append(doc.error((*path, "task"), f"the task is empty{put}: {task!r}"))
        checks: list[Check] = []
        own: list[tuple[CheckSpec, tuple[str | int, ...]]] = [
            (c, ("defaults", "assert", i)) for i, c in enumerate(self.defaults.checks)
        ]
        places = range(len(spec.checks)) if row.checks_at is None else row.checks_at
        own += [(c, (*path, "assert", i)) for i, c in zip(places, spec.checks, strict=True)]
        for check, where in own:
            built = self._check(check, given, spec.expected, doc, where, errors)
            if built is not None:
                checks.append(built)
        if any(c.kind == "equals" and c.equals is None for c, _ in own):  # it compares with
            self._fits(spec.expected, doc, (*path, "expected"), errors)
        threshold = spec.threshold if spec.threshold is not None else self.defaults.threshold
        if threshold and checks and not any(c.weight for c in checks):
            # Its score, its checks' weighted mean, would be of nothing: a pass whatever
            # they found.
            at = (*path, "threshold") if spec.threshold is not None else ("defaults", "threshold")
            errors.append(
                doc.error(
                    at,
                    f"threshold {threshold:g} weighs checks that all weigh 0: the case would "
                    "pass whatever they find; give a check a weight, or leave threshold out "
                    "(every check must pass)",
                )
            )
        if len(errors) > start:
            return None
        return Case(
            id=spec.id or f"case-{number}",
            task=task,
            expected=spec.expected,
            checks=tuple(checks),
            threshold=threshold,
            vars=given,
            description=spec.description,
            judges=self.judges,
        )

    def _check(
        self,
        spec: CheckSpec,
        given: Mapping[str, Any],
        expected: Any,
        doc: YamlDocument,
        where: tuple[str | int, ...],
        errors: list[ConfigError],
    ) -> Check | None:
        start = len(errors)
        dumped = self._written.get(id(spec))
        if dumped is None:  # the defaults' checks are every case's: written out once
            text = json.dumps(spec.model_dump(mode="json", by_alias=True, exclude_unset=True))
            dumped = self._written[id(spec)] = (json.loads(text), "{{" in text)
        filled = _fill_all(dumped[0], given, doc, where, errors) if dumped[1] else dumped[0]
        if len(errors) > start:
            return None
        key = json.dumps([filled, expected if spec.kind == "equals" else None], sort_keys=True)
        if key not in self._made:  # one that failed is told once, where it first is
            self._made[key] = self._made_anew(filled, expected, doc, where, errors)
        return self._made[key]

    def _made_anew(
        self,
        filled: dict[str, Any],
        expected: Any,
        doc: YamlDocument,
        where: tuple[str | int, ...],
        errors: list[ConfigError],
    ) -> Check | None:
        # Valid as written, it may not be with the case's vars in it (regex: "{{pattern}}").
        spec, problems = doc.validate(CheckSpec, filled, where)
        if spec is None:
            errors.extend(_with_vars(problems))
            return None
        python = None
        try:
            if spec.kind == "python" and spec.python is not None:
                python = self._imported(spec.python)
            self._check_kind(spec)
            if spec.kind == "equals" and spec.equals is None and expected is None:
                raise ConfigError(  # else it would compare the answer with 'None'
                    "equals with no value compares with the case's expected answer, and "
                    "the case gives none: write the value, or give the case expected:"
                )
        except ConfigError as exc:
            errors.append(doc.error((*where, spec.kind), exc.message))
            return None
        if spec.kind == "equals" and not self._fits(spec.equals, doc, (*where, "equals"), errors):
            return None
        return built_check(spec, expected=expected, output_schema=self.schema, python=python)

    def _fits(
        self, value: Any, doc: YamlDocument, where: tuple[str | int, ...], errors: list[ConfigError]
    ) -> bool:
        """Whether ``value``, which an ``equals`` check compares the answer with, may
        equal an answer of the hive's output schema; if not, the field is told."""
        found = field_problem(value, self.schema) if self.schema is not None else None
        if found is not None:
            errors.append(doc.error((*where, *found[0]), found[1]))
        return found is None

    def _imported(self, path: str) -> CheckFn:
        """The function a ``python`` check names, imported as the hive's tools are."""
        with imports_from(self.folder):
            found = import_object(path)
        if not callable(found):
            raise ConfigError(f"{path!r} is not callable: a check is fn(answer, run)")
        try:
            inspect.signature(found).bind(None, None)
        except TypeError as exc:  # it would raise so on every case's run
            raise ConfigError(
                f"{path!r} cannot be called as fn(answer, run), as a check is: {exc}"
            ) from exc
        except ValueError:  # no signature to read (a builtin's): called as it is
            pass
        fn: CheckFn = found
        return fn

    def _check_kind(self, spec: CheckSpec) -> None:
        """Raise if what ``spec`` needs is not there: a judge's role, the hive's
        output schema, the package that checks JSON schemas."""
        judge = spec.judge
        if (
            judge is not None
            and self.judge_roles is not None
            and judge.role not in self.judge_roles
        ):
            roles = ", ".join(sorted(self.judge_roles))
            raise ConfigError(f"no role {judge.role!r} to judge with; the roles: {roles}")
        if judge is not None and judge.role in self.both:
            raise ConfigError(
                f"the hive and the judges' hive both have a role {judge.role!r}, and the "
                "hive's would grade: rename the judges' hive's role"
            )
        called = spec.tool_called
        if called is not None and self.hive is not None:
            self._check_tool(called.name, called.role)
        schema = spec.json_check.json_schema if spec.json_check is not None else None
        if schema == "output_schema" and self.hive is not None and self.schema is None:
            raise ConfigError("the hive's aggregator has no output_schema to check against")
        if isinstance(schema, dict) and importlib.util.find_spec("jsonschema") is None:
            raise ConfigError(
                "a JSON schema is checked by the jsonschema package: pip install "
                "'honeycomb-agents[evals]'"
            )

    def _check_tool(self, name: str, role: str | None) -> None:
        """Raise if the role (or tool) a ``tool_called`` check names is a misspelling of
        one the hive has: its check would fail every case. A name close to none may be
        of one taken away since, whose check then says it was not called."""
        assert self.hive is not None
        if role is not None and role not in self.hive.roles:
            close = did_you_mean(role, self.hive.roles)
            if close:
                roles = ", ".join(self.hive.roles)
                raise ConfigError(f"the hive has no role {role!r}{close}; its roles: {roles}")
            return
        names = self.hive.tool_names(role)
        called = _called_by(name)
        if names is not None and name not in names and called in names:
            raise ConfigError(  # as a role's tools: list it, not as its model calls it
                f"{name!r} is how the hive declares the tool; a tool_called check names it "
                f"as its model calls it: {called!r}"
            )
        close = did_you_mean(name, names) if names is not None and name not in names else ""
        if names is not None and close:
            whose = f"role {role!r} has" if role is not None else "the hive's roles have"
            raise ConfigError(
                f"{whose} no tool {name!r}{close}; the tools: {', '.join(names) or 'none'}"
            )


def _called_by(ref: str) -> str:
    """The name a model calls a tool by, given as a role's ``tools:`` lists it: an
    agent's role, a hive file's stem, a function's name (``module:function``)."""
    if is_nested_ref(ref):
        return nested_tool_name(ref)
    return ref.rpartition(":")[2]


def _output_schema(hive: Hive | None) -> type[BaseModel] | None:
    if hive is None:
        return None
    name = hive.spec.aggregator or "aggregator"
    role = hive.roles.get(name) if isinstance(name, str) else None
    if role is None or role.output_schema is None:
        return None
    with hive.imports():
        return role.resolve_output()


def _filled(
    text: str,
    given: Mapping[str, Any],
    doc: YamlDocument,
    where: tuple[str | int, ...],
    errors: list[ConfigError],
) -> str:
    """``text`` with each ``{{name}}`` replaced by its var; an unknown one is an error."""
    unknown = [m.group(1) for m in _VAR.finditer(text) if m.group(1) not in given]
    if unknown:
        names = ", ".join(sorted(given)) or "none"
        errors.append(
            doc.error(
                where, f"no var {unknown[0]!r} for {{{{{unknown[0]}}}}}; the case's vars: {names}"
            )
        )
        return text
    return _VAR.sub(lambda m: _as_text(given[m.group(1)]), text)


def _as_text(value: Any) -> str:
    """A var as ``{{name}}`` puts it in a text: a text as it is, any other value as
    JSON, as the file wrote it (``[Lisbon, Porto]``: ``["Lisbon", "Porto"]``, ``true``,
    ``null``; not Python's ``['Lisbon', 'Porto']``, ``True``, ``None``), its letters
    as they are (``Zürich``, not ``Z\u00fcrich``)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _fill_all(
    value: Any,
    given: Mapping[str, Any],
    doc: YamlDocument,
    where: tuple[str | int, ...],
    errors: list[ConfigError],
) -> Any:
    if isinstance(value, str):
        return _filled(value, given, doc, where, errors)
    if isinstance(value, list):
        return [_fill_all(v, given, doc, (*where, i), errors) for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {k: _fill_all(v, given, doc, (*where, k), errors) for k, v in value.items()}
    return value
