"""Conversation memory as store operations: sessions, messages, triggers and the extraction run.

Written once, like ``memory.MemoryOperations``: each public method is a generator yielding
its I/O (the requests of ``calls``: ``db.<method>(...)`` for the backend, ``EmbedDocuments`` for
the embedder, ``Chat`` for the chat model, ``Spawn`` to run an extraction in the background),
run by ``MemoryStore`` (blocking) and ``AsyncMemoryStore`` (asyncio).

One extraction run (``extract_session``) claims the session, stores the new turns as searchable
chunks, finds candidate facts (explicit statements by rule; the chat model when one is set and the
pre-filter sees something worth it), resolves them against the facts on file (dedup/supersede),
stores notes, regenerates the summary when facts changed, and records the outcome and the LLM cost
on the session. A failure leaves the session in state ``error`` with the message; it is retried on
the next run.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace
from typing import Any, Sequence

from ..core import convert
from ..core import validation as v
from ..backends.base import Filters, NewItem, SessionRead, SessionRow, SummaryRow
from ..calls import EmbedDocuments, Spawn, db
from ..core.contract import embedding_text, fact_item_content
from ..errors import (
    EmbeddingError,
    ExtractionError,
    NaviMemoryError,
    NotFoundError,
    ValidationError,
)
from ..models import (
    SESSION_STATES,
    AddResult,
    ExtractionReport,
    FactChange,
    Message,
    Session,
)
from .facts import FactOperations
from .memory import MemoryOperations
from .shared import Shared, fit_utf8
from ..pipeline import (
    PipelineOptions,
    dedup,
    extract,
    rules,
    sessions,
    summary,
    transcript,
)
from ..pipeline import triggers as trigger_rules
from ..pipeline.extract import ExtractedFact
from ..pipeline.llm import CallRecord, ChatClient
from ..sansio import Op, operation

log = logging.getLogger("navi_memory.pipeline")
MOST_MINUTES = 365_000 * 24 * 60  # the longest span validation.days takes, in minutes

NEIGHBOURS = 5
MEMORY_OFF = "memory is off for this user"
# Messages read back before the turns a pass stores, for the turn before them (their context).
TURN_BEFORE_MESSAGES = 8


def _rule_candidates(found: Sequence[rules.RuleFact]) -> list[ExtractedFact]:
    out = []
    for f in found:
        fact = extract.normalize_fact({"category": f.category, "key": f.key, "value": f.value, "source": f.source,
                                       "source_context": f.source_context})
        if fact is not None:
            out.append(replace(fact, said_at=f.said_at, message_seq=f.seq))
    return out


def _said_in(fact: ExtractedFact, messages: Sequence[Message]) -> ExtractedFact:
    """``fact`` (from the chat model) with the time and number of the message it was said in;
    when its context names none, the time of the last user message (the latest it can have been
    said) and no number."""
    message = transcript.statement_of(fact.source_context, messages)
    if message is not None:
        return replace(fact, said_at=message.created_at, message_seq=message.seq)
    last = [m.created_at for m in messages if m.role == "user" and m.created_at is not None]
    return replace(fact, said_at=last[-1]) if last else fact


def merge_candidates(*groups: Sequence[ExtractedFact | None]) -> list[ExtractedFact]:
    """One candidate per attribute (category and equivalent key); later groups win."""
    out: dict[tuple[str, str], ExtractedFact] = {}
    for group in groups:
        for fact in group:
            if fact is not None:
                slot = (fact.category, dedup.canonical_key(fact.key))
                out.pop(slot, None)
                out[slot] = fact
    return list(out.values())


class SessionOperations:
    """Sessions, messages, triggers and extraction runs; they write memory through ``memory``."""

    def __init__(self, shared: Shared, memory: MemoryOperations, facts: FactOperations) -> None:
        self._shared = shared
        self._memory = memory
        self._facts = facts

    # -- sessions and messages ---------------------------------------------------------------

    @operation
    def start_session(self, *, user_id: str | None, session_id: str | None = None,
                      background: bool | None = None) -> Op[Session | None]:
        """Open (or resume) a session and process the user's stale sessions (in the background
        by default). Returns the ``Session``; None for a user without an id or whose memory is
        off (nothing is kept)."""
        if user_id is None:
            log.info("session without a user id: not remembered")
            return None
        uid = v.user_id(user_id)
        sid = uuid.uuid4().hex if session_id is None else v.text(session_id, "session_id", v.MAX_KEY)
        if not (yield from self._memory_on(uid)):
            return None
        row, _ = yield db.open_session(user_id=uid, session_id=sid, now=self._shared.now())
        yield from self._process_stale(uid, sid, background)
        return sessions.session(row)

    @operation
    def add_messages(self, session_id: str, messages: Any, *, user_id: str | None, background: bool | None = None,
                     triggers: bool = True, agent_id: str | None = None, run_id: str | None = None) -> Op[AddResult]:
        """Append messages (OpenAI or LangChain format) to a session, creating it if needed. A new
        session first processes the user's stale ones; every ``extract_every`` user messages and on
        "remember that ..." an extraction runs (background by default). ``triggers=False`` only
        stores. A user without an id is skipped. ``agent_id`` / ``run_id`` scope the session (kept
        until another is given): the turns and notes extracted from it carry them, and the facts
        extracted record the run; extracted facts stay shared by every agent (no ``agent_id``)."""
        sid = v.text(session_id, "session_id", v.MAX_KEY)
        if user_id is None:
            log.info("messages without a user id: not remembered (session %s)", sid)
            return AddResult(session_id=sid, user_id=None, skipped="no user id")
        uid = v.user_id(user_id)
        agent, run = v.scope_id(agent_id, "agent_id"), v.scope_id(run_id, "run_id")
        rows = sessions.normalize_messages(messages, self._shared.max_content_bytes)
        if not rows:
            return AddResult(session_id=sid, user_id=uid)
        if not (yield from self._memory_on(uid)):
            return AddResult(session_id=sid, user_id=uid, skipped=MEMORY_OFF)
        row, created = yield db.append_messages(user_id=uid, session_id=sid, messages=rows, now=self._shared.now(),
                                                agent_id=agent, run_id=run)
        result = AddResult(session_id=sid, user_id=uid, added=len(rows), created=created)
        if not triggers:
            return result
        if created:
            yield from self._process_stale(uid, sid, background)
        result.triggers = trigger_rules.in_conversation(row, rows, self._shared.pipeline.extract_every)
        if result.triggers:
            result.scheduled, result.report = yield from self._schedule(uid, sid, False, background)
        return result

    @operation
    def add_message(self, session_id: str, role: str, content: str = "", *, user_id: str | None,
                    tool_calls: Sequence[Any] | None = None, tool_call_id: str | None = None,
                    name: str | None = None, background: bool | None = None) -> Op[AddResult]:
        """Append one message; see ``add_messages``."""
        message = {"role": role, "content": content, "tool_calls": list(tool_calls or []),
                   "tool_call_id": tool_call_id, "name": name}
        return (yield from self.add_messages(session_id, [message], user_id=user_id,
                                                          background=background))

    @operation
    def get_session(self, session_id: str, *, user_id: str, messages: bool = True) -> Op[Session]:
        """A session with its state and (by default) its messages; ``NotFoundError`` if unknown."""
        uid, sid = v.user_id(user_id), v.text(session_id, "session_id", v.MAX_KEY)
        row: SessionRead | None = yield db.get_session(user_id=uid, session_id=sid, with_messages=bool(messages),
                                                       after_seq=0)
        if row is None:
            raise NotFoundError(f"no session {sid!r} for this user")
        return sessions.session(row)

    @operation
    def list_sessions(self, *, user_id: str | None = None, all_users: bool = False, state: str | None = None,
                      limit: int = 50, offset: int = 0) -> Op[list[Session]]:
        """Sessions, most recently active first (without messages)."""
        uid = None if (all_users and user_id is None) else v.user_id(user_id)
        state = None if state is None else v.choice(state, "state", SESSION_STATES)
        rows = yield db.list_sessions(user_id=uid, state=state, limit=v.limit(limit, 10_000), offset=v.offset(offset))
        return [sessions.session(r) for r in rows]

    # -- extraction ----------------------------------------------------------------------------

    @operation
    def extract_session(self, session_id: str, *, user_id: str | None, final: bool = True,
                        force: bool = False) -> Op[ExtractionReport]:
        """Run the pipeline on a session now and return an ``ExtractionReport``. ``final=False``
        holds back the last turn's chunk (it may still get its answer); ``force`` re-reads the
        whole session instead of only the messages since the last extraction."""
        sid = v.text(session_id, "session_id", v.MAX_KEY)
        if user_id is None:
            log.info("session %s has no user id: skipped", sid)
            return ExtractionReport(session_id=sid, user_id=None, state="skipped", reason="no user id")
        return (yield from self._extract(v.user_id(user_id), sid, final, force))

    @operation
    def process_stale_sessions(self, *, user_id: str | None = None, all_users: bool = False,
                               stale_minutes: float | None = None, limit: int = 100,
                               unextracted: bool = False) -> Op[list[ExtractionReport]]:
        """Extract every stale session now (of one user, or of all with ``all_users=True``):
        idle longer than ``stale_minutes`` (default: the pipeline's 30) with activity not yet
        extracted. ``unextracted=True`` also takes the sessions never extracted, however recent
        (an ingested conversation; a live one keeps its last turn's chunk until it is answered).
        Returns one report per session."""
        uid = None if (all_users and user_id is None) else v.user_id(user_id)
        minutes = self._shared.pipeline.stale_minutes if stale_minutes is None else (v.days(stale_minutes, "stale_minutes", unit="minutes", most=MOST_MINUTES) or 0.0)
        cap = v.limit(limit, 100_000)
        stale = yield from self._stale(uid, minutes, cap)
        todo = [(owner, sid, True) for owner, sid in stale]
        if unextracted and len(todo) < cap:
            seen = {(owner, sid) for owner, sid in stale}
            fresh = yield db.list_sessions(user_id=uid, state="open", limit=cap, offset=0)
            todo += [(r["user_id"], r["session_id"], False) for r in reversed(fresh)  # oldest first
                     if r.get("extracted_at") is None and r.get("message_count")
                     and (r["user_id"], r["session_id"]) not in seen][:cap - len(todo)]
        reports = []
        for owner, sid, final in todo:
            reports.append((yield from self._extract(owner, sid, final, False)))
        return reports

    @operation
    def usage_stats(
        self, *, user_id: str | None = None, all_users: bool = False, limit: int = 20
    ) -> Op[dict[str, Any]]:
        """Sessions by state, LLM calls and tokens by purpose and by chat model (``models``, keyed
        by the model's name, ``unknown`` for calls recorded without one), totals, and the
        costliest sessions."""
        uid = None if (all_users and user_id is None) else v.user_id(user_id)
        stats = yield db.usage_stats(user_id=uid, limit=v.limit(limit, 10_000))
        purposes = stats["purposes"]
        extracted = stats["states"].get("extracted", {}).get("sessions", 0)
        calls = sum(p["calls"] for p in purposes.values())
        stats["totals"] = {
            "sessions": sum(s["sessions"] for s in stats["states"].values()),
            "messages": sum(s["messages"] for s in stats["states"].values()),
            "llm_calls": calls, "failed_calls": sum(p["failed"] for p in purposes.values()),
            "input_tokens": sum(p["input_tokens"] for p in purposes.values()),
            "output_tokens": sum(p["output_tokens"] for p in purposes.values()),
            "extraction_calls_per_extracted_session": round(
                (purposes.get("extract", {}).get("calls", 0) + purposes.get("repair", {}).get("calls", 0))
                / extracted, 3) if extracted else 0.0,
        }
        return stats

    # -- the run -------------------------------------------------------------------------------

    def _stale(self, uid: str | None, minutes: float, limit: int) -> Op:
        now = self._shared.now()
        return (
            yield db.stale_sessions(
                user_id=uid,
                cutoff=trigger_rules.cutoff(now, minutes),
                lease_cutoff=trigger_rules.cutoff(now, self._shared.pipeline.lease_minutes),
                max_attempts=self._shared.pipeline.max_attempts,
                limit=limit,
            )
        )

    def _process_stale(self, uid: str, current: str, background: bool | None) -> Op:
        for owner, sid in (yield from self._stale(uid, self._shared.pipeline.stale_minutes, self._shared.pipeline.stale_batch)):
            if sid != current:
                yield from self._schedule(owner, sid, True, background)

    def _schedule(self, uid: str, sid: str, final: bool, background: bool | None) -> Op:
        """Queue an extraction in the background, or run it now; (queued, report)."""
        if self._shared.pipeline.background if background is None else background:
            queued = yield Spawn("extract_session", (sid,), {"user_id": uid, "final": final})
            return bool(queued), None
        return False, (yield from self._extract(uid, sid, final, False))

    def _memory_on(self, uid: str) -> Op[bool]:
        if (yield from self._memory.memory_on(uid)):
            return True
        log.info("memory is off for this user: the conversation is not remembered")
        return False

    def _extract(self, uid: str, sid: str, final: bool, force: bool) -> Op:
        now = self._shared.now()
        if (yield db.get_session(user_id=uid, session_id=sid, with_messages=False, after_seq=0)) is None:
            raise NotFoundError(f"no session {sid!r} for this user")
        memory_on = yield from self._memory_on(uid)
        claimed: SessionRow | None = yield db.claim_session(
            user_id=uid, session_id=sid, now=now, lease_cutoff=trigger_rules.cutoff(now, self._shared.pipeline.lease_minutes)
        )
        report = ExtractionReport(session_id=sid, user_id=uid, state="extracted")
        if claimed is None:
            report.state, report.reason = "skipped", "another run is processing this session"
            return report
        if not memory_on:  # recorded before memory was turned off: not extracted; as an error, so that
            # the stale-session runs stop retrying it after the pipeline's max_attempts
            report.state, report.reason = "skipped", MEMORY_OFF
            yield db.finish_session(user_id=uid, session_id=sid, outcome={"state": "error", "error": MEMORY_OFF},
                                    calls=[], now=self._shared.now())
            return report
        ledger: list[CallRecord] = []
        try:
            outcome = yield from self._pipeline_run(uid, sid, claimed, final, force, report, ledger)
        except NaviMemoryError as exc:
            report.state, report.error = "error", str(exc)[:1000]
            log.warning("extraction of session %s (user %s) failed: %s", sid, uid, exc)
            yield db.finish_session(
                user_id=uid,
                session_id=sid,
                outcome={"state": "error", "error": report.error},
                calls=self._shared.named_calls(ledger),
                now=self._shared.now(),
            )
            self._book(report, ledger)
            if not isinstance(exc, ExtractionError):
                raise
            return report
        yield db.finish_session(user_id=uid, session_id=sid, outcome=outcome, calls=self._shared.named_calls(ledger),
                                now=self._shared.now())
        self._book(report, ledger)
        if report.state == "error":
            log.warning("extraction of session %s (user %s) failed, the rules recorded %d facts: %s", sid, uid,
                        report.added + report.updated, report.error)
            return report
        log.info("session %s: %d added, %d updated, %d unchanged, %d notes, %d LLM calls", sid, report.added,
                 report.updated, report.unchanged, report.notes, report.llm_calls)
        return report

    @staticmethod
    def _book(report: ExtractionReport, ledger: list[CallRecord]) -> None:
        report.llm_calls = len(ledger)
        report.input_tokens = sum(c["input_tokens"] for c in ledger)
        report.output_tokens = sum(c["output_tokens"] for c in ledger)

    def _pipeline_run(self, uid: str, sid: str, claimed: SessionRow, final: bool, force: bool, report: ExtractionReport,
                      ledger: list[CallRecord]) -> Op:
        opts = self._shared.pipeline
        after = 0 if force else claimed["extracted_seq"]
        start = max(0, min(after - opts.context_messages, claimed["chunked_seq"] - TURN_BEFORE_MESSAGES))
        full: SessionRead | None = yield db.get_session(user_id=uid, session_id=sid, with_messages=True, after_seq=start)
        if full is None:  # forgotten since it was claimed
            raise NotFoundError(f"no session {sid!r} for this user")
        messages = [sessions.message(m) for m in full["messages"]]
        chunked = [m for m in messages if (m.seq or 0) <= claimed["chunked_seq"]]
        pending = [m for m in messages if (m.seq or 0) > claimed["chunked_seq"]]
        scope = {"agent_id": full["agent_id"], "run_id": full["run_id"]}  # of the derived items
        report.chunks = yield from self._store_turns(uid, sid, pending, transcript.tool_names(messages), final, scope,
                                                     before=chunked)
        new = [m for m in messages if (m.seq or 0) > after]
        context = [m for m in messages if (m.seq or 0) <= after][-opts.context_messages:] if opts.context_messages else []
        candidates: list[ExtractedFact | None] = list(_rule_candidates(rules.extract(new)))
        notes: list[str] = []
        failure: ExtractionError | None = None
        if self._shared.chat is not None and new:
            if rules.worth_extracting(new):
                known = yield from self._facts.newest_facts(uid, 200)
                text = transcript.render(new, opts.max_transcript_chars, context)
                if text:
                    dated = transcript.dated(new, (yield from self._memory.zone_of(uid)))
                    try:
                        found = yield from extract.extract(text, known, ledger, dated)
                    except ExtractionError as exc:  # the rules still record what the user said
                        failure = exc
                    else:
                        report.used_llm = True
                        on_file = yield from self._facts.newest_facts(uid)
                        # the model has read the same statements: of the rule facts only identity stays
                        candidates[:] = merge_candidates([c for c in candidates if c and c.category == "profile"],
                                                         [dedup.adopt(_said_in(f, new), on_file, sid)
                                                          for f in found.facts])
                        notes = found.notes
            else:
                report.prefiltered = True
        # after a failure the model is not asked to judge near-duplicates either
        report.changes = yield from self._apply_facts(uid, sid, merge_candidates(candidates), ledger, scope["run_id"],
                                                      failure is None)
        if failure is not None:
            # the session stays marked for a retry with the model; its facts then merge with these
            report.state, report.error = "error", str(failure)[:1000]
            return {"state": "error", "error": report.error}
        report.notes = yield from self._store_notes(uid, sid, notes, scope)
        changed = any(c.action != "unchanged" for c in report.changes)
        report.summary_updated = yield from self._refresh_summary(uid, changed, ledger)
        return {"state": "extracted", "extracted_seq": full["message_count"],
                "extracted_user_messages": full["user_messages"]}

    def _store_turns(self, uid: str, sid: str, messages: list[Message], names: dict[str, str], final: bool,
                     scope: dict[str, Any], before: Sequence[Message] = ()) -> Op:
        """The turns of ``messages`` as chunks; ``before``: the session's messages stored by an
        earlier pass (the last turn of them is the first new turn's context)."""
        groups, upto = transcript.turns(messages, final)
        if not upto:
            return 0
        items: list[NewItem] = []
        # the turn before, as context: a turn often makes sense only with it
        earlier = transcript.turns(before, final=True)[0][-1:]
        previous = fit_utf8(transcript.turn_text(earlier[0], names), self._shared.max_content_bytes) or None \
            if earlier else None
        for group in groups if self._shared.pipeline.store_turns else []:  # without chunks the mark still moves
            text = transcript.turn_text(group, names)
            if text:
                items.append(self._memory.new_item(uid, {
                    "content": fit_utf8(text, self._shared.max_content_bytes), "type": "note", "theme": "conversation",
                    "source": "conversation", "observed_at": group[0].created_at, "context": previous,
                    "source_ref": {"session_id": sid, "first_seq": group[0].seq, "last_seq": group[-1].seq},
                    **scope}))
                previous = items[-1].content
        ids = yield db.store_chunks(
            user_id=uid, session_id=sid, items=items, upto_seq=upto, model=self._shared.model, now=self._shared.now()
        )
        if self._shared.embed_on_write:
            yield from self._memory.embed_new([(i, uid, embedding_text(it.title, it.content, it.context))
                                        for i, it in zip(ids, items)])
        return len(ids)

    def _store_notes(self, uid: str, sid: str, notes: list[str], scope: dict[str, Any]) -> Op:
        items = [self._memory.new_item(uid, {"content": fit_utf8(n, self._shared.max_content_bytes), "type": "note", "theme": "notes",
                                      "source": "chat_extract", "source_ref": {"session_id": sid}, **scope})
                 for n in notes]
        return len((yield from self._memory.add_rows(items)))

    def _neighbours(self, uid: str, candidates: list[ExtractedFact], known: list[dict]) -> Op:
        """Per candidate, the facts on file whose embeddings are closest to it: [(fact, cosine)]."""
        out: list[list[tuple[dict, float]]] = [[] for _ in candidates]
        by_item = {f["item_id"]: f for f in known if f.get("item_id") is not None}
        model = yield from self._memory.serving_model(uid)
        embedder = self._shared.embedder_of(model)
        if not candidates or not by_item or embedder is None or model is None or not embedder.available:
            return out
        try:
            vectors = yield EmbedDocuments([fact_item_content(c.key, c.value) for c in candidates], model)
            where = Filters(user_id=uid, now=self._shared.now(), types=("fact",))
            for index, vector in enumerate(vectors):
                hits = (yield db.semantic_hits(filters=where, model=model, query=vector, k=NEIGHBOURS)).scored
                out[index] = [(by_item[item], score) for item, score in hits if item in by_item]
        except EmbeddingError as exc:
            log.info("dedup by similarity skipped (%s); keys and values are still compared", exc)
        return out

    def _apply_facts(self, uid: str, sid: str, candidates: list[ExtractedFact], ledger: list[CallRecord],
                     run_id: str | None, judge: bool = True) -> Op:
        if not candidates:
            return []
        opts = self._shared.pipeline
        known = yield from self._facts.newest_facts(uid)
        decisions = [dedup.decide(c, known) for c in candidates]
        fresh = [i for i, d in enumerate(decisions) if d.action == "add"]
        neighbours = yield from self._neighbours(uid, [candidates[i] for i in fresh], known)
        for i, near in zip(fresh, neighbours):
            decisions[i] = dedup.decide(candidates[i], known, near, opts.dedup_threshold)
        pending = [i for i, d in enumerate(decisions) if d.action == "judge"]
        same: set[int] = set()
        if pending and judge and self._shared.chat is not None and opts.llm_dedup:
            pairs = [(candidates[i], decisions[i].target) for i in pending]
            same = yield from dedup.judge(pairs, ledger)  # type: ignore[arg-type]  # "judge" names its target
        for number, i in enumerate(pending, 1):
            decisions[i] = dedup.resolve(decisions[i], candidates[i], number in same)
        changes: list[FactChange] = []
        for candidate, decision in zip(candidates, decisions):
            try:
                changes.append((yield from self._apply(uid, sid, candidate, decision, run_id)))
            except ValidationError as exc:
                log.warning("fact %s/%s rejected: %s", candidate.category, candidate.key, exc)
        return changes

    def _apply(self, uid: str, sid: str, candidate: ExtractedFact, decision: dedup.Decision, run_id: str | None) -> Op:
        """Write one decision; the change says what the candidate was merged into and why
        (``requested_key``, ``reason``), and merges are logged."""
        target = decision.target
        asked = None if target is None or target["key"] == candidate.key else candidate.key
        if decision.action == "keep" and target is not None:
            change = FactChange(action="unchanged", fact=convert.fact(dict(target)))
        else:
            category, key = (target["category"], target["key"]) if target is not None else (candidate.category,
                                                                                              candidate.key)
            value = target["value"] if decision.action == "unchanged" and target is not None else candidate.value
            change = yield from self._facts.upsert_fact(
                user_id=uid, category=category, key=key, value=value, source=candidate.source,
                confidence=candidate.confidence, source_context=candidate.source_context, source_session_id=sid,
                source_message_id=None if candidate.message_seq is None else str(candidate.message_seq),
                observed_at=candidate.said_at, agent_id=None if target is None else target.get("agent_id"),
                run_id=run_id,
                # dedup.decide has matched the equivalent keys on file when it read them; a fact to add
                # is matched again under the write lock, against what a concurrent writer stored since
                match_equivalent=decision.action == "add",
                update_summary=False)  # once per run, by _refresh_summary
        if target is not None:
            log.info("extracted %s/%s=%r merged into %s/%s (%s): %s", candidate.category, candidate.key,
                     candidate.value, change.fact.category, change.fact.key, change.action, decision.reason)
        return replace(change, requested_key=change.requested_key or asked,
                       reason=change.reason or (None if target is None else decision.reason))

    def _refresh_summary(self, uid: str, changed: bool, ledger: list[CallRecord]) -> Op:
        facts = yield from self._facts.follow.current_facts(uid)
        current: SummaryRow | None = yield db.get_summary(user_id=uid)
        if not summary.needs_update(changed, facts, current):
            return False
        return (yield from self._facts.follow.rewrite(uid, ledger, self._shared.chat is not None))

