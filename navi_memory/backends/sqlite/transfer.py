"""SQLite side of export/import: keyset-paged reads of whole tables, and restoring records with
their own timestamps and history (``operations.transfer`` validates them first).

A mixin of ``SQLiteBackend``. An import runs its batches of ``restore_records`` inside
``in_one_transaction`` (savepoints in one ``BEGIN IMMEDIATE``); every record is skipped when its
natural key is already there, so importing a file twice adds nothing.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from typing import Any, Callable, Sequence

import numpy as np

from ...calls import BackendCall
from ...errors import StorageError
from ...sansio import Op, advance
from ...core.timeutil import from_db, to_db
from ...transfer_format import EXPORT_TABLES, item_digest
from ...vectors import from_blob, to_blob
from ...core.contract import PERSON_COLUMNS, PERSON_LIST_COLUMNS
from .rows import typed

_TIMES = ("created_at", "updated_at", "expires_at", "last_verified_at", "valid_from", "valid_to", "observed_at",
          "promoted_at")


def _row(kind: str, row: sqlite3.Row) -> dict[str, Any]:
    if kind == "sessions":
        return typed(row)
    if kind == "messages":
        message = typed(row)
        return dict(message, tool_calls=message["tool_calls"] or [])
    if kind == "persons":
        return typed(row)
    d = dict(row)
    for key in _TIMES:
        if key in d:
            d[key] = from_db(d[key])
    for key in ("ok", "estimated"):
        if key in d:
            d[key] = bool(d[key])
    return d


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


class SQLiteTransfer:
    """Export reads and import writes (mixed into ``SQLiteBackend``)."""

    _transaction: Any
    _ensure_user: Any
    _ensure_theme: Any
    _bump_gen: Any

    def export_page(self, kind: str, user_id: str | None, after: Sequence[Any] | None, limit: int) -> list[dict]:
        """Rows of one table (``transfer_format.EXPORT_TABLES``) of a user (users: all when None),
        in key order after the key ``after``."""
        table, keys = EXPORT_TABLES[kind]
        owner = "id" if kind == "users" else "user_id"
        clauses, params = ["1=1"], []
        if user_id is not None:
            clauses.append(f"{owner} = ?")
            params.append(user_id)
        if after is not None:
            clauses.append(f"({', '.join(keys)}) > ({', '.join('?' * len(keys))})")
            params.extend(after)
        sql = f"SELECT * FROM {table} WHERE {' AND '.join(clauses)} ORDER BY {', '.join(keys)} LIMIT ?"
        with self._transaction(write=False) as conn:
            rows = conn.execute(sql, [*params, limit]).fetchall()
        out = [_row(kind, r) for r in rows]
        if kind == "users":
            out = [{"id": d["id"], "created_at": d["created_at"], "household_mode": d["household_mode"],
                    "timezone": d["timezone"],
                    "memory_off_since": from_db(d["memory_off_since"]) if d["memory_off_since"] else None}
                   for d in out]
        return out

    def export_items(self, user_id: str, after_id: int, limit: int, ids: Sequence[int] | None,
                     with_vectors: bool) -> list[dict]:
        """Items with their embedding (and vector, when asked): the given ``ids``, or else the
        items after ``after_id`` that are not the searchable copy of a fact (those go with the fact)."""
        sql = ("SELECT i.*, e.model AS emb_model, e.state AS emb_state, e.dimensions AS emb_dims,"
               f" e.error AS emb_error{', e.vector AS emb_vector' if with_vectors else ''}"
               " FROM items i LEFT JOIN embeddings e ON e.item_id = i.id WHERE i.user_id = ?")
        if ids is not None:
            sql += " AND i.id IN (SELECT value FROM json_each(?)) ORDER BY i.id"
            params: list[Any] = [user_id, json.dumps([int(i) for i in ids])]
        else:
            sql += (" AND i.id > ? AND (i.fact_id IS NULL OR NOT EXISTS (SELECT 1 FROM facts f"
                    " WHERE f.id = i.fact_id AND f.user_id = i.user_id)) ORDER BY i.id LIMIT ?")
            params = [user_id, after_id, limit]
        with self._transaction(write=False) as conn:
            rows = conn.execute(sql, params).fetchall()
        out = []
        for row in rows:
            d = _row("items", row)
            d["tags"] = json.loads(d["tags"] or "[]")
            d["metadata"] = json.loads(d["metadata"] or "{}")
            d["source_ref"] = json.loads(d["source_ref"]) if d.get("source_ref") else None
            d["pinned"] = bool(d["pinned"])
            d["key"] = d.pop("ext_key", None)
            blob = d.pop("emb_vector", None)
            d["emb_vector"] = None if blob is None else from_blob(blob)
            out.append(d)
        return out

    # -- import ---------------------------------------------------------------------------------

    def in_one_transaction(self, make_plan: Callable[[], Op[Any]]) -> Any:
        """Run a plan (a generator yielding backend calls ``db.<method>(...)``) in one write
        transaction; the calls it makes nest as savepoints. Any error rolls everything back."""
        with self._transaction(write=True):
            plan = make_plan()
            done, call = advance(plan, None)
            while not done:
                if not isinstance(call, BackendCall):
                    raise TypeError(f"a transaction plan may only call backend methods, not {call!r}")
                done, call = advance(plan, getattr(self, call.method)(**call.kwargs))
            return call

    def lock_user_writes(self, user_id: str) -> None:
        """Nothing more to take: a plan runs in ``BEGIN IMMEDIATE``, which already makes every other
        writer (thread or process) wait until it ends."""

    def ensure_vector_index(self, model: str, dimensions: int) -> None:
        """Nothing to build: SQLite searches its vectors in memory."""

    def max_item_id(self) -> int:
        with self._transaction(write=False) as conn:
            return conn.execute("SELECT coalesce(max(id), 0) FROM items").fetchone()[0]

    def item_digests(self, user_id: str, created_at: datetime, upto_id: int) -> list[tuple[int, bytes]]:
        """(id, ``item_digest``) of each item of the user created at that instant, with id <=
        ``upto_id``, in id order."""
        with self._transaction(write=False) as conn:
            rows = conn.execute("SELECT id, type, content FROM items WHERE user_id = ? AND created_at = ? AND id <= ?"
                                " ORDER BY id", (user_id, to_db(created_at), upto_id))
            return [(i, item_digest(t, c)) for i, t, c in rows]

    def restore_records(self, records: Sequence[dict], model: str | None, now: datetime) -> list[Any]:
        """Write a batch of checked records in one transaction; per record, what was written:
        False when it was already there (skipped), else True, or for items the new id, for facts
        the id of the fact's new searchable item (or True when it has none)."""
        stamp = to_db(now)
        with self._transaction(write=True) as conn:
            return [getattr(self, f"_restore_{r['type']}")(conn, r, model, stamp) for r in records]

    def _restore_user(self, conn: sqlite3.Connection, r: dict, model: str | None, stamp: str) -> bool:
        off = None if r["memory_off_since"] is None else to_db(r["memory_off_since"])
        added = conn.execute("INSERT OR IGNORE INTO users (id, created_at, household_mode, timezone, memory_off_since)"
                             " VALUES (?, ?, ?, ?, ?)", (r["user_id"], to_db(r["created_at"]), r["household_mode"],
                                                         r["timezone"], off)).rowcount > 0
        if not added:  # a stored user only ever widens to multi, keeps a time zone it has, and
            # takes an imported "memory off" (an import never turns memory back on)
            conn.execute("UPDATE users SET household_mode = CASE WHEN ? = 'multi' THEN 'multi' ELSE household_mode"
                         " END, timezone = coalesce(timezone, ?), memory_off_since = coalesce(memory_off_since, ?)"
                         " WHERE id = ?", (r["household_mode"], r["timezone"], off, r["user_id"]))
        return added

    def _restore_person(self, conn: sqlite3.Connection, r: dict, model: str | None, stamp: str) -> bool:
        self._ensure_user(conn, r["user_id"], stamp)
        values = [json.dumps(r[c], ensure_ascii=False) if c in PERSON_LIST_COLUMNS else r[c] for c in PERSON_COLUMNS]
        return conn.execute(  # natural key: the unique index on (user_id, lower(display_name))
            f"INSERT INTO persons (user_id, {', '.join(PERSON_COLUMNS)}, created_at, updated_at)"
            f" VALUES (?, {', '.join('?' * len(PERSON_COLUMNS))}, ?, ?) ON CONFLICT DO NOTHING",
            (r["user_id"], *values, to_db(r["created_at"]), to_db(r["updated_at"]))).rowcount > 0

    def _restore_promotion(self, conn: sqlite3.Connection, r: dict, model: str | None, stamp: str) -> bool:
        """``item_id``: the item's id here (the operation maps the exported one; None: not found)."""
        if r["item_id"] is None:
            return False
        fact_id = None
        if r["fact"] is not None:
            row = conn.execute("SELECT id FROM facts WHERE user_id = ? AND agent_id IS ? AND category = ? AND key = ?",
                               (r["user_id"], r["fact"].get("agent_id"), r["fact"]["category"],
                                r["fact"]["key"])).fetchone()
            if row is None:
                raise StorageError(f"the promotion of item {r['item']} comes before its fact record")
            fact_id = row[0]
        return conn.execute("INSERT INTO promotions (item_id, user_id, fact_id, promoted_at) SELECT id, user_id, ?, ?"
                            " FROM items WHERE id = ? AND user_id = ? ON CONFLICT (item_id) DO NOTHING",
                            (fact_id, to_db(r["promoted_at"]), r["item_id"], r["user_id"])).rowcount > 0

    def _restore_theme(self, conn: sqlite3.Connection, r: dict, model: str | None, stamp: str) -> bool:
        self._ensure_user(conn, r["user_id"], stamp)
        return conn.execute(
            "INSERT INTO themes (user_id, slug, display_name, description, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (user_id, slug) DO NOTHING",
            (r["user_id"], r["slug"], r["display_name"], r["description"], to_db(r["created_at"]),
             to_db(r["updated_at"]))).rowcount > 0

    def _restore_item(self, conn: sqlite3.Connection, r: dict, model: str | None, stamp: str) -> int:
        return self._insert_item(conn, r, None, model, stamp)  # the operation has ruled out duplicates

    def _insert_item(self, conn: sqlite3.Connection, r: dict, fact_id: int | None, model: str | None,
                     stamp: str) -> int:
        self._ensure_user(conn, r["user_id"], stamp)
        self._ensure_theme(conn, r["user_id"], r["theme"], stamp)
        cur = conn.execute(
            "INSERT INTO items (user_id, theme, type, title, content, tags, status, pinned, source, source_ref,"
            " person, confidence, observed_at, expires_at, metadata, context, fact_id, created_at, updated_at,"
            " agent_id, run_id, namespace, ext_key, ttl_minutes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
            " ?, ?, ?, ?, ?, ?, ?, ?)",
            (r["user_id"], r["theme"], r["item_type"], r["title"], r["content"], _json(r["tags"]), r["status"],
             int(r["pinned"]), r["source"], _json(r["source_ref"]), r["person"], r["confidence"],
             to_db(r["observed_at"]), to_db(r["expires_at"]), _json(r["metadata"] or {}), r["context"], fact_id,
             to_db(r["created_at"]), to_db(r["updated_at"]), r.get("agent_id"), r.get("run_id"),
             r.get("namespace"), r.get("key"), r.get("ttl_minutes")))
        item_id = cur.lastrowid
        emb = r.get("embedding")
        vector: np.ndarray | None = emb["vector"] if emb else None
        if vector is not None:  # kept as exported (under its own model); re-embedded if that is not ours
            conn.execute("INSERT INTO embeddings (item_id, user_id, model, dimensions, state, vector, gen, updated_at)"
                         " VALUES (?, ?, ?, ?, 'ready', ?, ?, ?)",
                         (item_id, r["user_id"], emb["model"], int(vector.size), to_blob(vector),
                          self._bump_gen(conn, r["user_id"]), stamp))
        elif model is not None:
            conn.execute("INSERT INTO embeddings (item_id, user_id, model, state, gen, updated_at)"
                         " VALUES (?, ?, ?, 'pending', 0, ?)", (item_id, r["user_id"], model, stamp))
        return item_id

    def _restore_fact(self, conn: sqlite3.Connection, r: dict, model: str | None, stamp: str) -> int | bool:
        uid = r["user_id"]
        self._ensure_user(conn, uid, stamp)
        if conn.execute("SELECT 1 FROM facts WHERE user_id = ? AND agent_id IS ? AND category = ? AND key = ?",
                        (uid, r.get("agent_id"), r["category"], r["key"])).fetchone():
            return False
        cur = conn.execute(
            "INSERT INTO facts (user_id, category, key, value, source, confidence, source_context, source_session_id,"
            " source_message_id, person, expires_at, last_verified_at, created_at, updated_at, agent_id, run_id,"
            " observed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (uid, r["category"], r["key"], r["value"], r["source"], r["confidence"], r["source_context"],
             r["source_session_id"], r["source_message_id"], r["person"], to_db(r["expires_at"]),
             to_db(r["last_verified_at"]), to_db(r["created_at"]), to_db(r["updated_at"]), r.get("agent_id"),
             r.get("run_id"), to_db(r.get("observed_at") or r["updated_at"])))
        fact_id = cur.lastrowid
        conn.executemany(
            "INSERT INTO fact_history (fact_id, user_id, value, source, confidence, source_context, valid_from,"
            " valid_to, source_session_id, source_message_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(fact_id, uid, h["value"], h["source"], h["confidence"], h["source_context"], to_db(h["valid_from"]),
              to_db(h["valid_to"]), h.get("source_session_id"), h.get("source_message_id")) for h in r["history"]])
        if not r["item"]:
            return True
        item_id = self._insert_item(conn, r["item"], fact_id, model, stamp)
        conn.execute("UPDATE facts SET item_id = ? WHERE id = ?", (item_id, fact_id))
        return item_id

    def _restore_summary(self, conn: sqlite3.Connection, r: dict, model: str | None, stamp: str) -> bool:
        uid, created = r["user_id"], to_db(r["created_at"])
        self._ensure_user(conn, uid, stamp)
        version = r["version"]
        taken = version is None or conn.execute("SELECT 1 FROM summaries WHERE user_id = ? AND version = ?",
                                                (uid, version)).fetchone()
        # a free version number is new here; else the same time and text is this version imported before
        # (one text may come back later at the same instant: the summary follows the facts)
        if taken and conn.execute("SELECT 1 FROM summaries WHERE user_id = ? AND created_at = ? AND content = ?",
                                  (uid, created, r["content"])).fetchone():
            return False
        if taken:
            version = conn.execute("SELECT coalesce(max(version), 0) + 1 FROM summaries WHERE user_id = ?",
                                   (uid,)).fetchone()[0]
        conn.execute("INSERT INTO summaries (user_id, version, content, created_at) VALUES (?, ?, ?, ?)",
                     (uid, version, r["content"], created))
        return True

    def _restore_session(self, conn: sqlite3.Connection, r: dict, model: str | None, stamp: str) -> bool:
        self._ensure_user(conn, r["user_id"], stamp)
        return conn.execute(
            "INSERT INTO session_state (user_id, session_id, extracted_at, updated_at, created_at, last_active, state,"
            " error, attempts, claimed_at, message_count, user_messages, extracted_seq, extracted_user_messages,"
            " chunked_seq, agent_id, run_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (user_id, session_id) DO NOTHING",
            (r["user_id"], r["session_id"], to_db(r["extracted_at"]), to_db(r["updated_at"]), to_db(r["created_at"]),
             to_db(r["last_active"]), r["state"], r["error"], r["attempts"], to_db(r["claimed_at"]),
             r["message_count"], r["user_messages"], r["extracted_seq"], r["extracted_user_messages"],
             r["chunked_seq"], r.get("agent_id"), r.get("run_id"))).rowcount > 0

    def _restore_message(self, conn: sqlite3.Connection, r: dict, model: str | None, stamp: str) -> bool:
        if not conn.execute("SELECT 1 FROM session_state WHERE user_id = ? AND session_id = ?",
                            (r["user_id"], r["session_id"])).fetchone():
            raise StorageError(f"message {r['seq']} of session {r['session_id']!r} comes before its session record")
        return conn.execute(
            "INSERT INTO messages (user_id, session_id, seq, role, content, name, tool_calls, tool_call_id, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (user_id, session_id, seq) DO NOTHING",
            (r["user_id"], r["session_id"], r["seq"], r["role"], r["content"], r["name"],
             json.dumps(r["tool_calls"], ensure_ascii=False) if r["tool_calls"] else None, r["tool_call_id"],
             to_db(r["created_at"]))).rowcount > 0

    def _restore_llm_call(self, conn: sqlite3.Connection, r: dict, model: str | None, stamp: str) -> bool:
        self._ensure_user(conn, r["user_id"], stamp)
        found = conn.execute(
            "SELECT count(*) FROM llm_calls WHERE user_id = ? AND session_id IS ? AND purpose = ? AND model IS ?"
            " AND created_at = ? AND input_tokens = ? AND output_tokens = ?",
            (r["user_id"], r["session_id"], r["purpose"], r["model"], to_db(r["created_at"]), r["input_tokens"],
             r["output_tokens"])).fetchone()[0]
        if found >= r["occurrence"]:
            return False
        conn.execute("INSERT INTO llm_calls (user_id, session_id, purpose, model, input_tokens, output_tokens,"
                     " estimated, ok, error, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     (r["user_id"], r["session_id"], r["purpose"], r["model"], r["input_tokens"], r["output_tokens"],
                      int(r["estimated"]), int(r["ok"]), r["error"], to_db(r["created_at"])))
        return True
