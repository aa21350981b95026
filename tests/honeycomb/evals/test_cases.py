"""A cases file: defaults, vars, cases from JSON lines and CSV; every mistake told at
once at its file, line and field, as a hive's are."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from honeycomb.errors import ConfigErrors
from honeycomb.evals import Check, load_cases
from honeycomb.hive import load_hive
from tests.support.evals import TINY_HIVE, tiny_hive, write


def _errors(path: Path, hive: Path | None = None) -> list[str]:
    with pytest.raises(ConfigErrors) as caught:
        load_cases(path, load_hive(hive) if hive is not None else None)
    return [str(e) for e in caught.value.errors]


def test_defaults_vars_and_rows_from_jsonl_and_csv_make_the_cases(tmp_path: Path) -> None:
    write(tmp_path, "more.jsonl", '{"id": "oslo", "city": "Oslo", "expected": "Norway"}\n\n')
    write(tmp_path, "more.csv", "id,city,expected\nkyoto,Kyoto,Japan\n")
    path = write(
        tmp_path,
        "evals.yaml",
        """
        name: cities
        defaults:
          task: Where is {{city}}?
          vars: {city: Lisbon}
          assert:
            - status: ok
        cases:
          - id: lisbon
            expected: Portugal
            assert:
              - contains: "{{expected}}"
          - task: Compare {{city}} and {{other}}
            vars: {other: Porto}
        cases_from: [more.jsonl, more.csv]
        """,
    )
    cases = load_cases(path)
    assert cases.name == "cities"
    tasks = {c.id: c.task for c in cases.cases}
    assert tasks == {
        "lisbon": "Where is Lisbon?",
        "case-2": "Compare Lisbon and Porto",
        "oslo": "Where is Oslo?",
        "kyoto": "Where is Kyoto?",
    }
    names = [[c.name for c in case.checks if isinstance(c, Check)] for case in cases.cases]
    assert names[0] == ["status 'ok'", "contains 'Portugal'"]
    assert names[1] == ["status 'ok'"]
    assert cases.cases[3].expected == "Japan"
    assert cases.cases[3].vars["city"] == "Kyoto"


def test_a_var_that_is_no_text_is_put_in_as_json_as_the_expected_answer_is(
    tmp_path: Path,
) -> None:
    write(tmp_path, "more.jsonl", '{"id": "row", "cities": ["Oslo", "Bergen"], "sunny": false}\n')
    path = write(
        tmp_path,
        "evals.yaml",
        """
        defaults:
          task: "Compare {{cities}}: sunny={{sunny}}"
        cases:
          - id: listed
            vars: {cities: [Lisbon, Zürich], sunny: true}
            expected: {city: Zürich, nights: null}
            assert:
              - contains: "{{expected}}"
        cases_from: [more.jsonl]
        """,
    )
    listed, row = load_cases(path).cases
    # As the file wrote them, not Python's ['Lisbon', 'Zürich'], True, None.
    assert listed.task == 'Compare ["Lisbon", "Zürich"]: sunny=true'
    assert row.task == 'Compare ["Oslo", "Bergen"]: sunny=false'
    (contains,) = listed.checks
    assert isinstance(contains, Check)
    assert contains.name == """contains '{"city": "Zürich", "nights": null}'"""  # not \\u00fc


def test_every_mistake_is_told_at_its_line_and_field(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "evals.yaml",
        """
        cases:
          - id: one
            task: Where is {{town}}?
            asert: []
          - id: two
            task: x
            assert:
              - contains: a
                regex: b
              - regex: "(unclosed"
              - python: nowhere_module:check
              - tool_called: {name: t, at_least: 2, at_most: 1}
              - contains: c
                weight: .inf
              - side_effects: -1
              - python: checks
          - id: two
            task: y
          - id: three
            taks: z
          - id: four
            vars: {a: 1}
        """,
    )
    errors = _errors(path)
    file = str(path)
    # What the file says and what its cases make of it, all at once: the valid part of
    # a case that is not valid (its vars, its other checks, its id) is checked too.
    assert errors == [
        f"{file}:3:5: cases[0].task: no var 'town' for {{{{town}}}}; the case's vars: none",
        f"{file}:4:5: cases[0].asert: unknown field 'asert' (did you mean 'assert'?); allowed: "
        "assert, description, expected, id, task, threshold, vars",
        f"{file}:8:9: cases[1].assert[0]: a check has exactly one of: equals, contains, "
        "icontains, not_contains, regex, json, python, judge, status, tool_called, "
        "side_effects, cost, latency, tokens, model_calls (it has contains, regex)",
        f"{file}:10:9: cases[1].assert[1].regex: not a regular expression: missing ), "
        "unterminated subpattern at position 0",
        f"{file}:11:9: cases[1].assert[2].python: cannot import 'nowhere_module:check': no "
        "module named 'nowhere_module'",
        f"{file}:12:9: cases[1].assert[3].tool_called: at_least (2) is above at_most (1)",
        # A case's weighted score would be inf/inf, no score a report could keep.
        f"{file}:14:9: cases[1].assert[4].weight: Input should be a finite number (got inf)",
        f"{file}:15:9: cases[1].assert[5].side_effects: a count is 0 or more, not -1",  # once
        f"{file}:16:9: cases[1].assert[6].python: 'checks' names no function: write "
        "module:function (python: checks:similar)",
        f"{file}:17:5: cases[2]: another case is named 'two' (line 5): give each its own id",
        # Told once, as a hive's field is: not also "the case has no task".
        f"{file}:20:5: cases[3].taks: unknown field 'taks' (did you mean 'task'?); allowed: "
        "assert, description, expected, id, task, threshold, vars",
        f"{file}:21:5: cases[4]: the case has no task (and defaults: gives none)",
    ]


def test_a_bound_no_run_could_meet_is_a_mistake_at_its_line(tmp_path: Path) -> None:
    """An amount's at_least above its at_most (a count's was told, an amount's was
    kept: its check failed every run)."""
    path = write(
        tmp_path,
        "evals.yaml",
        """
        cases:
          - task: x
            assert:
              - tokens: {at_least: 500, at_most: 100}
              - latency: {at_least: 2.5, at_most: 1, of: critical_path}
              - cost: {at_least: 0.01, at_most: 0.01}
        """,
    )
    file = str(path)
    assert _errors(path) == [
        f"{file}:4:9: cases[0].assert[0].tokens: at_least (500) is above at_most (100)",
        f"{file}:5:9: cases[0].assert[1].latency: at_least (2.5) is above at_most (1)",
    ]


def test_what_a_check_needs_of_the_hive_is_checked_against_it(tmp_path: Path) -> None:
    hive = tiny_hive(tmp_path)
    path = write(
        tmp_path,
        "evals.yaml",
        """
        cases:
          - task: x
            assert:
              - judge: {role: critic, rubric: fair}
              - json: output_schema
        """,
    )
    assert _errors(path, hive) == [
        f"{path}:4:9: cases[0].assert[0].judge: no role 'critic' to judge with; the roles: "
        "aggregator, planner, writer",
        f"{path}:5:9: cases[0].assert[1].json: the hive's aggregator has no output_schema to "
        "check against",
    ]


class Leg(BaseModel):
    to: str


class Trip(BaseModel):
    city: str
    legs: list[Leg]


def test_an_equals_value_with_a_field_the_answer_has_not_is_told_at_that_field(
    tmp_path: Path,
) -> None:
    # It would equal no answer of the hive's output schema: every case would fail.
    hive = write(
        tmp_path,
        "hive.yaml",
        TINY_HIVE.replace(
            "description: Merges the results.",
            "description: Merges the results.\n    output_schema: "
            "tests.honeycomb.evals.test_cases:Trip",
        ),
    )
    path = write(
        tmp_path,
        "evals.yaml",
        """
        cases:
          - task: x
            expected: {citty: Lisbon, legs: []}
            assert:
              - equals: null
              - equals: {city: Lisbon, legs: [{to: Porto}, {too: Faro}]}
              - equals: {city: Lisbon}
              - equals: {city: Lisbon, legs: [{to: Porto}]}
        """,
    )
    trip = "the hive's answer, Trip (city, legs),"
    assert _errors(path, hive) == [
        f"{path}:3:16: cases[0].expected.citty: {trip} has no field 'citty' (did you mean 'city'?)",
        f"{path}:6:53: cases[0].assert[1].equals.legs[1].too: Leg (to) has no field 'too' "
        "(did you mean 'to'?)",
        f"{path}:7:9: cases[0].assert[2].equals: {trip} has 'legs' too: equals compares the "
        "whole answer",
    ]


def test_a_judge_role_of_both_the_hive_and_the_judges_hive_is_a_mistake(tmp_path: Path) -> None:
    hive = tiny_hive(tmp_path)
    write(
        tmp_path,
        "judges.yaml",
        """
        name: judges
        models:
          offline: {provider: offline, latency: 0}
        roles:
          writer: {description: Grades answers on a model of its own.}
          critic: {description: Grades answers.}
        """,
    )
    path = write(
        tmp_path,
        "evals.yaml",
        """
        judges: judges.yaml
        cases:
          - task: x
            assert:
              - judge: {role: writer, rubric: fair}
              - judge: {role: critic, rubric: fair}
        """,
    )
    # The hive's writer would have graded, not the judges' hive's.
    assert _errors(path, hive) == [
        f"{path}:5:9: cases[0].assert[0].judge: the hive and the judges' hive both have a "
        "role 'writer', and the hive's would grade: rename the judges' hive's role",
    ]


def test_every_mistake_of_the_judges_hive_is_told_and_its_roles_are_not_called_missing(
    tmp_path: Path,
) -> None:
    hive = tiny_hive(tmp_path)
    judges = write(
        tmp_path,
        "judges.yaml",
        """
        name: judges
        models:
          offline: {provider: offlin, latency: 0}
        roles:
          critic: {descripton: Grades answers.}
        """,
    )
    path = write(
        tmp_path,
        "evals.yaml",
        """
        judges: judges.yaml
        cases:
          - task: x
            assert:
              - judge: {role: critic, rubric: fair}
        """,
    )
    told = _errors(path, hive)
    assert told[0] == f"{path}:1:1: judges: the judges' hive judges.yaml has 2 errors"
    assert [e.split(": ")[0:2] for e in told[1:]] == [
        [f"{judges}:3:13", "models.offline.provider"],
        [f"{judges}:5:12", "roles.critic.descripton"],
    ]  # and not that no role 'critic' judges: it is the judges' hive's, with errors


def test_a_python_check_that_cannot_be_called_with_the_answer_and_run_is_a_mistake(
    tmp_path: Path,
) -> None:
    write(
        tmp_path,
        "mine.py",
        """
        def answer_only(answer):
            return True

        def both(answer, run, strict=True):
            return True

        def keyword_only(*, answer, run):
            return True
        """,
    )
    path = write(
        tmp_path,
        "evals.yaml",
        """
        cases:
          - task: x
            assert:
              - python: mine:answer_only
              - python: mine:both
              - python: mine:keyword_only
        """,
    )
    # Each would raise TypeError on every case's run.
    assert _errors(path) == [
        f"{path}:4:9: cases[0].assert[0].python: 'mine:answer_only' cannot be called as "
        "fn(answer, run), as a check is: too many positional arguments",
        f"{path}:6:9: cases[0].assert[2].python: 'mine:keyword_only' cannot be called as "
        "fn(answer, run), as a check is: too many positional arguments",
    ]


def test_bad_rows_and_bad_files_are_told_at_their_lines(tmp_path: Path) -> None:
    rows = write(
        tmp_path,
        "rows.jsonl",
        '{"task": "a"}\nnot json\n[1]\n{"task": "b", "threshold": 2}\n'
        '{"task": "c", "vars": "city=Oslo"}\n',
    )
    path = write(tmp_path, "evals.yaml", "cases_from: rows.jsonl\n")
    errors = _errors(path)
    assert errors[0].startswith(f"{rows}:2: not JSON: Expecting value")
    assert errors[1:] == [
        f"{rows}:3: each line is a JSON object (a case)",
        f"{rows}:4:1: threshold: Input should be less than or equal to 1 (got 2)",
        f"{rows}:5:1: vars: should be a mapping (got 'city=Oslo'): write 'key: value' lines "
        "under it",  # not a TypeError out of load_cases
    ]
    assert _errors(write(tmp_path, "evals.yaml", "cases: []\n")) == [
        f"{tmp_path / 'evals.yaml'}:1:1: cases: the file has no cases"
    ]
    assert _errors(write(tmp_path, "evals.yaml", "- a list\n")) == [
        f"{tmp_path / 'evals.yaml'}: a cases file is a mapping (cases:, defaults: ...)"
    ]
    hive = tiny_hive(tmp_path)  # given where the cases file goes: said so, once
    assert _errors(hive) == [
        f"{hive}:4:1: roles: this is a hive file, not an eval's cases file: honeycomb eval "
        f"{hive} CASES.yaml runs a cases file's cases on it"
    ]
    missing = _errors(write(tmp_path, "evals.yaml", "cases_from: gone.csv\n"))
    assert missing[0].startswith(f"{tmp_path / 'evals.yaml'}:1:1: cases_from[0]: cannot read")


def test_a_rows_key_that_misspells_a_field_is_told_not_taken_for_a_var(tmp_path: Path) -> None:
    # Taken for vars, the checks of 'asserts' and the answer of 'Expected' were dropped:
    # each case passed on its status alone.
    rows = write(
        tmp_path,
        "rows.jsonl",
        '{"id": "a", "task": "Say hi", "asserts": [{"contains": "hi"}]}\n'
        '{"id": "b", "task": "Find {{expect}}", "expect": "Oslo"}\n',  # a var its task takes
    )
    table = write(tmp_path, "rows.csv", "id,task,Expected\nc,Say hi,hi\nd,Say yo,yo\n")
    path = write(tmp_path, "evals.yaml", "cases_from: [rows.jsonl, rows.csv]\n")
    fields = "its fields: id, task, expected, assert, threshold, description, vars"
    assert _errors(path) == [
        f"{table}:2: unknown field 'Expected' (did you mean 'expected'?): the other keys of a "
        f"case are its vars, and no task or check of it takes {{{{Expected}}}}; {fields}",
        f"{rows}:1: unknown field 'asserts' (did you mean 'assert'?): the other keys of a "
        f"case are its vars, and no task or check of it takes {{{{asserts}}}}; {fields}",
    ]  # a column once, not on each row
    table.write_text("id,task,Expected\nc,Say {{Expected}},hi\n")
    rows.write_text('{"id": "b", "task": "Find {{expect}}", "expect": "Oslo"}\n')
    assert [c.vars for c in load_cases(path).cases] == [{"expect": "Oslo"}, {"Expected": "hi"}]


def test_a_csv_value_of_several_lines_is_kept_whole_and_rows_are_told_at_their_lines(
    tmp_path: Path,
) -> None:
    text = 'id,task\nlong,"Say hello\nto Oslo, twice"\nshort,Say {{who}}\nwide,Say hi,to, all\n'
    rows = tmp_path / "rows.csv"
    rows.write_text(text)
    path = write(tmp_path, "evals.yaml", "cases_from: rows.csv\n")
    assert _errors(path) == [
        f"{rows}:4:1: task: no var 'who' for {{{{who}}}}; the case's vars: none",  # not :3
        f"{rows}:5: the row has 4 values, and the header names 2 columns (id, task): quote a "
        "value that holds a comma",
    ]
    rows.write_text(text.partition("short")[0])
    (case,) = load_cases(path).cases
    assert case.task == "Say hello\nto Oslo, twice"  # its line break kept


def test_a_file_of_rows_as_a_spreadsheet_saves_it_is_read(
    tmp_path: Path,
) -> None:
    bom = "\ufeff"  # what a spreadsheet writes first in a CSV saved as UTF-8
    (tmp_path / "rows.csv").write_text(f"{bom}id,task\noslo,Say hi\n", encoding="utf-8")
    (tmp_path / "rows.jsonl").write_text(f'{bom}{{"id": "kyoto", "task": "Say hi"}}\n')
    path = write(tmp_path, "evals.yaml", "cases_from: [rows.csv, rows.jsonl]\n")
    cases = load_cases(path).cases
    assert [(c.id, c.vars) for c in cases] == [("oslo", {}), ("kyoto", {})]
    # Separated by semicolons, as a spreadsheet in a language of decimal commas saves it.
    (tmp_path / "rows.csv").write_text(f"{bom}id;task;price\noslo;Say hi, twice;1,5\n")
    (case, _) = load_cases(path).cases
    assert (case.id, case.task, case.vars) == ("oslo", "Say hi, twice", {"price": "1,5"})


def test_a_check_of_a_misspelt_kind_tool_or_role_says_what_there_is(tmp_path: Path) -> None:
    # A name close to none the hive has (calculate, auditor) may be of one taken away
    # since: its check is kept, and says in the report that it was not called.
    write(tmp_path, "shop.py", 'def lookup(item: str) -> str:\n    """Find."""\n    return item\n')
    hive = write(
        tmp_path,
        "hive.yaml",
        """
        models:
          offline: {provider: offline, latency: 0}
        memory: {path: memory.db}
        roles:
          clerk:
            tools: [shop:lookup, agent:checker]
          checker:
            memory: {}
        """,
    )
    path = write(
        tmp_path,
        "evals.yaml",
        """
        cases:
          - task: x
            assert:
              - tool_called: lokup
              - tool_called: {name: recal, role: checker}
              - tool_called: {name: lookup, role: clerks}
              - tool_called: remember
              - tool_called: {name: checker, role: clerk}
              - tool_called: {name: calculate, at_most: 0}
              - tool_called: {name: lookup, role: auditor}
        """,
    )
    assert _errors(path, hive) == [
        f"{path}:4:9: cases[0].assert[0].tool_called: the hive's roles have no tool 'lokup' "
        "(did you mean 'lookup'?); the tools: lookup, checker, recall, remember",
        f"{path}:5:9: cases[0].assert[1].tool_called: role 'checker' has no tool 'recal' (did "
        "you mean 'recall'?); the tools: recall, remember",
        f"{path}:6:9: cases[0].assert[2].tool_called: the hive has no role 'clerks' (did you "
        "mean 'clerk'?); its roles: clerk, checker",
    ]
    write(tmp_path, "evals.yaml", "cases: [{task: x, assert: [{contians: Lisbon}]}]\n")
    kinds = "equals, contains, icontains, not_contains, regex, json, python, judge, status"
    assert [e.partition(", tool_called, ")[0] for e in _errors(path, hive)] == [
        f"{path}:1:28: cases[0].assert[0]: 'contians' is no kind of check (did you mean "
        f"'contains'?); the kinds: {kinds}"
    ]


def test_a_mistake_in_the_defaults_is_told_with_the_cases_in_the_order_of_the_lines(
    tmp_path: Path,
) -> None:
    path = write(
        tmp_path,
        "evals.yaml",
        """
        defaults:
          tasks: x
        cases:
          - tsk: y
            assert:
              - contains: a
                wieght: 2
        """,
    )
    assert [e.split(": ")[0:2] for e in _errors(path)] == [
        [f"{path}:2:3", "defaults.tasks"],
        [f"{path}:4:5", "cases[0].tsk"],  # before the case's check, below it
        [f"{path}:7:9", "cases[0].assert[0].wieght"],
    ]


def test_a_check_with_no_value_or_one_that_checks_nothing_is_a_mistake(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "evals.yaml",
        """
        cases:
          - task: x
            vars: {pattern: "(", city: ""}
            assert:
              - contains:
              - tool_called:
              - regex: ""
              - not_contains: [sorry, ""]
              - regex: "{{pattern}}"
              - contains: "{{city}}"
        """,
    )
    everything = "an empty {} every answer: write what to look for"
    assert _errors(path) == [  # not an AssertionError out of load_cases, nor a check of nothing
        f"{path}:5:9: cases[0].assert[0]: 'contains' has no value: write what it checks "
        "(contains: Lisbon)",
        f"{path}:6:9: cases[0].assert[1]: 'tool_called' has no value: write what it checks "
        "(tool_called: get_weather)",
        f"{path}:7:9: cases[0].assert[2].regex: {everything.format('pattern matches')}",
        f"{path}:8:9: cases[0].assert[3].not_contains: {everything.format('text is in')}",
        f"{path}:9:9: cases[0].assert[4].regex: not a regular expression: missing ), "
        "unterminated subpattern at position 0 (with the case's vars in it)",
        f"{path}:10:9: cases[0].assert[5].contains: {everything.format('text is in')} (with "
        "the case's vars in it)",
    ]


def test_a_task_that_is_empty_once_its_vars_are_put_in_is_a_mistake(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "evals.yaml",
        """
        defaults:
          task: "{{city}}"
        cases:
          - {id: blank, task: "  "}
          - {id: no-city, vars: {city: ""}}
          - {id: oslo, vars: {city: Oslo}}
        """,
    )
    assert _errors(path) == [  # not a case whose run raises 'task is empty', each time
        f"{path}:4:17: cases[0].task: the task is empty: '  '",
        f"{path}:5:5: cases[1].task: the task is empty once the case's vars are put in: ''",
    ]


def test_a_check_of_a_number_or_a_word_says_what_it_takes_besides_a_mapping(
    tmp_path: Path,
) -> None:
    path = write(
        tmp_path,
        "evals.yaml",
        """
        cases:
          - id: a
            task: What do 2 nights at 120 euros cost?
            assert:
              - contains: 240
              - latency: fast
              - side_effects: many
              - cost: cheap
        """,
    )
    file = str(path)
    # Not only "should be a mapping of all, any": a number, written so, is none of it.
    assert _errors(path) == [
        f"{file}:5:9: cases[0].assert[0].contains: should be a mapping of all, any, or a text "
        "(a number in quotes: '240'), or a list of texts (got 240)",
        f"{file}:6:9: cases[0].assert[1].latency: should be a mapping of at_least, at_most, "
        "of, or a number of seconds (at most so long) (got 'fast')",
        f"{file}:7:9: cases[0].assert[2].side_effects: should be a mapping of at_least, "
        "at_most, or a number (exactly so many) (got 'many')",
        f"{file}:8:9: cases[0].assert[3].cost: should be a mapping of at_least, at_most, or a "
        "number (at most so much) (got 'cheap')",
    ]


def test_a_misspelt_status_is_refused_with_what_it_may_be(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "evals.yaml",
        """
        cases:
          - task: x
            assert:
              - status: okk
              - status: [ok, wating]
              - status: []
              - status: [partial, error, over_budget]
        """,
    )
    statuses = "the statuses: ok, partial, failed, over_budget, waiting, error"
    assert _errors(path) == [
        f"{path}:4:9: cases[0].assert[0].status: 'okk' is no status a run ends with (did you "
        f"mean 'ok'?); {statuses}",
        f"{path}:5:22: cases[0].assert[1].status[1]: 'wating' is no status a run ends with "
        f"(did you mean 'waiting'?); {statuses}",
        f"{path}:6:9: cases[0].assert[2].status: name one status or more: ok, partial, failed, "
        "over_budget, waiting, error",
    ]


def test_a_tool_named_as_the_hive_declares_it_says_how_its_model_calls_it(
    tmp_path: Path,
) -> None:
    write(tmp_path, "shop.py", 'def lookup(item: str) -> str:\n    """Find."""\n    return item\n')
    hive = write(
        tmp_path,
        "hive.yaml",
        """
        models:
          offline: {provider: offline, latency: 0}
        roles:
          clerk:
            tools: [shop:lookup, agent:checker, hive:fact_checks.yaml]
          checker:
            description: Checks.
        """,
    )
    write(tmp_path, "fact_checks.yaml", TINY_HIVE)
    path = write(
        tmp_path,
        "evals.yaml",
        """
        cases:
          - task: x
            assert:
              - tool_called: shop:lookup
              - tool_called: {name: "agent:checker", role: clerk}
              - tool_called: hive:fact_checks.yaml
              - tool_called: lookup
        """,
    )
    declared = "is how the hive declares the tool; a tool_called check names it as its model"
    assert _errors(path, hive) == [  # each would fail every case, called 0 times
        f"{path}:4:9: cases[0].assert[0].tool_called: 'shop:lookup' {declared} calls it: 'lookup'",
        f"{path}:5:9: cases[0].assert[1].tool_called: 'agent:checker' {declared} calls it: "
        "'checker'",
        f"{path}:6:9: cases[0].assert[2].tool_called: 'hive:fact_checks.yaml' {declared} "
        "calls it: 'fact_checks'",  # far from the name: no 'did you mean' would say it
    ]


def test_mistakes_of_the_file_and_against_the_hive_are_told_together(tmp_path: Path) -> None:
    # A field misspelt in a case hides neither a misspelt tool nor a missing var nor a
    # twin id, in it or in other cases, nor a row of a JSON lines file.
    write(tmp_path, "shop.py", 'def lookup(item: str) -> str:\n    """Find."""\n    return item\n')
    hive = write(
        tmp_path,
        "hive.yaml",
        """
        models:
          offline: {provider: offline, latency: 0}
        roles:
          clerk:
            tools: [shop:lookup]
        """,
    )
    rows = write(tmp_path, "rows.jsonl", '{"id": "a", "task": "t"}\n')
    path = write(
        tmp_path,
        "evals.yaml",
        """
        cases:
          - id: a
            task: Find {{item}}.
            treshold: 0.5
            assert:
              - status: okk
              - tool_called: {name: lokup, role: clerk}
          - id: b
            task: Find {{thing}}.
            assert:
              - tool_called: {name: lookup, role: clerks}
        cases_from: rows.jsonl
        """,
    )
    assert _errors(path, hive) == [
        f"{path}:3:5: cases[0].task: no var 'item' for {{{{item}}}}; the case's vars: none",
        f"{path}:4:5: cases[0].treshold: unknown field 'treshold' (did you mean 'threshold'?); "
        "allowed: assert, description, expected, id, task, threshold, vars",
        f"{path}:6:9: cases[0].assert[0].status: 'okk' is no status a run ends with (did you "
        "mean 'ok'?); the statuses: ok, partial, failed, over_budget, waiting, error",
        f"{path}:7:9: cases[0].assert[1].tool_called: role 'clerk' has no tool 'lokup' (did "
        "you mean 'lookup'?); the tools: lookup",
        f"{path}:9:5: cases[1].task: no var 'thing' for {{{{thing}}}}; the case's vars: none",
        f"{path}:11:9: cases[1].assert[0].tool_called: the hive has no role 'clerks' (did you "
        "mean 'clerk'?); its roles: clerk",
        f"{rows}:1:1: another case is named 'a' ({path}:2): give each its own id",
    ]


def test_a_case_whose_id_or_vars_are_not_valid_is_told_for_them_alone(tmp_path: Path) -> None:
    # Its checks would be filled by vars it may have: nothing else of it is told.
    path = write(
        tmp_path,
        "evals.yaml",
        """
        defaults:
          task: Find {{item}}.
        cases:
          - id: a b
            vars: {item: pen}
            assert:
              - contains: "{{item}}"
          - vars: [not, a, mapping]
            assert:
              - contains: "{{item}}"
        """,
    )
    errors = _errors(path)
    assert [e.split(": ", 2)[1] for e in errors] == ["cases[0].id", "cases[1].vars"]


def test_a_threshold_over_checks_that_all_weigh_nothing_is_told_at_its_line(
    tmp_path: Path,
) -> None:
    """A case's score is its checks' weighted mean: with every weight 0 it scored 1.0,
    and a threshold passed the case whatever its checks found. Such a threshold is
    told where it is, the case's or its defaults'; a threshold of 0 asks nothing."""
    path = write(
        tmp_path,
        "evals.yaml",
        """
        defaults:
          threshold: 0.5
        cases:
          - id: a
            task: Find it.
            threshold: 0.8
            assert:
              - {contains: found, weight: 0}
          - id: b
            task: Find it.
            assert:
              - {contains: found, weight: 0}
              - {contains: it, weight: 0}
          - id: c
            task: Find it.
            threshold: 0
            assert:
              - {contains: found, weight: 0}
          - id: d
            task: Find it.
            assert:
              - {contains: found, weight: 0}
              - {contains: it}
        """,
    )
    said = (
        "weighs checks that all weigh 0: the case would pass whatever they find; give a "
        "check a weight, or leave threshold out (every check must pass)"
    )
    assert _errors(path) == [
        f"{path}:2:3: defaults.threshold: threshold 0.5 {said}",  # case b's
        f"{path}:6:5: cases[0].threshold: threshold 0.8 {said}",
    ]
