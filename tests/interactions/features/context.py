"""What a worker sees and shows: streaming, compaction, memory, and MCP tools."""

from __future__ import annotations

import sqlite3

from honeycomb import Compaction, McpServer, RoleMemory, SQLiteMemory
from honeycomb.events import CompactionFinished, TextDelta
from tests.interactions.brain import Call
from tests.interactions.drive import Outcome
from tests.interactions.features.base import Env, Feature, finished, observations, top_observations
from tests.interactions.hive import Hive
from tests.interactions.invariants import Report

__all__ = ["CompactionFeature", "Mcp", "Memory", "Streaming"]


class Streaming(Feature):
    name = "streaming"
    title = "streaming"
    about = "the run goes through `executor.stream()`, text deltas on"
    promises = "a worker's streamed final turn, joined, is its answer"

    def apply(self, hive: Hive, env: Env) -> None:
        hive.stream = True

    def check(self, outcome: Outcome, report: Report) -> None:
        deltas: dict[tuple[str, int], str] = {}
        for event in outcome.last.events:
            if isinstance(event, TextDelta) and event.worker is not None:
                key = (event.worker, event.turn)
                deltas[key] = deltas.get(key, "") + event.text
        report.expect(
            deltas or outcome.last.error is not None,
            "streaming",
            "no text delta reached the stream",
        )
        for sid, subtask in finished(outcome).items():
            turns = [turn for worker, turn in deltas if worker == sid]
            if turns and subtask.worker is not None and max(turns) == subtask.worker.turns:
                shown = deltas[(sid, max(turns))]
                report.expect(
                    shown == subtask.text,
                    "streaming",
                    f"{sid}'s last turn streamed {shown!r}; it answered {subtask.text!r}",
                )


class CompactionFeature(Feature):
    name = "compaction"
    title = "compaction"
    about = (
        "every working role keeps a 600-token budget (`keep_turns=1`) while it reads "
        "three 900-character pages, one a turn; a summary is ~800 tokens"
    )
    promises = "the working roles' workers fold their context (a `compaction.finished` each)"

    def apply(self, hive: Hive, env: Env) -> None:
        hive.compaction = Compaction(budget_tokens=600, keep_turns=1)
        hive.summary_chars = 3200
        hive.tools.add("page")
        for turn in (1, 2, 3):
            hive.add_calls(turn, Call("page", {"number": turn}))

    def check(self, outcome: Outcome, report: Report) -> None:
        folded = {e.worker for e in outcome.events if isinstance(e, CompactionFinished)}
        for sid, subtask in finished(outcome).items():
            if subtask.subtask.role == "bee" and len(outcome.lives) == 1:
                report.expect(sid in folded, "compaction", f"{sid} never folded its context")


class Memory(Feature):
    name = "memory"
    title = "memory"
    about = (
        "an SQLite memory holding one note; every working role recalls at its start, and "
        "calls `remember` and `recall`"
    )
    promises = "a worker starts with what memory holds; every note it keeps is kept"

    NOTE = "bees dance to tell where the food is: a part of their work"

    def apply(self, hive: Hive, env: Env) -> None:
        hive.memory = RoleMemory(namespace="hive", recall=2, remember=True)
        hive.add_calls(
            0,
            Call("remember", {"text": "{role} wrote down part {n} as {w}"}),
            Call("recall", {"query": "dance"}),
        )

    async def prepare(self, hive: Hive) -> None:
        memory = SQLiteMemory(hive.ledger.folder / "memory.db")
        try:
            await memory.add(self.NOTE, namespace="hive")
        finally:
            memory.close()

    def check(self, outcome: Outcome, report: Report) -> None:
        with sqlite3.connect(outcome.hive.ledger.folder / "memory.db") as db:
            kept = [text for (text,) in db.execute("SELECT text FROM memories")]
        for sid, subtask in finished(outcome).items():
            if subtask.worker is None or subtask.subtask.role not in outcome.hive.working:
                continue
            first = subtask.worker.transcript.messages[:4]
            report.expect(
                any(self.NOTE in (getattr(m, "content", None) or "") for m in first),
                "memory",
                f"{sid} did not start with what memory holds",
            )
            for message in observations(subtask, "remember"):
                if message.status == "ok":
                    report.expect(
                        any(text.endswith(f" as {sid}") for text in kept),
                        "memory",
                        f"{sid}'s note is not in memory: {kept}",
                    )
            for message in observations(subtask, "recall"):
                report.expect(
                    self.NOTE in message.content, "memory", f"{sid} recalled {message.content!r}"
                )


class Mcp(Feature):
    name = "mcp"
    title = "MCP tools"
    about = (
        "every working role looks a word up (read-only) and appends a note (destructive) "
        "through the MCP SDK test server, over streamable HTTP"
    )
    promises = "the server answers every call; each note is written once, one at a time"
    needs = frozenset({"mcp"})

    def apply(self, hive: Hive, env: Env) -> None:
        assert env.mcp_url is not None
        assert env.mcp_token is not None
        hive.mcp.append(
            McpServer(
                name="t", url=env.mcp_url, headers={"Authorization": f"Bearer {env.mcp_token}"}
            )
        )
        hive.notes = env.mcp_notes
        hive.tools.update({"t:lookup", "t:append_note"})
        hive.add_calls(
            0,
            Call("lookup", {"word": "bee"}),
            Call("append_note", {"text": f"{hive.token}-{{w}}-a"}),
            Call("append_note", {"text": f"{hive.token}-{{w}}-b"}),
        )

    def check(self, outcome: Outcome, report: Report) -> None:
        for sid, message in top_observations(outcome, "lookup"):
            report.expect(
                message.content == "an insect that makes honey",
                "mcp",
                f"{sid} looked up {message.status}: {message.content}",
            )
        notes = outcome.hive.notes
        lines = notes.read_text().splitlines() if notes is not None and notes.exists() else []
        mine = [line.split() for line in lines if outcome.hive.token in line]
        starts = [text for kind, text, _ in mine if kind == "start"]
        report.expect(
            len(starts) == len(set(starts)), "mcp", f"a note was written twice: {sorted(starts)}"
        )
        open_now: dict[str, str] = {}
        for kind, text, _ in mine:
            worker = text.rsplit("-", 1)[0]
            if kind == "start":
                report.expect(
                    worker not in open_now,
                    "mcp",
                    f"{text} started while {open_now.get(worker)} ran",
                )
                open_now[worker] = text
            else:
                open_now.pop(worker, None)
