"""PostgreSQL side of export/import: keyset-paged reads of whole tables, and restoring records with
their own timestamps and history. Generator methods mixed into ``PostgresQueries`` (one
transaction per call); values always travel as parameters, identifiers via ``sql.Identifier``.

An import runs its batches of ``restore_records`` inside ``in_one_transaction`` (one call, so one
transaction); the model's vector index is ensured after the commit. ``restore_records`` skips
every record whose natural key is already there, so importing a file twice adds nothing
(docs/export-format.md).
"""

from __future__ import annotations

import inspect
from datetime import datetime
from typing import Any, Callable, Sequence

import numpy as np
from psycopg import sql
from psycopg.types.json import Jsonb

from ...calls import BackendCall
from ...errors import StorageError
from ...sansio import Op, advance, operation
from ...transfer_format import EXPORT_TABLES, item_digest
from ...core.contract import PERSON_COLUMNS, PERSON_LIST_COLUMNS
from .sql import Q, row_times

_ITEM_COLUMNS = ("user_id, id, theme, type, title, content, tags, status, pinned, source, source_ref, person,"
                 " confidence, observed_at, expires_at, metadata, context, fact_id, created_at, updated_at, agent_id, run_id,"
                 " namespace, ext_key, ttl_minutes")


def _parse_vector(text: str | None) -> np.ndarray | None:
    """pgvector's text form ``[1,2]`` or a ``real[]``'s ``{1,2}``."""
    if text is None:
        return None
    body = text.strip()[1:-1]
    return np.array([float(x) for x in body.split(",")] if body else [], dtype=np.float32)


def _query_generator(cls: type, name: str) -> Callable[..., Op]:
    """The generator method ``name`` of the query classes (the runner's public methods of that
    name each run in their own transaction)."""
    for klass in cls.__mro__:
        fn = klass.__dict__.get(name)
        if fn is not None and inspect.isgeneratorfunction(fn) and getattr(fn, "_navi_operation", False):
            return fn  # type: ignore[no-any-return]
    raise TypeError(f"a transaction plan may only call backend methods, not {name!r}")


class PostgresTransferQueries:
    """Export reads and import writes (mixed into ``PostgresQueries``)."""

    has_vector: bool
    _ensure_vector_index: Any
    _item_ids: Any

    @operation
    def export_page(self, kind: str, user_id: str | None, after: Sequence[Any] | None, limit: int) -> Op:
        """Rows of one table (``transfer_format.EXPORT_TABLES``) of a user (users: all when None),
        in key order after the key ``after``."""
        table, keys = EXPORT_TABLES[kind]
        owner = "id" if kind == "users" else "user_id"
        parts, params = [sql.SQL("TRUE")], []
        if user_id is not None:
            parts.append(sql.SQL("{} = %s").format(sql.Identifier(owner)))
            params.append(user_id)
        columns = sql.SQL(", ").join(sql.Identifier(k) for k in keys)
        if after is not None:
            parts.append(sql.SQL("({}) > ({})").format(columns, sql.SQL(", ").join(sql.Placeholder() * len(keys))))
            params.extend(after)
        select = sql.SQL("id, created_at, household_mode, timezone, memory_off_since") if kind == "users" \
            else sql.SQL("*")
        rows = yield Q(sql.SQL("SELECT {} FROM {} WHERE {} ORDER BY {} LIMIT %s").format(
            select, sql.Identifier(table), sql.SQL(" AND ").join(parts), columns), [*params, limit])
        out = [row_times(dict(r)) for r in rows]
        if kind == "messages":
            for row in out:
                row["tool_calls"] = row["tool_calls"] or []
        return out

    @operation
    def export_items(self, user_id: str, after_id: int, limit: int, ids: Sequence[int] | None,
                     with_vectors: bool) -> Op:
        """Items with their embedding (and vector, when asked): the given ``ids``, or else the
        items after ``after_id`` that are not the searchable copy of a fact (those go with the fact)."""
        vector = sql.SQL(", e.embedding::text AS emb_vector" if with_vectors else "")
        head = sql.SQL("SELECT {}, e.model AS emb_model, e.state AS emb_state, e.dimensions AS emb_dims,"
                       " e.error AS emb_error{} FROM items i LEFT JOIN embeddings e ON e.user_id = %s"
                       " AND e.item_id = i.id WHERE i.user_id = %s").format(
            sql.SQL(", ".join(f"i.{c.strip()}" for c in _ITEM_COLUMNS.split(","))), vector)
        # the user named on every table, not only through the joins: Citus then routes it to one shard
        if ids is not None:
            rows = yield Q(head + sql.SQL(" AND i.id = ANY(%s) ORDER BY i.id"), [user_id, user_id, list(ids)])
        else:
            rows = yield Q(head + sql.SQL(
                " AND i.id > %s AND (i.fact_id IS NULL OR NOT EXISTS (SELECT 1 FROM facts f WHERE f.user_id = %s"
                " AND f.id = i.fact_id)) ORDER BY i.id LIMIT %s"), [user_id, user_id, after_id, user_id, limit])
        out = []
        for row in rows:
            d = row_times(dict(row))
            d["emb_vector"] = _parse_vector(d.get("emb_vector"))
            d["key"] = d.pop("ext_key", None)
            out.append(d)
        return out

    # -- import ---------------------------------------------------------------------------------

    @operation
    def in_one_transaction(self, make_plan: Callable[[], Op]) -> Op:
        """Run a plan (a generator yielding backend calls ``db.<method>(...)``) as this one call,
        so in one transaction on one connection; after a lost conflict the runner builds the
        plan again from ``make_plan``."""
        plan = make_plan()
        done, call = advance(plan, None)
        while not done:
            if not isinstance(call, BackendCall):
                raise TypeError(f"a transaction plan may only call backend methods, not {call!r}")
            done, call = advance(plan, (yield from _query_generator(type(self), call.method)(self, **call.kwargs)))
        return call

    @operation
    def lock_user_writes(self, user_id: str) -> Op:
        """Take the user's write lock until the transaction ends (a plan's check and insert then see
        no concurrent writer of the same user; other users never wait)."""
        yield Q("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", ["navi-memory writes of " + user_id])

    @operation
    def ensure_vector_index(self, model: str, dimensions: int) -> Op:
        """The model's vector index, created if missing (after an import's commit: created inside
        its transaction, the index would wait on the import's own locks)."""
        yield from self._ensure_vector_index(model, dimensions)

    @operation
    def max_item_id(self) -> Op:
        rows = yield Q("SELECT coalesce(max(id), 0) AS n FROM items")
        return rows[0]["n"]

    @operation
    def item_digests(self, user_id: str, created_at: datetime, upto_id: int) -> Op:
        """(id, ``item_digest``) of each item of the user created at that instant, with id <=
        ``upto_id``, in id order."""
        rows = yield Q("SELECT id, type, content FROM items WHERE user_id = %s AND created_at = %s AND id <= %s"
                       " ORDER BY id", [user_id, created_at, upto_id])
        return [(r["id"], item_digest(r["type"], r["content"])) for r in rows]

    @operation
    def restore_records(self, records: Sequence[dict], model: str | None, now: datetime) -> Op:
        """Write a batch of checked records in one transaction; per record, what was written:
        False when it was already there (skipped), else True, or for items the new id, for facts
        the id of the fact's new searchable item (or True when it has none)."""
        out: list[Any] = []
        run: list[dict] = []  # consecutive items go in together (a few statements, not a few per item)
        for r in [*records, None]:
            if r is not None and r["type"] == "item":  # the operation has ruled out duplicates
                run.append(r)
                continue
            if run:
                out.extend((yield from self._insert_items(run, [None] * len(run), model, now)))
                run = []
            if r is not None:
                out.append((yield from getattr(self, f"_restore_{r['type']}")(r, model, now)))
        return out

    def _user(self, user_id: str, now: datetime) -> Op:
        yield Q("INSERT INTO users (id, created_at) VALUES (%s, %s) ON CONFLICT DO NOTHING", [user_id, now])

    def _restore_user(self, r: dict, model: str | None, now: datetime) -> Op:
        added = (yield Q("INSERT INTO users (id, created_at, household_mode, timezone, memory_off_since)"
                         " VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                         [r["user_id"], r["created_at"], r["household_mode"], r["timezone"],
                          r["memory_off_since"]])) > 0
        if not added:  # a stored user only ever widens to multi, keeps a time zone it has, and
            # takes an imported "memory off" (an import never turns memory back on)
            yield Q("UPDATE users SET household_mode = CASE WHEN %s = 'multi' THEN 'multi' ELSE household_mode END,"
                    " timezone = coalesce(timezone, %s), memory_off_since = coalesce(memory_off_since, %s)"
                    " WHERE id = %s", [r["household_mode"], r["timezone"], r["memory_off_since"], r["user_id"]])
        return added

    def _restore_person(self, r: dict, model: str | None, now: datetime) -> Op:
        yield from self._user(r["user_id"], now)
        query = sql.SQL("INSERT INTO persons (user_id, {}, created_at, updated_at) VALUES (%s, {}, %s, %s)"
                        " ON CONFLICT DO NOTHING").format(  # natural key: the index on (user_id, lower(display_name))
            sql.SQL(", ").join(map(sql.Identifier, PERSON_COLUMNS)),
            sql.SQL(", ").join(sql.Placeholder() * len(PERSON_COLUMNS)))
        values = [Jsonb(r[c]) if c in PERSON_LIST_COLUMNS else r[c] for c in PERSON_COLUMNS]
        return (yield Q(query, [r["user_id"], *values, r["created_at"], r["updated_at"]])) > 0

    def _restore_promotion(self, r: dict, model: str | None, now: datetime) -> Op:
        """``item_id``: the item's id here (the operation maps the exported one; None: not found)."""
        if r["item_id"] is None:
            return False
        fact_id = None
        if r["fact"] is not None:
            rows = yield Q("SELECT id FROM facts WHERE user_id = %s AND agent_id IS NOT DISTINCT FROM %s"
                           " AND category = %s AND key = %s",
                           [r["user_id"], r["fact"].get("agent_id"), r["fact"]["category"], r["fact"]["key"]])
            if not rows:
                raise StorageError(f"the promotion of item {r['item']} comes before its fact record")
            fact_id = rows[0]["id"]
        return (yield Q("INSERT INTO promotions (user_id, item_id, fact_id, promoted_at) SELECT user_id, id, %s, %s"
                        " FROM items WHERE user_id = %s AND id = %s ON CONFLICT DO NOTHING",
                        [fact_id, r["promoted_at"], r["user_id"], r["item_id"]])) > 0

    def _restore_theme(self, r: dict, model: str | None, now: datetime) -> Op:
        yield from self._user(r["user_id"], now)
        return (yield Q("INSERT INTO themes (user_id, slug, display_name, description, created_at, updated_at)"
                        " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                        [r["user_id"], r["slug"], r["display_name"], r["description"], r["created_at"],
                         r["updated_at"]])) > 0

    def _insert_items(self, items: list[dict], fact_ids: list[int | None], model: str | None, now: datetime) -> Op:
        ids = yield from self._item_ids({(r["user_id"], r["theme"]) for r in items}, len(items), now)
        yield Q("INSERT INTO items (user_id, id, theme, type, title, content, tags, status, pinned, source, source_ref,"
                " person, confidence, observed_at, expires_at, metadata, context, fact_id, created_at, updated_at,"
                " agent_id, run_id, namespace, ext_key, ttl_minutes) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s,"
                " %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [(r["user_id"], i, r["theme"], r["item_type"], r["title"], r["content"], Jsonb(r["tags"]), r["status"],
                  r["pinned"], r["source"], None if r["source_ref"] is None else Jsonb(r["source_ref"]), r["person"],
                  r["confidence"], r["observed_at"], r["expires_at"], Jsonb(r["metadata"] or {}), r["context"], f,
                  r["created_at"], r["updated_at"], r.get("agent_id"), r.get("run_id"), r.get("namespace"),
                  r.get("key"), r.get("ttl_minutes")) for i, r, f in zip(ids, items, fact_ids)], many=True)
        if not self.has_vector:  # without pgvector no vector is stored (the store runs lexical-only)
            return ids
        ready, pending = [], []
        for i, r in zip(ids, items):
            emb = r.get("embedding")
            vector = emb["vector"] if emb else None
            if vector is not None:  # kept as exported (under its own model); re-embedded if that is not ours
                ready.append((r["user_id"], i, emb["model"], int(vector.size), vector, now))
            elif model is not None:
                pending.append((r["user_id"], i, model, now))
        yield Q("INSERT INTO embeddings (user_id, item_id, model, dimensions, state, embedding, updated_at)"
                " VALUES (%s, %s, %s, %s, 'ready', %s::vector, %s)", ready, many=True)
        yield Q("INSERT INTO embeddings (user_id, item_id, model, state, updated_at) VALUES (%s, %s, %s, 'pending', %s)",
                pending, many=True)
        return ids

    def _restore_fact(self, r: dict, model: str | None, now: datetime) -> Op:
        uid = r["user_id"]
        yield from self._user(uid, now)
        rows = yield Q("INSERT INTO facts (user_id, category, key, value, source, confidence, source_context,"
                       " source_session_id, source_message_id, person, expires_at, last_verified_at, created_at,"
                       " updated_at, agent_id, run_id, observed_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s,"
                       " %s, %s, %s, %s, %s, %s) ON CONFLICT (user_id, (coalesce(agent_id, '')), category, key) DO NOTHING"
                       " RETURNING id",
                       [uid, r["category"], r["key"], r["value"], r["source"], r["confidence"], r["source_context"],
                        r["source_session_id"], r["source_message_id"], r["person"], r["expires_at"],
                        r["last_verified_at"], r["created_at"], r["updated_at"], r.get("agent_id"), r.get("run_id"),
                        r.get("observed_at") or r["updated_at"]])
        if not rows:
            return False
        fact_id = rows[0]["id"]
        if r["history"]:
            yield Q("INSERT INTO fact_history (user_id, fact_id, value, source, confidence, source_context, valid_from,"
                    " valid_to, source_session_id, source_message_id) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    [(uid, fact_id, h["value"], h["source"], h["confidence"], h["source_context"], h["valid_from"],
                      h["valid_to"], h.get("source_session_id"), h.get("source_message_id")) for h in r["history"]],
                    many=True)
        if not r["item"]:
            return True
        (item_id,) = yield from self._insert_items([r["item"]], [fact_id], model, now)
        yield Q("UPDATE facts SET item_id = %s WHERE user_id = %s AND id = %s", [item_id, uid, fact_id])
        return item_id

    def _restore_summary(self, r: dict, model: str | None, now: datetime) -> Op:
        uid = r["user_id"]
        yield from self._user(uid, now)
        yield Q("SELECT id FROM users WHERE id = %s FOR UPDATE", [uid])  # serialises version numbers
        taken = r["version"] is None or (yield Q("SELECT 1 FROM summaries WHERE user_id = %s AND version = %s",
                                                 [uid, r["version"]]))
        # a free version number is new here; else the same time and text is this version imported before
        if taken and (yield Q("SELECT 1 FROM summaries WHERE user_id = %s AND created_at = %s AND content = %s",
                              [uid, r["created_at"], r["content"]])):
            return False
        if taken:
            yield Q("INSERT INTO summaries (user_id, version, content, created_at) SELECT %s, coalesce(max(version), 0)"
                    " + 1, %s, %s FROM summaries WHERE user_id = %s", [uid, r["content"], r["created_at"], uid])
        else:
            yield Q("INSERT INTO summaries (user_id, version, content, created_at) VALUES (%s, %s, %s, %s)",
                    [uid, r["version"], r["content"], r["created_at"]])
        return True

    def _restore_session(self, r: dict, model: str | None, now: datetime) -> Op:
        yield from self._user(r["user_id"], now)
        return (yield Q(
            "INSERT INTO session_state (user_id, session_id, extracted_at, updated_at, created_at, last_active, state,"
            " error, attempts, claimed_at, message_count, user_messages, extracted_seq, extracted_user_messages,"
            " chunked_seq, agent_id, run_id) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (user_id, session_id) DO NOTHING",
            [r["user_id"], r["session_id"], r["extracted_at"], r["updated_at"], r["created_at"], r["last_active"],
             r["state"], r["error"], r["attempts"], r["claimed_at"], r["message_count"], r["user_messages"],
             r["extracted_seq"], r["extracted_user_messages"], r["chunked_seq"], r.get("agent_id"),
             r.get("run_id")])) > 0

    def _restore_message(self, r: dict, model: str | None, now: datetime) -> Op:
        if not (yield Q("SELECT 1 FROM session_state WHERE user_id = %s AND session_id = %s",
                        [r["user_id"], r["session_id"]])):
            raise StorageError(f"message {r['seq']} of session {r['session_id']!r} comes before its session record")
        return (yield Q(
            "INSERT INTO messages (user_id, session_id, seq, role, content, name, tool_calls, tool_call_id, created_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            [r["user_id"], r["session_id"], r["seq"], r["role"], r["content"], r["name"],
             Jsonb(r["tool_calls"]) if r["tool_calls"] else None, r["tool_call_id"], r["created_at"]])) > 0

    def _restore_llm_call(self, r: dict, model: str | None, now: datetime) -> Op:
        yield from self._user(r["user_id"], now)
        rows = yield Q("SELECT count(*) AS n FROM llm_calls WHERE user_id = %s AND session_id IS NOT DISTINCT FROM %s"
                       " AND purpose = %s AND model IS NOT DISTINCT FROM %s AND created_at = %s AND input_tokens = %s"
                       " AND output_tokens = %s",
                       [r["user_id"], r["session_id"], r["purpose"], r["model"], r["created_at"], r["input_tokens"],
                        r["output_tokens"]])
        if rows[0]["n"] >= r["occurrence"]:
            return False
        yield Q("INSERT INTO llm_calls (user_id, session_id, purpose, model, input_tokens, output_tokens, estimated, ok,"
                " error, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [r["user_id"], r["session_id"], r["purpose"], r["model"], r["input_tokens"], r["output_tokens"],
                 r["estimated"], r["ok"], r["error"], r["created_at"]])
        return True
