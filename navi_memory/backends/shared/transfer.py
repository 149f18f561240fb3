"""Export and import for both backends: keyset-paged reads of whole tables, the digests an import
checks its items against, restoring records with their own timestamps and history, and plans run
as one transaction.

Generator methods mixed into each backend and installed on its runners (``sansio.install``);
values are bound through ``self.dialect``. What depends on how vectors are stored is each
backend's own step (its ``transfer`` module): ``_exported_vector`` and ``_vector_of``, the exported
vector and its value as numpy (SQLite a blob, PostgreSQL pgvector's text); ``_reserve_item_ids``,
the ids of restored items (SQLite's AUTOINCREMENT rule under its write lock, PostgreSQL's
sequence); ``_restore_vectors``, the ready vectors of restored items (SQLite stamps them with a
new vector generation of the user); and ``ensure_vector_index`` (PostgreSQL's index, nothing on
SQLite).

``in_one_transaction`` is one loop for both; each call of the plan is the runner's ``_in_plan``.
PostgreSQL runs the call's generator inside the plan's, so the plan is one generator on one
connection, which its runner runs again whole after a lost conflict. SQLite calls the public
method, which opens a savepoint inside the plan's ``BEGIN IMMEDIATE``: a plan also calls methods
SQLite still writes as plain methods (search candidates, vectors stored), which have no generator
to run.

An import runs its batches of ``restore_records`` inside ``in_one_transaction``; every record is
skipped when its natural key is already there, so importing a file twice adds nothing
(docs/export-format.md). The operation has ruled out items already there, and maps a
promotion's item to its id here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ...calls import BackendCall
from ...core.contract import PERSON_COLUMNS, PERSON_LIST_COLUMNS
from ...errors import StorageError
from ...sansio import Op, advance, operation, reads
from ...transfer_format import EXPORT_TABLES, item_digest
from ..base import SummaryRow
from .dialect import Count, Dialect, Q, Row, ensure_theme, row_times

_ITEM_COLUMNS = ("user_id", "id", "theme", "type", "title", "content", "tags", "status", "pinned", "source",
                 "source_ref", "person", "confidence", "observed_at", "expires_at", "metadata", "context", "fact_id",
                 "created_at", "updated_at", "agent_id", "run_id", "namespace", "ext_key", "ttl_minutes")
_EMBEDDING = "e.model AS emb_model, e.state AS emb_state, e.dimensions AS emb_dims, e.error AS emb_error"
_USER_COLUMNS = ("id, created_at, household_mode, timezone, memory_off_since, household_name,"
                 " locale")  # not SQLite's pk and vec_gen
_PROMOTIONS = "promotions p LEFT JOIN facts f ON f.user_id = p.user_id AND f.id = p.fact_id"
_NEW_USER = "INSERT INTO users (id, created_at) VALUES (%s, %s) ON CONFLICT DO NOTHING"
_SESSION_COLUMNS = ("extracted_at", "updated_at", "created_at", "last_active", "state", "error", "attempts",
                    "claimed_at", "message_count", "user_messages", "extracted_seq", "extracted_user_messages",
                    "chunked_seq", "agent_id", "run_id")
_TIME_COLUMNS = frozenset({"extracted_at", "updated_at", "created_at", "last_active", "claimed_at"})


def _values(count: int) -> str:
    return ", ".join(["%s"] * count)


class TransferQueries:
    """Export reads and import writes (mixed into ``PostgresQueries`` and ``SQLiteBackend``)."""

    dialect: Dialect
    has_vector: bool
    _exported_vector: str  # the exported vector of embeddings ``e``, as the backend stores it
    _vector_of: Callable[[Any], np.ndarray | None]  # (that value or None): the vector
    _reserve_item_ids: Callable[[int], Op[list[int]]]  # (count): ids for new items, in order
    # (user_id, content, stamp): the user's next summary version (shared/sessions.py)
    _append_summary: Callable[[str, str, Any], Op[list[SummaryRow]]]
    # (rows of (user_id, item_id, model, vector), now): ready vectors stored
    _restore_vectors: Callable[[Sequence[tuple[str, int, str, np.ndarray]], datetime], Op[None]]
    _in_plan: Callable[[BackendCall], Op[Any]]  # one call of a plan, inside the plan's transaction

    # -- export ---------------------------------------------------------------------------------

    @operation
    @reads
    def export_page(self, kind: str, user_id: str | None, after: Sequence[Any] | None,
                    limit: int) -> Op[list[dict[str, Any]]]:
        """Rows of one table (``transfer_format.EXPORT_TABLES``) of a user (users: all when None),
        in key order after the key ``after``."""
        table, keys = EXPORT_TABLES[kind]  # known table and column names only
        source, selected, of = table, _USER_COLUMNS if kind == "users" else "*", ""
        if kind == "promotions":  # the id of a fact deleted since reads as null (rows older than the delete
            # that clears it on PostgreSQL, which keeps no foreign key to facts)
            source, selected, of = _PROMOTIONS, "p.user_id, p.item_id, f.id AS fact_id, p.promoted_at", "p."
        parts: list[str] = ["TRUE"]
        params: list[Any] = []
        if user_id is not None:
            parts.append(f"{of}{'id' if kind == 'users' else 'user_id'} = %s")
            params.append(user_id)
        columns = ", ".join(of + key for key in keys)
        if after is not None:
            parts.append(f"({columns}) > ({_values(len(keys))})")
            params.extend(after)
        rows: list[Row] = yield Q(f"SELECT {selected} FROM {source}"
                                  f" WHERE {' AND '.join(parts)} ORDER BY {columns} LIMIT %s", [*params, limit])
        out = [row_times(r) for r in rows]
        if kind == "messages":
            for row in out:
                row["tool_calls"] = row["tool_calls"] or []
        return out

    @operation
    @reads
    def export_items(self, user_id: str, after_id: int, limit: int, ids: Sequence[int] | None,
                     with_vectors: bool) -> Op[list[dict[str, Any]]]:
        """Items with their embedding (and vector, when asked): the given ``ids``, or else the
        items after ``after_id`` that are not the searchable copy of a fact (those go with the fact)."""
        d = self.dialect
        vector = f", {self._exported_vector} AS emb_vector" if with_vectors else ""
        # the user named on every table, not only through the joins: Citus then routes it to one shard
        head = (f"SELECT {', '.join(f'i.{c}' for c in _ITEM_COLUMNS)}, {_EMBEDDING}{vector} FROM items i"
                " LEFT JOIN embeddings e ON e.user_id = %s AND e.item_id = i.id WHERE i.user_id = %s")
        rows: list[Row]
        if ids is not None:
            rows = yield Q(f"{head} AND {d.in_ids.format(column='i.id')} ORDER BY i.id",
                           [user_id, user_id, d.ids(ids)])
        else:
            rows = yield Q(f"{head} AND i.id > %s AND (i.fact_id IS NULL OR NOT EXISTS (SELECT 1 FROM facts f"
                           " WHERE f.user_id = %s AND f.id = i.fact_id)) ORDER BY i.id LIMIT %s",
                           [user_id, user_id, after_id, user_id, limit])
        out = []
        for row in rows:
            row = row_times(row)
            row["key"] = row.pop("ext_key")
            row["emb_vector"] = self._vector_of(row.get("emb_vector"))
            out.append(row)
        return out

    # -- plans ----------------------------------------------------------------------------------

    @operation
    def in_one_transaction(self, make_plan: Callable[[], Op[Any]]) -> Op[Any]:
        """Run a plan (a generator yielding backend calls ``db.<method>(...)``) as this one call,
        so in one transaction; any error rolls everything back. A runner that runs a call again
        (PostgreSQL's, after a lost conflict) builds the plan again from ``make_plan``."""
        plan = make_plan()
        done, call = advance(plan, None)
        while not done:
            if not isinstance(call, BackendCall):
                raise TypeError(f"a transaction plan may only call backend methods, not {call!r}")
            done, call = advance(plan, (yield from self._in_plan(call)))
        return call

    @operation
    def lock_user_writes(self, user_id: str) -> Op[None]:
        """Take the user's write lock until the transaction ends (a plan's check and insert then see
        no concurrent writer of the same user; other users never wait). SQLite has nothing more to
        take: its ``BEGIN IMMEDIATE`` already makes every other writer wait until the plan ends."""
        if self.dialect.key_lock is not None:
            yield Q(self.dialect.key_lock, ["navi-memory writes of " + user_id])

    @operation
    @reads
    def max_item_id(self) -> Op[int]:
        rows: list[Count] = yield Q("SELECT coalesce(max(id), 0) AS n FROM items")
        return rows[0]["n"]

    @operation
    @reads
    def item_digests(self, user_id: str, created_at: datetime, upto_id: int) -> Op[list[tuple[int, bytes]]]:
        """(id, ``item_digest``) of each item of the user created at that instant, with id <=
        ``upto_id``, in id order."""
        rows: list[Row] = yield Q(
            "SELECT id, type, content FROM items WHERE user_id = %s AND created_at = %s AND id <= %s"
            " ORDER BY id", [user_id, self.dialect.time(created_at), upto_id])
        return [(r["id"], item_digest(r["type"], r["content"])) for r in rows]

    # -- import ---------------------------------------------------------------------------------

    @operation
    def restore_records(self, records: Sequence[Mapping[str, Any]], model: str | None,
                        now: datetime) -> Op[list[bool | int]]:
        """Write a batch of checked records in one transaction; per record, what was written:
        False when it was already there (skipped), else True, or for items the new id, for facts
        the id of the fact's new searchable item (or True when it has none)."""
        out: list[bool | int] = []
        run: list[Mapping[str, Any]] = []  # consecutive items go in together (a few statements, not a few per item)
        for r in [*records, None]:
            if r is not None and r["type"] == "item":
                run.append(r)
                continue
            if run:
                out.extend((yield from self._restore_items(run, [None] * len(run), model, now)))
                run = []
            if r is not None:
                out.append((yield from getattr(self, f"_restore_{r['type']}")(r, model, now)))
        return out

    def _new_user(self, user_id: str, now: datetime) -> Q:
        return Q(_NEW_USER, [user_id, self.dialect.time(now)])

    def _restore_user(self, r: Mapping[str, Any], model: str | None, now: datetime) -> Op[bool | int]:
        d = self.dialect
        added: bool = (yield Q(f"INSERT INTO users ({_USER_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s)"
                         " ON CONFLICT DO NOTHING",
                         [r["user_id"], d.time(r["created_at"]), r["household_mode"], r["timezone"],
                          d.time(r["memory_off_since"]), r["household_name"], r["locale"]])) > 0
        if not added:  # a stored user only ever widens to multi, keeps a time zone, household name and
            # locale it has, and takes an imported "memory off" (an import never turns memory back on)
            yield Q("UPDATE users SET household_mode = CASE WHEN %s = 'multi' THEN 'multi' ELSE household_mode END,"
                    " timezone = coalesce(timezone, %s), memory_off_since = coalesce(memory_off_since, %s),"
                    " household_name = coalesce(household_name, %s), locale = coalesce(locale, %s)"
                    " WHERE id = %s", [r["household_mode"], r["timezone"], d.time(r["memory_off_since"]),
                                       r["household_name"], r["locale"], r["user_id"]])
        return added

    def _restore_person(self, r: Mapping[str, Any], model: str | None, now: datetime) -> Op[bool | int]:
        d = self.dialect
        yield self._new_user(r["user_id"], now)
        values = [d.json(r[c]) if c in PERSON_LIST_COLUMNS else r[c] for c in PERSON_COLUMNS]
        written: int = yield Q(  # natural key: the unique index on (user_id, lower(display_name))
            f"INSERT INTO persons (user_id, {', '.join(PERSON_COLUMNS)}, created_at, updated_at)"
            f" VALUES (%s, {_values(len(PERSON_COLUMNS))}, %s, %s) ON CONFLICT DO NOTHING",
            [r["user_id"], *values, d.time(r["created_at"]), d.time(r["updated_at"])])
        return written > 0

    def _restore_promotion(self, r: Mapping[str, Any], model: str | None, now: datetime) -> Op[bool | int]:
        """``item_id``: the item's id here (the operation maps the exported one; None: not found)."""
        d = self.dialect
        if r["item_id"] is None:
            return False
        fact_id = None
        if r["fact"] is not None:
            rows = yield Q(f"SELECT id FROM facts WHERE user_id = %s AND {d.null_safe_eq.format(column='agent_id')}"
                           " AND category = %s AND key = %s",
                           [r["user_id"], r["fact"].get("agent_id"), r["fact"]["category"], r["fact"]["key"]])
            if not rows:
                raise StorageError(f"the promotion of item {r['item']} comes before its fact record")
            fact_id = rows[0]["id"]
        # the WHERE also settles SQLite's reading of ON CONFLICT after a SELECT
        written: int = yield Q(
            "INSERT INTO promotions (user_id, item_id, fact_id, promoted_at) SELECT user_id, id, %s, %s"
            " FROM items WHERE user_id = %s AND id = %s ON CONFLICT DO NOTHING",
            [fact_id, d.time(r["promoted_at"]), r["user_id"], r["item_id"]])
        return written > 0

    def _restore_theme(self, r: Mapping[str, Any], model: str | None, now: datetime) -> Op[bool | int]:
        d = self.dialect
        yield self._new_user(r["user_id"], now)
        written: int = yield Q("INSERT INTO themes (user_id, slug, display_name, description, created_at, updated_at)"
                               " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                               [r["user_id"], r["slug"], r["display_name"], r["description"], d.time(r["created_at"]),
                                d.time(r["updated_at"])])
        if not written and r["description"] is not None:  # a stored theme keeps its description, or takes this one
            yield Q("UPDATE themes SET description = %s WHERE user_id = %s AND slug = %s AND description IS NULL",
                    [r["description"], r["user_id"], r["slug"]])
        return written > 0

    def _restore_items(self, items: list[Mapping[str, Any]], fact_ids: list[int | None], model: str | None,
                       now: datetime) -> Op[list[int]]:
        """Insert items with their own times (and their vectors as exported, or pending under
        ``model``); their new ids."""
        d = self.dialect
        themes = sorted({(r["user_id"], r["theme"]) for r in items})
        yield Q(_NEW_USER, [(u, d.time(now)) for u in sorted({u for u, _ in themes})], many=True)
        for user_id, slug in themes:
            yield ensure_theme(d, user_id, slug, now)
        ids = yield from self._reserve_item_ids(len(items))
        yield Q(f"INSERT INTO items ({', '.join(_ITEM_COLUMNS)})"
                f" VALUES ({_values(len(_ITEM_COLUMNS))})",
                [(r["user_id"], i, r["theme"], r["item_type"], r["title"], r["content"], d.json(r["tags"]), r["status"],
                  r["pinned"], r["source"], d.json(r["source_ref"]), r["person"], r["confidence"],
                  d.time(r["observed_at"]), d.time(r["expires_at"]), d.json(r["metadata"] or {}), r["context"], f,
                  d.time(r["created_at"]), d.time(r["updated_at"]), r.get("agent_id"), r.get("run_id"),
                  r.get("namespace"), r.get("key"), r.get("ttl_minutes")) for i, r, f in zip(ids, items, fact_ids)],
                many=True)
        if not self.has_vector:  # without pgvector no vector is stored (the store runs lexical-only)
            return ids
        ready: list[tuple[str, int, str, np.ndarray]] = []
        pending: list[tuple[str, int, str, Any]] = []
        for i, r in zip(ids, items):
            emb: Mapping[str, Any] | None = r.get("embedding")
            # a vector is kept as exported (under its own model); re-embedded if that is not ours
            if emb and emb["vector"] is not None:
                ready.append((r["user_id"], i, emb["model"], emb["vector"]))
            elif model is not None:
                pending.append((r["user_id"], i, model, d.time(now)))
        if ready:
            yield from self._restore_vectors(ready, now)
        if pending:
            yield Q("INSERT INTO embeddings (user_id, item_id, model, state, updated_at)"
                    " VALUES (%s, %s, %s, 'pending', %s)", pending, many=True)
        return ids

    def _restore_fact(self, r: Mapping[str, Any], model: str | None, now: datetime) -> Op[bool | int]:
        d, uid = self.dialect, r["user_id"]
        yield self._new_user(uid, now)
        rows: list[Row] = yield Q(
            "INSERT INTO facts (user_id, category, key, value, source, confidence, source_context,"
            " source_session_id, source_message_id, person, expires_at, last_verified_at, created_at,"
            f" updated_at, agent_id, run_id, observed_at) VALUES ({_values(17)})"
            " ON CONFLICT (user_id, (coalesce(agent_id, '')), category, key) DO NOTHING RETURNING id",
            [uid, r["category"], r["key"], r["value"], r["source"], r["confidence"], r["source_context"],
                        r["source_session_id"], r["source_message_id"], r["person"], d.time(r["expires_at"]),
                        d.time(r["last_verified_at"]), d.time(r["created_at"]), d.time(r["updated_at"]),
                        r.get("agent_id"), r.get("run_id"), d.time(r.get("observed_at") or r["updated_at"])])
        if not rows:
            return False
        fact_id = rows[0]["id"]
        if r["history"]:
            yield Q("INSERT INTO fact_history (user_id, fact_id, value, source, confidence, source_context, valid_from,"
                    f" valid_to, source_session_id, source_message_id) VALUES ({_values(10)})",
                    [(uid, fact_id, h["value"], h["source"], h["confidence"], h["source_context"],
                      d.time(h["valid_from"]), d.time(h["valid_to"]), h.get("source_session_id"),
                      h.get("source_message_id")) for h in r["history"]], many=True)
        if not r["item"]:
            return True
        (item_id,) = yield from self._restore_items([r["item"]], [fact_id], model, now)
        yield Q("UPDATE facts SET item_id = %s WHERE user_id = %s AND id = %s", [item_id, uid, fact_id])
        return item_id

    def _restore_summary(self, r: Mapping[str, Any], model: str | None, now: datetime) -> Op[bool | int]:
        d, uid, created = self.dialect, r["user_id"], self.dialect.time(r["created_at"])
        yield self._new_user(uid, now)
        yield Q(f"SELECT id FROM users WHERE id = %s{d.for_update}", [uid])  # serialises version numbers
        taken = r["version"] is None or (yield Q("SELECT 1 AS taken FROM summaries WHERE user_id = %s AND version = %s",
                                                 [uid, r["version"]]))
        # a free version number is new here; else the same time and text is this version imported before
        # (one text may come back later at the same instant: the summary follows the facts)
        if taken and (yield Q("SELECT 1 AS found FROM summaries WHERE user_id = %s AND created_at = %s"
                              " AND content = %s", [uid, created, r["content"]])):
            return False
        if taken:
            yield from self._append_summary(uid, r["content"], created)
        else:
            yield Q("INSERT INTO summaries (user_id, version, content, created_at) VALUES (%s, %s, %s, %s)",
                    [uid, r["version"], r["content"], created])
        return True

    def _restore_session(self, r: Mapping[str, Any], model: str | None, now: datetime) -> Op[bool | int]:
        d = self.dialect
        yield self._new_user(r["user_id"], now)
        written: int = yield Q(
            f"INSERT INTO session_state (user_id, session_id, {', '.join(_SESSION_COLUMNS)})"
            f" VALUES (%s, %s, {_values(len(_SESSION_COLUMNS))}) ON CONFLICT (user_id, session_id) DO NOTHING",
            [r["user_id"], r["session_id"],
             *(d.time(r.get(c)) if c in _TIME_COLUMNS else r.get(c) for c in _SESSION_COLUMNS)])
        return written > 0

    def _restore_message(self, r: Mapping[str, Any], model: str | None, now: datetime) -> Op[bool | int]:
        d = self.dialect
        if not (yield Q("SELECT 1 AS found FROM session_state WHERE user_id = %s AND session_id = %s",
                        [r["user_id"], r["session_id"]])):
            raise StorageError(f"message {r['seq']} of session {r['session_id']!r} comes before its session record")
        written: int = yield Q(
            "INSERT INTO messages (user_id, session_id, seq, role, content, name, tool_calls, tool_call_id, created_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            [r["user_id"], r["session_id"], r["seq"], r["role"], r["content"], r["name"],
             d.json(r["tool_calls"]) if r["tool_calls"] else None, r["tool_call_id"], d.time(r["created_at"])])
        return written > 0

    def _restore_llm_call(self, r: Mapping[str, Any], model: str | None, now: datetime) -> Op[bool | int]:
        d = self.dialect
        yield self._new_user(r["user_id"], now)
        rows: list[Count] = yield Q(
            f"SELECT count(*) AS n FROM llm_calls WHERE user_id = %s"
            f" AND {d.null_safe_eq.format(column='session_id')} AND purpose = %s"
            f" AND {d.null_safe_eq.format(column='model')} AND created_at = %s AND input_tokens = %s"
            " AND output_tokens = %s",
            [r["user_id"], r["session_id"], r["purpose"], r["model"], d.time(r["created_at"]),
                        r["input_tokens"], r["output_tokens"]])
        if rows[0]["n"] >= r["occurrence"]:
            return False
        yield Q("INSERT INTO llm_calls (user_id, session_id, purpose, model, input_tokens, output_tokens, estimated, ok,"
                f" error, created_at) VALUES ({_values(10)})",
                [r["user_id"], r["session_id"], r["purpose"], r["model"], r["input_tokens"], r["output_tokens"],
                 bool(r["estimated"]), bool(r["ok"]), r["error"], d.time(r["created_at"])])
        return True
