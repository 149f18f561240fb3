"""PostgreSQL storage of conversations: sessions (``session_state``), messages and LLM cost records.

Generator methods mixed into ``PostgresQueries`` (installed on both runners by ``pool``):
each yields ``Q`` statements and runs as one transaction. Every statement names ``user_id``
first, so the tables distribute by user on Citus like the rest of the schema.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Mapping, Sequence

from psycopg.types.json import Jsonb

from ...sansio import Op, operation
from ..base import NewItem
from .sql import Q, row_times

SESSION_TABLES = ("messages", "llm_calls")

_OPEN = ("INSERT INTO session_state (user_id, session_id, created_at, last_active, updated_at)"
         " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (user_id, session_id) DO NOTHING RETURNING session_id")


class PostgresSessionQueries:
    """Sessions, messages and LLM call records (mixed into ``PostgresQueries``)."""

    _insert: Any

    def _open_session_row(self, user_id: str, session_id: str, now: datetime, started: datetime) -> Op:
        yield Q("INSERT INTO users (id, created_at) VALUES (%s, %s) ON CONFLICT DO NOTHING", [user_id, now])
        created = yield Q(_OPEN, [user_id, session_id, started, started, now])
        rows = yield Q("SELECT * FROM session_state WHERE user_id = %s AND session_id = %s FOR UPDATE",
                       [user_id, session_id])
        return rows[0], bool(created)

    @operation
    def open_session(self, user_id: str, session_id: str, now: datetime) -> Op:
        _, created = yield from self._open_session_row(user_id, session_id, now, now)
        rows = yield Q("UPDATE session_state SET created_at = coalesce(created_at, %s), last_active = greatest(last_active, %s),"
                       " updated_at = %s WHERE user_id = %s AND session_id = %s RETURNING *",
                       [now, now, now, user_id, session_id])
        return row_times(rows[0]), created

    @operation
    def append_messages(self, user_id: str, session_id: str, messages: Sequence[dict], now: datetime,
                        agent_id: str | None = None, run_id: str | None = None) -> Op:
        times = [m.get("created_at") or now for m in messages]
        session, created = yield from self._open_session_row(user_id, session_id, now, min(times, default=now))
        first = session["message_count"] + 1
        yield Q("INSERT INTO messages (user_id, session_id, seq, role, content, name, tool_calls, tool_call_id,"
                " created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [(user_id, session_id, first + i, m["role"], m["content"], m.get("name"),
                  Jsonb(m["tool_calls"]) if m.get("tool_calls") else None, m.get("tool_call_id"), when)
                 for i, (m, when) in enumerate(zip(messages, times))], many=True)
        users = sum(1 for m in messages if m["role"] == "user")
        rows = yield Q("UPDATE session_state SET message_count = message_count + %s, user_messages = user_messages + %s,"
                       " created_at = coalesce(created_at, %s), last_active = greatest(last_active, %s), attempts = 0,"
                       " updated_at = %s, agent_id = coalesce(%s, agent_id), run_id = coalesce(%s, run_id)"
                       " WHERE user_id = %s AND session_id = %s RETURNING *",
                       [len(messages), users, now, max(times, default=now), now, agent_id, run_id, user_id, session_id])
        return row_times(rows[0]), created

    @operation
    def get_session(self, user_id: str, session_id: str, with_messages: bool = True, after_seq: int = 0) -> Op:
        rows = yield Q("SELECT * FROM session_state WHERE user_id = %s AND session_id = %s", [user_id, session_id])
        if not rows:
            return None
        session = row_times(rows[0])
        if with_messages:
            messages = yield Q("SELECT * FROM messages WHERE user_id = %s AND session_id = %s AND seq > %s ORDER BY seq",
                               [user_id, session_id, after_seq])
            session["messages"] = [dict(row_times(m), tool_calls=m["tool_calls"] or []) for m in messages]
        return session

    @operation
    def list_sessions(self, user_id: str | None, state: str | None, limit: int, offset: int) -> Op:
        rows = yield Q("SELECT * FROM session_state WHERE (%s::text IS NULL OR user_id = %s)"
                       " AND (%s::text IS NULL OR state = %s)"
                       " ORDER BY coalesce(last_active, updated_at) DESC, session_id LIMIT %s OFFSET %s",
                       [user_id, user_id, state, state, limit, offset])
        return [row_times(r) for r in rows]

    @operation
    def stale_sessions(self, user_id: str | None, cutoff: datetime, lease_cutoff: datetime, max_attempts: int,
                       limit: int) -> Op:
        rows = yield Q("SELECT user_id, session_id FROM session_state WHERE (%s::text IS NULL OR user_id = %s)"
                       " AND last_active < %s AND message_count > 0"
                       " AND (extracted_at IS NULL OR extracted_at < last_active OR extracted_seq < message_count"
                       " OR chunked_seq < message_count)"
                       " AND attempts < %s AND NOT (state = 'running' AND claimed_at >= %s)"
                       " ORDER BY last_active, user_id, session_id LIMIT %s",
                       [user_id, user_id, cutoff, max_attempts, lease_cutoff, limit])
        return [(r["user_id"], r["session_id"]) for r in rows]

    @operation
    def claim_session(self, user_id: str, session_id: str, now: datetime, lease_cutoff: datetime) -> Op:
        rows = yield Q("UPDATE session_state SET state = 'running', claimed_at = %s, attempts = attempts + 1,"
                       " updated_at = %s WHERE user_id = %s AND session_id = %s"
                       " AND NOT (state = 'running' AND claimed_at >= %s) RETURNING *",
                       [now, now, user_id, session_id, lease_cutoff])
        return row_times(rows[0]) if rows else None

    @operation
    def store_chunks(self, user_id: str, session_id: str, items: Sequence[NewItem], upto_seq: int,
                     model: str | None, now: datetime) -> Op:
        ids = (yield from self._insert(items, model, now)) if items else []
        yield Q("UPDATE session_state SET chunked_seq = greatest(chunked_seq, %s) WHERE user_id = %s AND session_id = %s",
                [upto_seq, user_id, session_id])
        return ids

    @operation
    def finish_session(self, user_id: str, session_id: str, outcome: dict, calls: Sequence[dict], now: datetime) -> Op:
        ok = outcome["state"] == "extracted"
        rows = yield Q("UPDATE session_state SET state = %s, error = %s, claimed_at = NULL, updated_at = %s,"
                       " extracted_at = CASE WHEN %s THEN %s ELSE extracted_at END,"
                       " attempts = CASE WHEN %s THEN 0 ELSE attempts END,"
                       " extracted_seq = greatest(extracted_seq, %s),"
                       " extracted_user_messages = greatest(extracted_user_messages, %s)"
                       " WHERE user_id = %s AND session_id = %s RETURNING *",
                       [outcome["state"], outcome.get("error"), now, ok, now, ok, outcome.get("extracted_seq", 0),
                        outcome.get("extracted_user_messages", 0), user_id, session_id])
        yield from self._insert_calls(user_id, session_id, calls, now)
        return row_times(rows[0]) if rows else None

    @operation
    def record_llm_calls(self, user_id: str, calls: Sequence[dict], now: datetime) -> Op:
        """LLM calls outside a session's run (a summary rewritten in the background), in usage stats."""
        yield from self._insert_calls(user_id, None, calls, now)

    def _insert_calls(self, user_id: str, session_id: str | None, calls: Sequence[dict], now: datetime) -> Op:
        if calls:
            yield Q("INSERT INTO llm_calls (user_id, session_id, purpose, model, input_tokens, output_tokens, estimated,"
                    " ok, error, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    [(user_id, session_id, c["purpose"], c.get("model"), c["input_tokens"], c["output_tokens"],
                      bool(c["estimated"]), bool(c["ok"]), c.get("error"), now) for c in calls], many=True)

    @operation
    def usage_stats(self, user_id: str | None, limit: int) -> Op:
        user = [user_id, user_id]
        states = yield Q("SELECT state, count(*) AS n, coalesce(sum(message_count), 0) AS m FROM session_state"
                         " WHERE (%s::text IS NULL OR user_id = %s) GROUP BY state", user)
        purposes = yield Q("SELECT purpose, count(*) AS n, coalesce(sum(input_tokens), 0) AS i,"
                           " coalesce(sum(output_tokens), 0) AS o, count(*) FILTER (WHERE NOT ok) AS f,"
                           " count(DISTINCT (user_id, coalesce(session_id, ''))) AS s"
                           " FROM llm_calls WHERE (%s::text IS NULL OR user_id = %s) GROUP BY purpose", user)
        models = yield Q("SELECT coalesce(model, 'unknown') AS model, count(*) AS n,"
                         " coalesce(sum(input_tokens), 0) AS i, coalesce(sum(output_tokens), 0) AS o,"
                         " count(*) FILTER (WHERE NOT ok) AS f,"
                         " count(DISTINCT (user_id, coalesce(session_id, ''))) AS s"
                         " FROM llm_calls WHERE (%s::text IS NULL OR user_id = %s) GROUP BY 1", user)
        sessions = yield Q("SELECT s.user_id, s.session_id, s.state, s.message_count, s.extracted_at,"
                           " count(c.id) AS llm_calls, coalesce(sum(c.input_tokens), 0) AS input_tokens,"
                           " coalesce(sum(c.output_tokens), 0) AS output_tokens FROM session_state s"
                           " LEFT JOIN llm_calls c ON c.user_id = s.user_id AND c.session_id = s.session_id"
                           " WHERE (%s::text IS NULL OR s.user_id = %s) GROUP BY s.user_id, s.session_id"
                           " ORDER BY llm_calls DESC, max(coalesce(s.last_active, s.updated_at)) DESC LIMIT %s",
                           [*user, limit])
        return {
            "states": {r["state"]: {"sessions": r["n"], "messages": int(r["m"])} for r in states},
            "purposes": {r["purpose"]: {"calls": r["n"], "input_tokens": int(r["i"]), "output_tokens": int(r["o"]),
                                        "failed": r["f"], "sessions": r["s"]} for r in purposes},
            "models": {r["model"]: {"calls": r["n"], "input_tokens": int(r["i"]), "output_tokens": int(r["o"]),
                                    "failed": r["f"], "sessions": r["s"]} for r in models},
            "sessions": [{**row_times(r), "input_tokens": int(r["input_tokens"]),
                          "output_tokens": int(r["output_tokens"])} for r in sessions],
        }

    # -- forgetting: the raw text a deleted memory came from ---------------------------------

    @operation
    def redact_messages(self, user_id: str, session_id: str, seqs: Sequence[int], content: str) -> Op:
        rows = yield Q("UPDATE messages SET content = %s, tool_calls = NULL WHERE user_id = %s AND session_id = %s"
                       " AND seq = ANY(%s) RETURNING seq", [content, user_id, session_id, [int(s) for s in seqs]])
        return len(rows)

    @operation
    def rewrite_summaries(self, user_id: str, contents: Mapping[int, str]) -> Op:
        count = 0
        for version, text in contents.items():
            rows = yield Q("UPDATE summaries SET content = %s WHERE user_id = %s AND version = %s RETURNING version",
                           [text, user_id, int(version)])
            count += len(rows)
        return count
