"""Conversations for both backends: sessions (``session_state``), their messages, extraction
claims and marks, the LLM calls they cost, and the user's summary versions.

Generator methods mixed into each backend and installed on its runners (``sansio.install``).
Every statement names ``user_id`` first, so the tables distribute by user on Citus. Reads of
several statements are ``reads``: each statement sees the database as it is then, as PostgreSQL's
READ COMMITTED transactions see it anyway.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable, Mapping, Sequence

from ...sansio import Op, operation, reads
from ..base import (CallTotals, MessageRow, NewItem, SessionCounts, SessionRead, SessionRow, SessionUsage, SummaryRow,
                    UsageStats)
from .dialect import Dialect, Q, Row, row_times

SESSION_TABLES = ("messages", "llm_calls")

_ANY_USER = "(CAST(%s AS text) IS NULL OR {column} = %s)"  # the user's rows, or every user's (NULL)


def _calls_by(group: str, user_id: str | None) -> Q:
    """LLM calls and tokens grouped by ``group`` (an expression of ``llm_calls``), with the number of
    sessions they came from (a user's calls outside any session count as one)."""
    return Q(f"SELECT grouped AS name, sum(n) AS n, sum(i) AS i, sum(o) AS o, sum(f) AS f, count(*) AS s FROM"
             f" (SELECT {group} AS grouped, count(*) AS n, coalesce(sum(input_tokens), 0) AS i,"
             " coalesce(sum(output_tokens), 0) AS o, count(*) FILTER (WHERE NOT ok) AS f FROM llm_calls"
             f" WHERE {_ANY_USER.format(column='user_id')} GROUP BY {group}, user_id, coalesce(session_id, ''))"
             " AS per_session GROUP BY grouped", [user_id, user_id])


def _totals(rows: list[Row]) -> dict[str, CallTotals]:
    return {r["name"]: {"calls": int(r["n"]), "input_tokens": int(r["i"]), "output_tokens": int(r["o"]),
                        "failed": int(r["f"]), "sessions": int(r["s"])} for r in rows}


class SessionQueries:
    """Sessions, messages, LLM call records and summaries (mixed into both backends)."""

    dialect: Dialect
    _insert: Callable[[Sequence[NewItem], str | None, datetime], Op[list[int]]]  # new items, their pending vectors

    def _open_session_row(self, user_id: str, session_id: str, now: datetime,
                          started: datetime) -> Op[tuple[SessionRow, bool]]:
        """The session's row, locked, created if missing (``started``: its first activity); and
        whether it was created."""
        d = self.dialect
        yield Q("INSERT INTO users (id, created_at) VALUES (%s, %s) ON CONFLICT DO NOTHING", [user_id, d.time(now)])
        created: list[Row] = yield Q(
            "INSERT INTO session_state (user_id, session_id, created_at, last_active, updated_at)"
            " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (user_id, session_id) DO NOTHING RETURNING session_id",
            [user_id, session_id, d.time(started), d.time(started), d.time(now)])
        rows: list[SessionRow] = yield Q(
            f"SELECT * FROM session_state WHERE user_id = %s AND session_id = %s{d.for_update}",
            [user_id, session_id])
        return rows[0], bool(created)

    def _later(self, column: str) -> str:
        """``column`` set to the bound time if that is later (NULL counts as earliest)."""
        return f"{column} = coalesce({self.dialect.greatest}({column}, %s), %s)"

    @operation
    def open_session(self, user_id: str, session_id: str, now: datetime) -> Op[tuple[SessionRow, bool]]:
        stamp = self.dialect.time(now)
        _, created = yield from self._open_session_row(user_id, session_id, now, now)
        # rows written by mark_session_extracted alone have no creation time
        rows: list[SessionRow] = yield Q(
            f"UPDATE session_state SET created_at = coalesce(created_at, %s), {self._later('last_active')},"
            " updated_at = %s WHERE user_id = %s AND session_id = %s RETURNING *",
            [stamp, stamp, stamp, stamp, user_id, session_id])
        return row_times(rows[0]), created

    @operation
    def append_messages(self, user_id: str, session_id: str, messages: Sequence[Mapping[str, Any]], now: datetime,
                        agent_id: str | None = None, run_id: str | None = None) -> Op[tuple[SessionRow, bool]]:
        """Append messages (dicts: role, content, name, tool_calls list, tool_call_id, created_at)
        with consecutive ``seq`` numbers; returns the updated session row and whether it was new.
        ``agent_id`` / ``run_id``: the session's scope from now on (None keeps the one it has)."""
        d, stamp = self.dialect, self.dialect.time(now)
        times: list[datetime] = [m.get("created_at") or now for m in messages]
        session, created = yield from self._open_session_row(user_id, session_id, now, min(times, default=now))
        first = session["message_count"] + 1
        yield Q("INSERT INTO messages (user_id, session_id, seq, role, content, name, tool_calls, tool_call_id,"
                " created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [(user_id, session_id, first + i, m["role"], m["content"], m.get("name"),
                  d.json(m["tool_calls"]) if m.get("tool_calls") else None, m.get("tool_call_id"), d.time(when))
                 for i, (m, when) in enumerate(zip(messages, times))], many=True)
        latest = d.time(max(times, default=now))
        users = sum(1 for m in messages if m["role"] == "user")
        rows: list[SessionRow] = yield Q(
            "UPDATE session_state SET message_count = message_count + %s, user_messages = user_messages + %s,"
            f" created_at = coalesce(created_at, %s), {self._later('last_active')}, attempts = 0,"
            " updated_at = %s, agent_id = coalesce(%s, agent_id), run_id = coalesce(%s, run_id)"
            " WHERE user_id = %s AND session_id = %s RETURNING *",
            [len(messages), users, stamp, latest, latest, stamp, agent_id, run_id, user_id, session_id])
        return row_times(rows[0]), created

    @operation
    @reads
    def get_session(self, user_id: str, session_id: str, with_messages: bool = True,
                    after_seq: int = 0) -> Op[SessionRead | None]:
        rows: list[SessionRead] = yield Q(
            "SELECT * FROM session_state WHERE user_id = %s AND session_id = %s", [user_id, session_id])
        if not rows:
            return None
        session = row_times(rows[0])
        if with_messages:
            messages: list[MessageRow] = yield Q(
                "SELECT * FROM messages WHERE user_id = %s AND session_id = %s AND seq > %s ORDER BY seq",
                [user_id, session_id, after_seq])
            session["messages"] = [{**row_times(m), "tool_calls": m["tool_calls"] or []} for m in messages]
        return session

    @operation
    @reads
    def list_sessions(self, user_id: str | None, state: str | None, limit: int, offset: int) -> Op[list[SessionRow]]:
        rows: list[SessionRow] = yield Q(
            f"SELECT * FROM session_state WHERE {_ANY_USER.format(column='user_id')}"
            f" AND {_ANY_USER.format(column='state')}"
            " ORDER BY coalesce(last_active, updated_at) DESC, session_id LIMIT %s OFFSET %s",
            [user_id, user_id, state, state, limit, offset])
        return [row_times(r) for r in rows]

    @operation
    @reads
    def stale_sessions(self, user_id: str | None, cutoff: datetime, lease_cutoff: datetime, max_attempts: int,
                       limit: int) -> Op[list[tuple[str, str]]]:
        """Sessions idle since before ``cutoff`` with activity not yet extracted, oldest first."""
        d = self.dialect
        rows: list[Row] = yield Q(
            f"SELECT user_id, session_id FROM session_state WHERE {_ANY_USER.format(column='user_id')}"
            " AND last_active < %s AND message_count > 0"
            " AND (extracted_at IS NULL OR extracted_at < last_active OR extracted_seq < message_count"
            " OR chunked_seq < message_count)"
            " AND attempts < %s AND NOT (state = 'running' AND claimed_at >= %s)"
            " ORDER BY last_active, user_id, session_id LIMIT %s",
            [user_id, user_id, d.time(cutoff), max_attempts, d.time(lease_cutoff), limit])
        return [(r["user_id"], r["session_id"]) for r in rows]

    @operation
    def claim_session(self, user_id: str, session_id: str, now: datetime,
                      lease_cutoff: datetime) -> Op[SessionRow | None]:
        """Mark the session ``running`` unless another worker holds a live claim; the row, or None."""
        d, stamp = self.dialect, self.dialect.time(now)
        rows: list[SessionRow] = yield Q(
            "UPDATE session_state SET state = 'running', claimed_at = %s, attempts = attempts + 1,"
            " updated_at = %s WHERE user_id = %s AND session_id = %s"
            " AND NOT (state = 'running' AND claimed_at >= %s) RETURNING *",
            [stamp, stamp, user_id, session_id, d.time(lease_cutoff)])
        return row_times(rows[0]) if rows else None

    @operation
    def store_chunks(self, user_id: str, session_id: str, items: Sequence[NewItem], upto_seq: int,
                     model: str | None, now: datetime) -> Op[list[int]]:
        """Insert conversation chunks and move the session's chunk mark, in one transaction."""
        ids = (yield from self._insert(items, model, now)) if items else []
        yield Q(f"UPDATE session_state SET chunked_seq = {self.dialect.greatest}(chunked_seq, %s)"
                " WHERE user_id = %s AND session_id = %s", [upto_seq, user_id, session_id])
        return ids

    @operation
    def finish_session(self, user_id: str, session_id: str, outcome: Mapping[str, Any],
                       calls: Sequence[Mapping[str, Any]], now: datetime) -> Op[SessionRow | None]:
        """Record a run's outcome (state, error, marks) and its LLM calls; returns the session row."""
        d, stamp = self.dialect, self.dialect.time(now)
        ok = outcome["state"] == "extracted"
        rows: list[SessionRow] = yield Q(
            "UPDATE session_state SET state = %s, error = %s, claimed_at = NULL, updated_at = %s,"
            " extracted_at = CASE WHEN %s THEN %s ELSE extracted_at END,"
            " attempts = CASE WHEN %s THEN 0 ELSE attempts END,"
            f" extracted_seq = {d.greatest}(extracted_seq, %s),"
            f" extracted_user_messages = {d.greatest}(extracted_user_messages, %s)"
            " WHERE user_id = %s AND session_id = %s RETURNING *",
            [outcome["state"], outcome.get("error"), stamp, ok, stamp, ok, outcome.get("extracted_seq", 0),
                        outcome.get("extracted_user_messages", 0), user_id, session_id])
        yield from self._insert_calls(user_id, session_id, calls, now)
        return row_times(rows[0]) if rows else None

    @operation
    def record_llm_calls(self, user_id: str, calls: Sequence[Mapping[str, Any]], now: datetime) -> Op[None]:
        """LLM calls outside a session's run (a summary rewritten in the background), in usage stats."""
        yield from self._insert_calls(user_id, None, calls, now)

    def _insert_calls(self, user_id: str, session_id: str | None, calls: Sequence[Mapping[str, Any]],
                      now: datetime) -> Op[None]:
        if calls:
            stamp = self.dialect.time(now)
            yield Q("INSERT INTO llm_calls (user_id, session_id, purpose, model, input_tokens, output_tokens, estimated,"
                    " ok, error, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    [(user_id, session_id, c["purpose"], c.get("model"), c["input_tokens"], c["output_tokens"],
                      bool(c["estimated"]), bool(c["ok"]), c.get("error"), stamp) for c in calls], many=True)

    @operation
    @reads
    def usage_stats(self, user_id: str | None, limit: int) -> Op[UsageStats]:
        """Session counts by state, LLM calls and tokens by purpose and by model, and the costliest sessions."""
        states: list[Row] = yield Q(
            "SELECT state, count(*) AS n, coalesce(sum(message_count), 0) AS m FROM session_state"
            f" WHERE {_ANY_USER.format(column='user_id')} GROUP BY state", [user_id, user_id])
        purposes: list[Row] = yield _calls_by("purpose", user_id)
        models: list[Row] = yield _calls_by("coalesce(model, 'unknown')", user_id)
        sessions: list[SessionUsage] = yield Q(
            "SELECT s.user_id, s.session_id, s.state, s.message_count, s.extracted_at,"
            " count(c.id) AS llm_calls, coalesce(sum(c.input_tokens), 0) AS input_tokens,"
            " coalesce(sum(c.output_tokens), 0) AS output_tokens FROM session_state s"
            " LEFT JOIN llm_calls c ON c.user_id = s.user_id AND c.session_id = s.session_id"
            f" WHERE {_ANY_USER.format(column='s.user_id')} GROUP BY s.user_id, s.session_id"
            " ORDER BY llm_calls DESC, max(coalesce(s.last_active, s.updated_at)) DESC,"
            " s.user_id, s.session_id LIMIT %s", [user_id, user_id, limit])
        return {
            "states": {r["state"]: SessionCounts(sessions=r["n"], messages=int(r["m"])) for r in states},
            "purposes": _totals(purposes),
            "models": _totals(models),
            "sessions": [{**row_times(r), "input_tokens": int(r["input_tokens"]),
                          "output_tokens": int(r["output_tokens"])} for r in sessions],
        }

    # -- extraction marks of sessions known only by id -----------------------------------------

    @operation
    def mark_session_extracted(self, user_id: str, session_id: str, at: datetime) -> Op[None]:
        stamp = self.dialect.time(at)
        yield Q("INSERT INTO users (id, created_at) VALUES (%s, %s) ON CONFLICT DO NOTHING", [user_id, stamp])
        yield Q("INSERT INTO session_state (user_id, session_id, extracted_at, updated_at) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (user_id, session_id) DO UPDATE SET extracted_at = excluded.extracted_at,"
                " updated_at = excluded.updated_at", [user_id, session_id, stamp, stamp])

    @operation
    @reads
    def get_extracted_at(self, user_id: str, session_id: str) -> Op[datetime | None]:
        rows: list[Row] = yield Q("SELECT extracted_at FROM session_state WHERE user_id = %s AND session_id = %s",
                                  [user_id, session_id])
        extracted_at: datetime | None = row_times(rows[0])["extracted_at"] if rows else None
        return extracted_at

    # -- the summary: numbered versions, the newest injected ------------------------------------

    @operation
    @reads
    def get_summary(self, user_id: str) -> Op[SummaryRow | None]:
        rows = yield from self._summaries(user_id, 1)
        return rows[0] if rows else None

    @operation
    @reads
    def summary_history(self, user_id: str, limit: int) -> Op[list[SummaryRow]]:
        return (yield from self._summaries(user_id, limit))

    def _summaries(self, user_id: str, limit: int) -> Op[list[SummaryRow]]:
        rows: list[SummaryRow] = yield Q("SELECT content, version, created_at FROM summaries WHERE user_id = %s"
                                         " ORDER BY version DESC LIMIT %s", [user_id, limit])
        return [row_times(r) for r in rows]

    @operation
    def set_summary(self, user_id: str, content: str, now: datetime) -> Op[SummaryRow]:
        d, stamp = self.dialect, self.dialect.time(now)
        yield Q("INSERT INTO users (id, created_at) VALUES (%s, %s) ON CONFLICT DO NOTHING", [user_id, stamp])
        yield Q(f"SELECT id FROM users WHERE id = %s{d.for_update}", [user_id])  # serialises version numbers
        rows = yield from self._append_summary(user_id, content, stamp)
        return row_times(rows[0])

    def _append_summary(self, user_id: str, content: str, stamp: Any) -> Op[list[SummaryRow]]:
        """Store ``content`` as the user's next summary version (the caller holds the user's row lock);
        its row. The next version is read through the user's row, grouped by it: on Citus an INSERT ...
        SELECT grouped by the user column of co-located tables runs whole on the user's shard, where an
        ungrouped max() is read back to the coordinator first (the alias is what its rewrite of
        RETURNING needs)."""
        rows: list[SummaryRow] = yield Q("INSERT INTO summaries AS t (user_id, version, content, created_at)"
                        " SELECT u.id, coalesce(max(s.version), 0) + 1, %s, %s FROM users u"
                        " LEFT JOIN summaries s ON s.user_id = u.id WHERE u.id = %s GROUP BY u.id"
                                         " RETURNING content, version, created_at", [content, stamp, user_id])
        return rows

    # -- forgetting: the raw text a deleted memory came from ---------------------------------

    @operation
    def redact_messages(self, user_id: str, session_id: str, seqs: Sequence[int], content: str) -> Op[int]:
        """Replace the text (and tool-call arguments) of these messages; the rows, their order and
        the session stay."""
        d = self.dialect
        rows: list[Row] = yield Q(
            f"UPDATE messages SET content = %s, tool_calls = NULL WHERE user_id = %s AND session_id = %s"
            f" AND {d.in_ids.format(column='seq')} RETURNING seq",
            [content, user_id, session_id, d.ids([int(s) for s in seqs])])
        return len(rows)

    @operation
    def rewrite_summaries(self, user_id: str, contents: Mapping[int, str]) -> Op[int]:
        """Replace the text of summary versions (version -> text); numbers and times stay."""
        count = 0
        for version, text in contents.items():
            rows: list[Row] = yield Q(
                "UPDATE summaries SET content = %s WHERE user_id = %s AND version = %s RETURNING version",
                [text, user_id, int(version)])
            count += len(rows)
        return count
