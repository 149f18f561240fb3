"""Export and import of a store's contents (docs/export-format.md), written once for both APIs.

``export`` streams records page by page to a sink (the CLI writes them as JSON Lines).
``import_file`` checks every line of a file first and writes only when all are valid, then
writes them all in one transaction (``in_one_transaction``: a failure half-way writes nothing);
records already present (by natural key) are skipped, so importing the same file again adds
nothing. Imported items are embedded with the store's
model unless their exported vector was made by that same model.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

from .. import transfer_format as fmt
from ..core import timeline
from ..core import validation as v
from ..calls import EmbedDocuments, db
from ..core.contract import embedding_text, fact_item_content
from ..core.timeutil import EARLIEST
from ..errors import EmbeddingError, NotFoundError, ValidationError
from ..models import FACT_SOURCES, _Record
from .facts import FactOperations
from .memory import MemoryOperations
from .shared import EMBED_BATCH, Shared
from ..core.persons import person
from ..sansio import Op, operation
from ..transfer_links import FileLinks, Household, household_problem

log = logging.getLogger("navi_memory.transfer")

PAGE = 500
ANY_ID = 2 ** 63 - 1  # no upper bound on item ids
Lines = Callable[[], Iterable[tuple[str, Mapping[str, Any]]]]
IdMap = Callable[[str, int, int], Any]
# (user, exported item id) -> the item's id in this store, or how to find it when the import
# skipped the item as already there: (created_at, digest of type and content, occurrence)
ItemIds = dict[tuple[str, int], Any]


@dataclass(frozen=True)
class _Options:
    user_map: Mapping[str, str] | None
    batch_size: int
    embed: bool
    skip_unknown: bool
    id_map: IdMap | None
    progress: Callable[[int, int], None] | None = None


@dataclass
class TransferReport(_Record):
    """What an import (or export) did: records ``added`` and ``skipped`` (already there) per type,
    items embedded now or left for ``backfill`` (``embed_failed``), unknown records ignored."""

    added: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    embedded: int = 0
    embed_failed: int = 0
    unknown: int = 0
    records: int = 0
    # statements of facts already on file (their values and history) that took their place in the
    # stored fact by when they were said: a newer one became its value, an older one its history
    # (in the import's transaction: a failure merging writes nothing of the import)
    merged: int = 0


def read_jsonl(path: str | Path) -> Lines:
    """A re-readable source of (``line N``, record) pairs from a JSON Lines file."""

    def lines() -> Iterator[tuple[str, Mapping[str, Any]]]:
        try:
            handle = open(path, encoding="utf-8-sig")  # a leading byte order mark (Windows editors) is dropped
        except OSError as exc:
            raise ValidationError(f"cannot read {path}: {exc.strerror or exc}") from exc
        with handle:
            number = 0
            while True:
                number += 1
                try:
                    line = handle.readline(fmt.MAX_LINE + 1)
                except UnicodeDecodeError as exc:
                    raise ValidationError(f"line {number}: not UTF-8 text") from exc
                if not line:
                    return
                if not line.strip():
                    continue
                try:
                    yield f"line {number}", fmt.loads(line)
                except ValidationError as exc:
                    raise ValidationError(f"line {number}: {exc}") from exc

    return lines


def _iso(value: Any) -> Any:
    return value.isoformat() if hasattr(value, "isoformat") else value


def _item_record(row: dict, with_vectors: bool, nested: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {} if nested else {"type": "item", "user_id": row["user_id"]}
    out.update({"id": row["id"], "item_type": row["type"], "theme": row["theme"], "title": row["title"],
                "content": row["content"], "context": row.get("context"), "tags": list(row["tags"] or []),
                "status": row["status"], "pinned": bool(row["pinned"]), "source": row["source"],
                "source_ref": row["source_ref"], "person": row["person"], "confidence": row["confidence"],
                "metadata": row["metadata"] or {}, "agent_id": row.get("agent_id"), "run_id": row.get("run_id"),
                "namespace": row.get("namespace"), "key": row.get("key"), "ttl_minutes": row.get("ttl_minutes")})
    for name in ("observed_at", "expires_at", "created_at", "updated_at"):
        out[name] = _iso(row[name])
    out["embedding"] = None
    if row.get("emb_state"):
        out["embedding"] = {"model": row["emb_model"], "state": row["emb_state"], "dimensions": row["emb_dims"],
                            "error": row["emb_error"]}
        if with_vectors and row.get("emb_vector") is not None:
            out["embedding"]["vector"] = [float(x) for x in row["emb_vector"]]
    return out


def _plain(kind: str, row: dict, drop: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": kind, **{k: _iso(val) for k, val in row.items() if k not in drop}}


def _promotion_record(row: dict, fact_keys: dict[int, dict[str, str]]) -> dict[str, Any]:
    """A promotion names its item by its exported id and its fact by its natural key (null: the
    fact was deleted since)."""
    return {"type": "promotion", "user_id": row["user_id"], "item": row["item_id"],
            "fact": None if row["fact_id"] is None else fact_keys.get(row["fact_id"]),
            "promoted_at": _iso(row["promoted_at"])}


class _ItemsBefore:
    """How many items like a record the store held before the import began (ids up to the highest
    id then), read once per (user, creation time) group: the items of one bulk load share their
    creation time, and checking them one by one would rescan the group for each."""

    GROUPS = 64

    def __init__(self, upto_id: int) -> None:
        self.upto_id = upto_id
        self.groups: dict[tuple[str, Any], dict[bytes, int]] = {}

    def count(self, record: dict) -> Op:
        if self.upto_id == 0:  # an empty store
            return 0
        group = (record["user_id"], record["created_at"])
        if group not in self.groups:
            if len(self.groups) >= self.GROUPS:
                self.groups.pop(next(iter(self.groups)))
            counts: dict[bytes, int] = {}
            for _, digest in (yield db.item_digests(user_id=group[0], created_at=group[1], upto_id=self.upto_id)):
                counts[digest] = counts.get(digest, 0) + 1
            self.groups[group] = counts
        return self.groups[group].get(fmt.item_digest(record["item_type"], record["content"]), 0)


class TransferOperations:
    """Export/import (mixed into the store classes like ``SessionOperations``)."""

    def __init__(self, shared: Shared, memory: MemoryOperations, facts: FactOperations) -> None:
        self._shared = shared
        self._memory = memory
        self._facts = facts

    # -- export ----------------------------------------------------------------------------------

    def _pages(self, kind: str, user_id: str | None, page: int) -> Op:
        """All rows of a table for a user, read page by page (keyset)."""
        keys = fmt.EXPORT_TABLES[kind][1]
        rows, after = [], None
        while True:
            batch = yield db.export_page(kind=kind, user_id=user_id, after=after, limit=page)
            rows.extend(batch)
            if len(batch) < page:
                return rows
            after = [batch[-1][k] for k in keys]

    def _stream(self, kind: str, user_id: str, page: int, emit: Callable[[dict], None], record_type: str,
                drop: tuple[str, ...] = (), convert: Callable[[list[dict]], Op] | None = None,
                shape: Callable[[dict], dict] | None = None) -> Op:
        """Emit a table's rows of a user page by page, as records (``convert`` reads what they
        need, ``shape`` makes one record of one row)."""
        keys, after = fmt.EXPORT_TABLES[kind][1], None
        shape = shape or (lambda row: _plain(record_type, row, drop))
        while True:
            batch = yield db.export_page(kind=kind, user_id=user_id, after=after, limit=page)
            records = (yield from convert(batch)) if convert else [shape(r) for r in batch]
            for record in records:
                emit(record)
            if len(batch) < page:
                return
            after = [batch[-1][k] for k in keys]

    @operation
    def export(self, sink: Callable[[dict[str, Any]], Any], *, user_id: str | None = None, all_users: bool = False,
               with_vectors: bool = False, page_size: int = PAGE) -> Op[TransferReport]:
        """Stream one user's memory (or everyone's with ``all_users=True``) to ``sink``, one
        JSON-ready dict per call: the header first, then the records (docs/export-format.md).
        ``with_vectors`` adds the embedding vectors. Returns a ``TransferReport`` (counts in ``added``)."""
        page = v.limit(page_size, 10_000, "page_size")
        uid = None if all_users and user_id is None else v.user_id(user_id)
        users = yield from self._pages("users", uid, page)
        if uid is not None and not users:
            raise NotFoundError(f"nothing is stored for user {uid!r}")
        report = TransferReport()

        def emit(record: dict) -> None:
            report.added[record["type"]] = report.added.get(record["type"], 0) + 1
            report.records += 1
            sink(record)

        sink(fmt.header(self._shared.model, self._shared.now(), with_vectors, [u["id"] for u in users]))
        for user in users:
            yield from self._export_user(user, page, with_vectors, emit)
        return report

    def _export_user(self, user: dict, page: int, with_vectors: bool, emit: Callable[[dict], None]) -> Op:
        uid = user["id"]
        record = {"type": "user", "user_id": uid, "created_at": _iso(user["created_at"]),
                  "household_mode": user["household_mode"]}
        for name in ("timezone", "household_name", "locale"):  # absent: none of the user's own
            if user[name] is not None:
                record[name] = user[name]
        if user["memory_off_since"] is not None:  # the user's choice travels with their data
            record["memory_off_since"] = _iso(user["memory_off_since"])
        emit(record)
        yield from self._stream("persons", uid, page, emit, "person", ("id",))
        yield from self._stream("themes", uid, page, emit, "theme", ("id",))
        after = 0
        while True:
            rows = yield db.export_items(user_id=uid, after_id=after, limit=page, ids=None, with_vectors=with_vectors)
            for row in rows:
                emit(_item_record(row, with_vectors))
            if len(rows) < page:
                break
            after = rows[-1]["id"]
        fact_keys: dict[int, dict[str, str]] = {}  # what promotions name their fact by
        yield from self._stream("facts", uid, page, emit, "fact",
                                convert=lambda rows: self._fact_records(uid, rows, with_vectors, fact_keys))
        yield from self._stream("promotions", uid, page, emit, "promotion",
                                shape=lambda row: _promotion_record(row, fact_keys))
        yield from self._stream("summaries", uid, page, emit, "summary")
        yield from self._stream("sessions", uid, page, emit, "session")
        yield from self._stream("messages", uid, page, emit, "message")
        yield from self._stream("llm_calls", uid, page, emit, "llm_call", ("id",))

    def _fact_records(self, uid: str, rows: list[dict], with_vectors: bool, keys: dict[int, dict[str, str]]) -> Op:
        keys.update((r["id"], {"category": r["category"], "key": r["key"],
                               **({"agent_id": r["agent_id"]} if r.get("agent_id") else {})}) for r in rows)
        if not rows:
            return []
        history = yield db.fact_history(user_id=uid, fact_ids=[r["id"] for r in rows])
        item_ids = [r["item_id"] for r in rows if r["item_id"] is not None]
        items = {
            i["id"]: i
            for i in (
                (yield db.export_items(user_id=uid, after_id=0, limit=0, ids=item_ids, with_vectors=with_vectors))
                if item_ids
                else []
            )
        }
        out = []
        for row in rows:
            record = _plain("fact", row, ("id", "item_id"))
            record["history"] = [{k: _iso(h.get(k)) for k in ("value", "source", "confidence", "source_context",
                                                              "valid_from", "valid_to", "source_session_id",
                                                              "source_message_id")} for h in history[row["id"]]]
            item = items.get(row["item_id"])
            record["item"] = None if item is None else _item_record(item, with_vectors, nested=True)
            out.append(record)
        return out

    # -- import ----------------------------------------------------------------------------------

    @operation
    def import_file(self, path: str | Path, *, user_map: Mapping[str, str] | None = None, batch_size: int = PAGE,
                    embed: bool = True, skip_unknown: bool = False, id_map: IdMap | None = None,
                    progress: Callable[[int, int], None] | None = None) -> Op[TransferReport]:
        """Import an export file: every line is checked first (a bad line raises ``ValidationError``
        naming it, and nothing is written), then all records are written in one transaction, in
        steps of ``batch_size`` records; embedding follows the commit. ``user_map`` renames users
        ({old: new}); ``id_map(user_id, exported_id, new_id)`` is called for each item added, after
        the commit; ``progress(embedded, to_embed)`` after each embedding batch. Returns a
        ``TransferReport``. The file is read with blocking I/O, also by ``AsyncMemoryStore`` (an
        admin job, not a request path)."""
        options = _Options(user_map, batch_size, embed, skip_unknown, id_map, progress)
        return (yield from self._import(read_jsonl(path), options))

    @operation
    def import_records(self, records: Iterable[Mapping[str, Any]] | Lines, *,
                       user_map: Mapping[str, str] | None = None, batch_size: int = PAGE, embed: bool = True,
                       skip_unknown: bool = False, id_map: IdMap | None = None,
                       progress: Callable[[int, int], None] | None = None) -> Op[TransferReport]:
        """Import records given as dicts (the header first): a list, any iterable (read into a list
        first), or a function returning a fresh iterable of (label, record) pairs. Every record is
        checked before anything is written (like ``import_file``)."""
        if callable(records):
            source = records
        else:
            rows = records if isinstance(records, (list, tuple)) else list(records)
            source = lambda: ((f"record {n}", r) for n, r in enumerate(rows, 1))  # noqa: E731
        options = _Options(user_map, batch_size, embed, skip_unknown, id_map, progress)
        return (yield from self._import(source, options))

    def _checked(self, source: Lines, user_map: Mapping[str, str] | None, skip_unknown: bool,
                 report: TransferReport | None, links: FileLinks) -> Iterator[dict]:
        """The records of ``source`` checked and normalised, and their references to each other
        (``links``); ValidationError names the bad one."""
        header = None
        for label, raw in source():
            try:
                if header is None:
                    header = fmt.check_header(raw, skip_unknown)
                    # an export names its users: a line of anybody else was added to the file
                    allowed = None if header["users"] is None else header["users"] | set(user_map or ())
                    continue
                owner = v.user_id(raw.get("user_id")) if isinstance(raw, Mapping) else None
                if allowed is not None and owner is not None and owner not in allowed:
                    raise ValidationError(f"a record of user {owner!r}, who is neither in the file's header"
                                          " nor in the user map")
                record = fmt.check_record(raw, user_map)
                if record is not None:
                    for text in fmt.contents(record):
                        v.text(text, "content", self._shared.max_content_bytes, allow_empty=True)
                    links.see(record, label)
            except ValidationError as exc:
                raise ValidationError(f"{label}: {exc}") from exc
            if record is None:
                if not skip_unknown:
                    raise ValidationError(f"{label}: unknown record type {raw.get('type')!r}")
                if report is not None:
                    report.unknown += 1
                continue
            yield record
        if header is None:
            raise ValidationError("empty input: the first line must be the export header")

    def _import(self, source: Lines, options: _Options) -> Op:
        batch_size = v.limit(options.batch_size, 100_000, "batch_size")
        user_map = {v.user_id(k): v.user_id(val) for k, val in (options.user_map or {}).items()}
        links = FileLinks()
        vector_sizes: set[int] = set()  # of the store's own model, indexed once the rows are in
        users: set[str] = set()  # whose rows a killed or failed earlier import may have left pending
        for record in self._checked(source, user_map, options.skip_unknown, None, links):
            if isinstance(record.get("user_id"), str):
                users.add(record["user_id"])
            for item in _items_of(record):
                emb = item.get("embedding")
                if emb and emb["vector"] is not None and emb["model"] == self._shared.model:
                    vector_sizes.add(int(emb["vector"].size))
        yield from self._check_households(links.take_households())
        size = yield from self._vector_size(vector_sizes)
        # The writing pass runs inside one backend transaction: any failure (a record the checks
        # missed, a lost server, a full disk) writes nothing. A factory, as the backend may run it
        # again whole after a lost conflict; embedding and id_map wait for the commit.
        written = yield db.in_one_transaction(
            make_plan=lambda: self._write_plan(source, user_map, batch_size, options.skip_unknown, size)
        )
        report, to_embed, added, merged_users, fact_users = written
        for uid in sorted(fact_users | merged_users):  # facts written without the summary beside them
            yield from self._facts.follow.facts_changed(uid, removed=uid in merged_users)
        for size in sorted(vector_sizes):  # only of the store's own model, so there is one
            yield db.ensure_vector_index(model=self._shared.require_model(), dimensions=size)
        if options.id_map is not None:
            for uid, source_id, new_id in added:
                options.id_map(uid, source_id, new_id)
        if options.embed and self._shared.embed_on_write and self._shared.embedder is not None \
                and self._shared.model is not None:
            yield from self._embed_imported(report, to_embed, sorted(users), options.progress)
        log.info("import: %d records, added %s, skipped %s", report.records, report.added, report.skipped)
        return report

    def _embed_imported(self, report: TransferReport, to_embed: list[tuple[int, str, str]], users: list[str],
                        progress: Callable[[int, int], None] | None) -> Op:
        """Embed the rows this import added, then resume the rows of its users still without a
        ready vector (a killed import commits its rows and dies embedding them: importing the file
        again adds nothing, and said "embedded 0" while they stayed pending)."""
        assert self._shared.embedder is not None
        self._shared.embedder.reset_backoff()  # an explicit import always tries the provider
        for start in range(0, len(to_embed), EMBED_BATCH):
            stored, failed = yield from self._memory.embed_rows(to_embed[start:start + EMBED_BATCH])
            report.embedded += stored
            report.embed_failed += failed
            if progress is not None:
                progress(report.embedded + report.embed_failed, len(to_embed))
        if report.embed_failed:
            return  # the provider fails: its rows (state error) wait for the next import or backfill
        before = report.embedded + report.embed_failed
        for uid in users:
            def resumed(done: int, base: int = report.embedded + report.embed_failed) -> None:
                if progress is not None:
                    progress(base + done, max(len(to_embed), base + done))
            stored, failed = yield from self._memory.embed_pending(uid, EMBED_BATCH, resumed)
            report.embedded += stored
            report.embed_failed += failed
        if report.embedded + report.embed_failed > before:
            log.info("import: embedded %d rows an earlier import left pending",
                     report.embedded + report.embed_failed - before)

    def _write_plan(self, source: Lines, user_map: Mapping[str, str], batch_size: int, skip_unknown: bool,
                    vector_size: int | None) -> Op:
        """The writing pass, as backend calls only (run by ``in_one_transaction``): returns the
        report, the (item id, user, text) rows to embed, and the (user, exported id, new id) of
        items added."""
        report, ids = TransferReport(), {}
        seen: dict[Any, int] = {}
        batch: list[dict[str, Any]] = []
        written = _Written(report, vector_size=vector_size)
        known = _ItemsBefore((yield db.max_item_id()))
        keyed: set[tuple[str, str, str]] = set()  # keyed items written so far: (user, namespace, key)
        for record in self._checked(source, user_map, skip_unknown, report, FileLinks()):
            if record["type"] == "item" and record.get("key") is not None:  # natural key: namespace and key
                natural = (record["user_id"], record["namespace"], record["key"])
                if natural in keyed or (yield db.get_keyed(user_id=natural[0], namespace=natural[1], key=natural[2],
                                                           now=EARLIEST)) is not None:
                    report.records += 1
                    report.skipped["item"] = report.skipped.get("item", 0) + 1
                    continue
                keyed.add(natural)
            key = fmt.occurrence_key(record)
            if key is not None:  # the n-th identical row of the file is written if the store has fewer
                seen[key] = record["occurrence"] = seen.get(key, 0) + 1
            if record["type"] == "item" and record["occurrence"] <= (yield from known.count(record)):
                report.records += 1
                report.skipped["item"] = report.skipped.get("item", 0) + 1
                if record["source_id"] is not None:  # a promotion may name it: found again when needed
                    ids[(record["user_id"], record["source_id"])] = (
                        record["created_at"], fmt.item_digest(record["item_type"], record["content"]),
                        record["occurrence"])
                continue
            if record["type"] == "fact" and record["item"] == "derive":
                record["item"] = self._fact_item(record)
            if record["type"] == "promotion":
                if batch and batch[-1]["type"] != "promotion":  # its item needs its new id first
                    yield from self._write(batch, written, ids)
                    batch = []
                record["item_id"] = yield from self._item_id(ids, record)
            batch.append(record)
            if len(batch) >= batch_size:
                yield from self._write(batch, written, ids)
                batch = []
        if batch:
            yield from self._write(batch, written, ids)
        merged_users = yield from self._merge_facts(written)
        return report, written.to_embed, written.added, merged_users, \
            {u for u, told in written.summarised.items() if not told}

    def _merge_facts(self, written: "_Written") -> Op[set[str]]:
        """In the import's transaction, the statements of imported facts already on file, each
        placed in the stored fact by when it was said (``upsert_fact``'s checks and write, with
        ``observed_at``): a newer value replaces the stored one, an older one enters its history.
        Statements the stored timeline holds already change nothing, so importing a file again
        writes nothing. Returns the users whose facts changed (the summary follows after the commit)."""
        users, now = set[str](), self._shared.now()
        for r in written.on_file:
            uid, agent = r["user_id"], r.get("agent_id")
            for statement, at in [*((h, h["valid_from"]) for h in r["history"]), (r, r["observed_at"])]:
                stored = yield db.get_fact(user_id=uid, category=r["category"], key=r["key"], agent_id=agent)
                history = (yield db.fact_history(user_id=uid, fact_ids=[stored["id"]]))[stored["id"]] if stored else []
                if stored is not None and timeline.place(stored, history, statement, at).action == "unchanged":
                    continue
                fact = yield from self._facts.checked(
                    uid, now, category=r["category"], key=r["key"], value=statement["value"],
                    source=statement["source"] if statement["source"] in FACT_SOURCES else r["source"],
                    confidence=statement["confidence"], source_context=statement.get("source_context"),
                    source_session_id=statement.get("source_session_id"),
                    source_message_id=statement.get("source_message_id"), person=r["person"], expires_at=None,
                    expires_days=None, agent_id=agent, run_id=None, observed_at=at)
                action, row, _, _, mirror = yield from self._facts.write_fact(uid, fact, False, now)
                if action in ("added", "updated") and row.get("item_id"):
                    written.to_embed.append((row["item_id"], uid, mirror.content))
                written.report.merged += 1
                users.add(uid)
        return users

    def _check_households(self, households: dict[str, Household]) -> Op:
        """The file's persons against the households stored (read only): ValidationError names
        the first person that would break one."""
        for uid, household in households.items():
            if not household.persons:
                continue
            stored = [person(r) for r in (yield db.list_persons(user_id=uid))]
            problem = household_problem(household, stored, (yield db.household_mode(user_id=uid)))
            if problem is not None:
                raise ValidationError(problem)

    def _item_id(self, ids: ItemIds, promotion: dict) -> Op:
        """The id in this store of the item a promotion names (None: not found)."""
        ref = ids.get((promotion["user_id"], promotion["item"]))
        if not isinstance(ref, tuple):
            return ref
        created_at, digest, occurrence = ref  # the n-th identical item, as the import skipped it
        same = [
            i
            for i, d in (yield db.item_digests(user_id=promotion["user_id"], created_at=created_at, upto_id=ANY_ID))
            if d == digest
        ]
        return same[occurrence - 1] if len(same) >= occurrence else None

    def _fact_item(self, fact: dict) -> dict[str, Any]:
        """The searchable item ``upsert_fact`` would have made for this fact."""
        return {"user_id": fact["user_id"], "item_type": "fact", "theme": fact["category"], "title": None,
                "content": fact_item_content(fact["key"], fact["value"]), "context": None, "tags": [],
                "status": "active", "pinned": False, "source": fact["source"], "source_ref": None,
                "person": fact["person"], "confidence": fact["confidence"], "observed_at": fact["observed_at"],
                "expires_at": fact["expires_at"], "created_at": fact["created_at"], "updated_at": fact["updated_at"],
                "metadata": {"fact": {"category": fact["category"], "key": fact["key"], "value": fact["value"]}},
                "embedding": None, "agent_id": fact.get("agent_id"), "run_id": fact.get("run_id")}

    def _vector_size(self, sizes: set[int]) -> Op[int | None]:
        """The size of the store's vectors, when vectors of its model are to be taken in: a provider
        that declares none (``embedding_dimensions`` unset) is asked once, so a vector of another
        size is embedded again instead of stored ready and never found by a search."""
        embedder = self._shared.embedder
        if not sizes or embedder is None or embedder.dimensions is not None:
            return embedder.dimensions if embedder is not None else None
        try:
            probe = yield EmbedDocuments(["the size of this model's vectors"], model=self._shared.model)
        except EmbeddingError as exc:
            log.warning("import: the embedding provider did not answer (%s); the vectors imported are kept"
                        " without checking their size", exc)
            return None
        return int(probe[0].size)

    def _needs_embedding(self, item: dict, dims: int | None) -> bool:
        """True unless the item brings a vector of the store's own model (and size)."""
        emb = item.get("embedding")
        if self._shared.model is None:
            return False
        if not emb or emb["vector"] is None or emb["model"] != self._shared.model:
            return True
        if dims is not None and emb["vector"].size != dims:
            emb["vector"] = None  # a vector the store cannot search with: embed again
            return True
        return False

    def _write(self, batch: list[dict], written: "_Written", ids: ItemIds) -> Op:
        """Write a batch of the plan; note the ids of added items and what to embed."""
        for record in batch:  # drop vectors the store cannot use before they are written
            for item in _items_of(record):
                item["_embed"] = self._needs_embedding(item, written.vector_size)
        outcomes = yield db.restore_records(records=batch, model=self._shared.model, now=self._shared.now())
        report = written.report
        for record, outcome in zip(batch, outcomes):
            kind = record["type"]
            report.records += 1
            counts = report.added if outcome is not False else report.skipped
            counts[kind] = counts.get(kind, 0) + 1
            if outcome is False and kind == "fact":
                written.on_file.append(record)
            if outcome is not False and kind in ("fact", "summary"):
                written.summarised[record["user_id"]] = written.summarised.get(record["user_id"], False) or (
                    kind == "summary")
            for item in _items_of(record):
                if outcome is False and item.get("source_id") is not None:  # a fact already there: its item too
                    ids[(record["user_id"], item["source_id"])] = (
                        item["created_at"], fmt.item_digest(item["item_type"], item["content"]), 1)
                if isinstance(outcome, bool):
                    continue
                if item.get("source_id") is not None:
                    ids[(record["user_id"], item["source_id"])] = outcome
                    written.added.append((record["user_id"], item["source_id"], outcome))
                if item["_embed"]:
                    written.to_embed.append((outcome, record["user_id"],
                                             embedding_text(item["title"], item["content"], item["context"])))


def _items_of(record: dict) -> list[dict]:
    """The item a record writes: an item record itself, or a fact's searchable item."""
    item = record if record["type"] == "item" else record.get("item") if record["type"] == "fact" else None
    return [item] if isinstance(item, dict) else []


@dataclass
class _Written:
    """What the writing plan collected for after its commit."""

    report: TransferReport
    vector_size: int | None = None  # of the store's model: an imported vector of another size is embedded again
    to_embed: list[tuple[int, str, str]] = field(default_factory=list)
    added: list[tuple[str, int, int]] = field(default_factory=list)
    on_file: list[dict] = field(default_factory=list)  # fact records whose fact was there already
    # users with facts added -> whether a summary of theirs came with them
    summarised: dict[str, bool] = field(default_factory=dict)
