"""SQLite storage of conversations: sessions (``session_state``), messages and LLM cost records.

A mixin of ``SQLiteBackend``: it uses the backend's ``_transaction``, ``_ensure_user`` and
``_insert_rows``. Each write method is one transaction. Rows come back as plain dicts with aware
UTC datetimes, like the rest of the backend.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from typing import Any, Mapping, Sequence

from ...core.timeutil import from_db, to_db
from ..base import NewItem

SESSION_TABLES = ("messages", "llm_calls")
_SESSION_TIMES = ("created_at", "last_active", "extracted_at", "claimed_at", "updated_at")


def session_from_row(row: sqlite3.Row) -> dict[str, Any]:
    d = dict(row)
    for key in _SESSION_TIMES:
        d[key] = from_db(d.get(key))
    return d


def message_from_row(row: sqlite3.Row) -> dict[str, Any]:
    d = dict(row)
    d["tool_calls"] = json.loads(d["tool_calls"]) if d.get("tool_calls") else []
    d["created_at"] = from_db(d["created_at"])
    return d


def _insert_calls(conn: sqlite3.Connection, user_id: str, session_id: str | None, calls: Sequence[dict],
                  stamp: str) -> None:
    conn.executemany(
        "INSERT INTO llm_calls (user_id, session_id, purpose, model, input_tokens, output_tokens, estimated,"
        " ok, error, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(user_id, session_id, c["purpose"], c.get("model"), c["input_tokens"], c["output_tokens"],
          int(c["estimated"]), int(c["ok"]), c.get("error"), stamp) for c in calls])


class SQLiteSessions:
    """Sessions, messages and LLM call records (mixed into ``SQLiteBackend``)."""

    _transaction: Any
    _ensure_user: Any
    _insert_rows: Any

    def _open_session_row(self, conn: sqlite3.Connection, user_id: str, session_id: str, stamp: str,
                          started: str | None = None) -> bool:
        """Create the session row if missing (True when created); ``started``: its first activity."""
        self._ensure_user(conn, user_id, stamp)
        started = started or stamp
        created = conn.execute(
            "INSERT INTO session_state (user_id, session_id, created_at, last_active, updated_at)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (user_id, session_id) DO NOTHING",
            (user_id, session_id, started, started, stamp)).rowcount > 0
        if not created:  # rows written by mark_session_extracted alone have no creation time
            conn.execute("UPDATE session_state SET created_at = coalesce(created_at, ?) WHERE user_id = ?"
                         " AND session_id = ?", (stamp, user_id, session_id))
        return created

    def _session_row(self, conn: sqlite3.Connection, user_id: str, session_id: str) -> dict | None:
        row = conn.execute("SELECT * FROM session_state WHERE user_id = ? AND session_id = ?",
                           (user_id, session_id)).fetchone()
        return None if row is None else session_from_row(row)

    def open_session(self, user_id: str, session_id: str, now: datetime) -> tuple[dict, bool]:
        stamp = to_db(now)
        with self._transaction(write=True) as conn:
            created = self._open_session_row(conn, user_id, session_id, stamp)
            conn.execute("UPDATE session_state SET last_active = max(coalesce(last_active, ''), ?), updated_at = ?"
                         " WHERE user_id = ? AND session_id = ?", (stamp, stamp, user_id, session_id))
            return self._session_row(conn, user_id, session_id), created

    def append_messages(self, user_id: str, session_id: str, messages: Sequence[dict], now: datetime,
                        agent_id: str | None = None, run_id: str | None = None) -> tuple[dict, bool]:
        """Append messages (dicts: role, content, name, tool_calls list, tool_call_id, created_at)
        with consecutive ``seq`` numbers; returns the updated session row and whether it was new.
        ``agent_id`` / ``run_id``: the session's scope from now on (None keeps the one it has)."""
        stamp = to_db(now)
        times = [to_db(m.get("created_at") or now) for m in messages]
        with self._transaction(write=True) as conn:
            created = self._open_session_row(conn, user_id, session_id, stamp, min(times, default=stamp))
            first = conn.execute("SELECT message_count FROM session_state WHERE user_id = ? AND session_id = ?",
                                 (user_id, session_id)).fetchone()[0] + 1
            rows = [(user_id, session_id, first + i, m["role"], m["content"], m.get("name"),
                     json.dumps(m["tool_calls"], ensure_ascii=False) if m.get("tool_calls") else None,
                     m.get("tool_call_id"), when) for i, (m, when) in enumerate(zip(messages, times))]
            conn.executemany("INSERT INTO messages (user_id, session_id, seq, role, content, name, tool_calls,"
                             " tool_call_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
            latest = max([r[-1] for r in rows], default=stamp)
            users = sum(1 for m in messages if m["role"] == "user")
            conn.execute("UPDATE session_state SET message_count = message_count + ?, user_messages = user_messages + ?,"
                         " last_active = max(coalesce(last_active, ''), ?), attempts = 0, updated_at = ?,"
                         " agent_id = coalesce(?, agent_id), run_id = coalesce(?, run_id)"
                         " WHERE user_id = ? AND session_id = ?",
                         (len(rows), users, latest, stamp, agent_id, run_id, user_id, session_id))
            return self._session_row(conn, user_id, session_id), created

    def get_session(self, user_id: str, session_id: str, with_messages: bool = True, after_seq: int = 0) -> dict | None:
        with self._transaction(write=False) as conn:
            row = self._session_row(conn, user_id, session_id)
            if row is not None and with_messages:
                row["messages"] = [message_from_row(m) for m in conn.execute(
                    "SELECT * FROM messages WHERE user_id = ? AND session_id = ? AND seq > ? ORDER BY seq",
                    (user_id, session_id, after_seq))]
        return row

    def list_sessions(self, user_id: str | None, state: str | None, limit: int, offset: int) -> list[dict]:
        sql = "SELECT * FROM session_state WHERE (? IS NULL OR user_id = ?) AND (? IS NULL OR state = ?)"
        with self._transaction(write=False) as conn:
            rows = conn.execute(sql + " ORDER BY coalesce(last_active, updated_at) DESC, session_id LIMIT ? OFFSET ?",
                                (user_id, user_id, state, state, limit, offset)).fetchall()
        return [session_from_row(r) for r in rows]

    def stale_sessions(self, user_id: str | None, cutoff: datetime, lease_cutoff: datetime, max_attempts: int,
                       limit: int) -> list[tuple[str, str]]:
        """Sessions idle since before ``cutoff`` with activity not yet extracted, oldest first."""
        sql = ("SELECT user_id, session_id FROM session_state WHERE (? IS NULL OR user_id = ?)"
               " AND last_active IS NOT NULL AND last_active < ? AND message_count > 0"
               " AND (extracted_at IS NULL OR extracted_at < last_active OR extracted_seq < message_count"
               " OR chunked_seq < message_count)"
               " AND attempts < ?"
               " AND NOT (state = 'running' AND claimed_at >= ?) ORDER BY last_active, user_id, session_id LIMIT ?")
        with self._transaction(write=False) as conn:
            rows = conn.execute(sql, (user_id, user_id, to_db(cutoff), max_attempts, to_db(lease_cutoff),
                                      limit)).fetchall()
        return [(r[0], r[1]) for r in rows]

    def claim_session(self, user_id: str, session_id: str, now: datetime, lease_cutoff: datetime) -> dict | None:
        """Mark the session ``running`` unless another worker holds a live claim; the row, or None."""
        stamp = to_db(now)
        with self._transaction(write=True) as conn:
            row = conn.execute(
                "UPDATE session_state SET state = 'running', claimed_at = ?, attempts = attempts + 1, updated_at = ?"
                " WHERE user_id = ? AND session_id = ? AND NOT (state = 'running' AND claimed_at >= ?) RETURNING *",
                (stamp, stamp, user_id, session_id, to_db(lease_cutoff))).fetchone()
        return None if row is None else session_from_row(row)

    def store_chunks(self, user_id: str, session_id: str, items: Sequence[NewItem], upto_seq: int,
                     model: str | None, now: datetime) -> list[int]:
        """Insert conversation chunks and move the session's chunk mark, in one transaction."""
        stamp = to_db(now)
        with self._transaction(write=True) as conn:
            ids = self._insert_rows(conn, items, model, stamp) if items else []
            conn.execute("UPDATE session_state SET chunked_seq = max(chunked_seq, ?) WHERE user_id = ?"
                         " AND session_id = ?", (upto_seq, user_id, session_id))
        return ids

    def finish_session(self, user_id: str, session_id: str, outcome: dict, calls: Sequence[dict],
                       now: datetime) -> dict:
        """Record a run's outcome (state, error, marks) and its LLM calls; returns the session row."""
        stamp = to_db(now)
        ok = outcome["state"] == "extracted"
        with self._transaction(write=True) as conn:
            conn.execute(
                "UPDATE session_state SET state = ?, error = ?, claimed_at = NULL, updated_at = ?,"
                " extracted_at = CASE WHEN ? THEN ? ELSE extracted_at END,"
                " attempts = CASE WHEN ? THEN 0 ELSE attempts END,"
                " extracted_seq = max(extracted_seq, ?), extracted_user_messages = max(extracted_user_messages, ?)"
                " WHERE user_id = ? AND session_id = ?",
                (outcome["state"], outcome.get("error"), stamp, ok, stamp, ok, outcome.get("extracted_seq", 0),
                 outcome.get("extracted_user_messages", 0), user_id, session_id))
            _insert_calls(conn, user_id, session_id, calls, stamp)
            return self._session_row(conn, user_id, session_id)

    def record_llm_calls(self, user_id: str, calls: Sequence[dict], now: datetime) -> None:
        """LLM calls outside a session's run (a summary rewritten in the background), in usage stats."""
        with self._transaction(write=True) as conn:
            _insert_calls(conn, user_id, None, calls, to_db(now))

    def usage_stats(self, user_id: str | None, limit: int) -> dict:
        """Session counts by state, LLM calls and tokens by purpose and by model, and the costliest sessions."""
        user = (user_id, user_id)
        with self._transaction(write=False) as conn:
            states = conn.execute("SELECT state, count(*), coalesce(sum(message_count), 0) FROM session_state"
                                  " WHERE (? IS NULL OR user_id = ?) GROUP BY state", user).fetchall()
            purposes = conn.execute(
                "SELECT purpose, count(*), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0),"
                " coalesce(sum(1 - ok), 0), count(DISTINCT user_id || char(31) || coalesce(session_id, ''))"
                " FROM llm_calls WHERE (? IS NULL OR user_id = ?) GROUP BY purpose", user).fetchall()
            models = conn.execute(
                "SELECT coalesce(model, 'unknown'), count(*), coalesce(sum(input_tokens), 0),"
                " coalesce(sum(output_tokens), 0), coalesce(sum(1 - ok), 0),"
                " count(DISTINCT user_id || char(31) || coalesce(session_id, ''))"
                " FROM llm_calls WHERE (? IS NULL OR user_id = ?) GROUP BY 1", user).fetchall()
            sessions = conn.execute(
                "SELECT s.user_id, s.session_id, s.state, s.message_count, s.extracted_at, count(c.id) AS llm_calls,"
                " coalesce(sum(c.input_tokens), 0) AS input_tokens, coalesce(sum(c.output_tokens), 0) AS output_tokens"
                " FROM session_state s LEFT JOIN llm_calls c ON c.user_id = s.user_id AND c.session_id = s.session_id"
                " WHERE (? IS NULL OR s.user_id = ?) GROUP BY s.user_id, s.session_id"
                " ORDER BY llm_calls DESC, coalesce(s.last_active, s.updated_at) DESC LIMIT ?", (*user, limit)).fetchall()
        return {
            "states": {r[0]: {"sessions": r[1], "messages": r[2]} for r in states},
            "purposes": {r[0]: {"calls": r[1], "input_tokens": r[2], "output_tokens": r[3], "failed": r[4],
                                "sessions": r[5]} for r in purposes},
            "models": {r[0]: {"calls": r[1], "input_tokens": r[2], "output_tokens": r[3], "failed": r[4],
                              "sessions": r[5]} for r in models},
            "sessions": [dict(r, extracted_at=from_db(r["extracted_at"])) for r in sessions],
        }

    # -- forgetting: the raw text a deleted memory came from ---------------------------------

    def redact_messages(self, user_id: str, session_id: str, seqs: Sequence[int], content: str) -> int:
        """Replace the text (and tool-call arguments) of these messages; the rows, their order and
        the session stay."""
        with self._transaction(write=True) as conn:
            return conn.executemany(
                "UPDATE messages SET content = ?, tool_calls = NULL WHERE user_id = ? AND session_id = ? AND seq = ?",
                [(content, user_id, session_id, int(s)) for s in seqs]).rowcount

    def rewrite_summaries(self, user_id: str, contents: Mapping[int, str]) -> int:
        """Replace the text of summary versions (version -> text); numbers and times stay."""
        with self._transaction(write=True) as conn:
            return conn.executemany("UPDATE summaries SET content = ? WHERE user_id = ? AND version = ?",
                                    [(text, user_id, int(version)) for version, text in contents.items()]).rowcount
