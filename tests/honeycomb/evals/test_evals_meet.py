"""Evals where they meet the other features, from the outside: what a run says, in
the reports that show it (JUnit, HTML, the terminal's table)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from honeycomb import Executor, Role
from honeycomb.evals import Case, CaseRun, evaluate, junit
from honeycomb.evals.html import report_page
from honeycomb.testing import FunctionModel

RAW = "a <b>&\"' ]]> \x00 NUL, \x1b[2J a terminal's escape, \x07 a bell"
"""An answer a model or a tool may well give: markup, and characters no XML can hold."""


def _writer(answer: str) -> Executor:
    """One worker that answers ``answer``, its run's answer as it is."""
    return Executor(
        [Role(name="writer")],
        FunctionModel(lambda request: answer),
        aggregator="concat",
        planner=lambda task: [("writer", task)],
    )


def _quotes_the_answer(answer: str, run: CaseRun) -> str:
    return f"it said {answer!s}"  # a check's reason that quotes the answer as it is


async def test_junit_and_html_of_an_answer_with_control_characters_are_well_formed() -> None:
    case = Case(id="odd <1>", task="Say something odd.", checks=[_quotes_the_answer])
    report = await evaluate(_writer(RAW), [case])

    suite = ET.fromstring(junit(report).encode())  # one NUL made it no XML at all
    (failure,) = suite.iter("failure")
    assert "a <b>&\"' ]]>" in failure.attrib["message"]
    assert "\ufffd NUL" in failure.attrib["message"]
    assert "\x1b" not in (failure.text or "")
    assert [c.attrib["name"] for c in suite.iter("testcase")] == ["odd <1>"]

    page = report_page(report)
    assert not {"\x00", "\x1b", "\x07"} & set(page)
    assert "a &lt;b&gt;&amp;&quot;&#x27; ]]&gt; \ufffd NUL" in page
