"""What follows a change of the facts: the summary, and the forgetting of deleted memories.

Every fact change (``upsert_fact``, ``delete_fact``, an edit, archive or delete of a fact's
searchable item, import, promotion) ends in ``Follow.facts_changed``: without a chat model the
summary is composed from the facts again at once; with one, a change that removed or replaced a
value first stores the composed summary (so no prompt shows the old value while the model
writes), then ``refresh_summary`` runs in the background and has the model write it again.

Deleting a fact or an item also forgets the raw conversation text it came from
(``Follow.forget_sources``): the session messages that said it are redacted (the rows and the
session stay), the stored turns (chunks) holding it are deleted, the context copies of it on
the next turn are cleared, and earlier summary versions lose the sentences that said it.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..backends.base import Filters, SessionRead, SummaryRow
from ..calls import Spawn, db
from ..errors import ValidationError
from ..pipeline import rules, summary
from ..pipeline.llm import CallRecord
from ..retrieval.query import query_terms
from ..sansio import Op

log = logging.getLogger(__name__)
# the text a redacted message keeps: the turn order and the session stay readable
REDACTED = "[removed: the user deleted the memory this message held]"
SOURCE_CANDIDATES = 200  # items of the user checked for a copy of a deleted text
MIN_PHRASE = 3  # shorter values ("no", "5") would match too much raw text to redact by
REWRITES = 2  # chat-model summaries written while the facts keep changing, before the composed one


def _plain(text: str | None) -> str:
    return " ".join(str(text or "").casefold().split())


def _state(facts: Sequence[Mapping[str, Any]]) -> list[tuple]:
    return [(f["id"], f["value"], f["updated_at"]) for f in facts]


def said(fact: Mapping[str, Any]) -> list[str]:
    """The phrases a fact was said in: its value and, for a rule fact, the quoted sentence."""
    phrases = [str(fact.get("value") or "")]
    context = str(fact.get("source_context") or "")
    if rules.is_rule_context(context):
        phrases.append(context.split('"', 1)[1].rstrip('"'))
    return [p for p in (_plain(p) for p in phrases) if len(p) >= MIN_PHRASE]


def holds(text: str | None, phrases: Iterable[str]) -> bool:
    plain = _plain(text)
    return any(p in plain for p in phrases)


def without_sentences(text: str, phrases: Sequence[str]) -> str:
    """``text`` without the sentences (and lines) that hold one of ``phrases``."""
    kept = [s for s in re.split(r"(?<=[.!?;])\s+|\n+", text) if s.strip() and not holds(s, phrases)]
    return " ".join(kept)


class Follow:
    """The summary and the raw text behind the facts and items, kept true to them."""

    def __init__(self, shared: Any, newest_facts: Callable[..., Op]) -> None:
        self._shared = shared
        self._newest_facts = newest_facts

    # -- the summary -----------------------------------------------------------------------

    def current_facts(self, uid: str) -> Op[list[dict]]:
        """The facts the summary tells: unexpired, and their searchable item not archived."""
        facts = yield from self._newest_facts(uid)
        ids = [f["item_id"] for f in facts if f.get("item_id") is not None]
        archived = {r["id"] for r in ((yield db.fetch_items(user_id=uid, ids=ids)) if ids else [])
                    if r.get("status") == "archived"}
        return [f for f in facts if f.get("item_id") not in archived][:summary.MAX_FACTS]

    def rewrite(self, uid: str, ledger: list[CallRecord], use_llm: bool) -> Op[bool]:
        """Store the summary written from the facts as they stand (none left: an empty version,
        which reads as no summary), unless it says what the current one says; True when stored.
        The chat model's text is kept only if the facts did not change while it wrote (a delete
        meanwhile must not come back): else it writes again, and after that the composed text."""
        facts = yield from self.current_facts(uid)
        text = yield from summary.write(facts, ledger, use_llm)
        for _ in range(REWRITES if use_llm else 0):
            if text is None:  # the chat model failed: logged, the composed or earlier text stays
                return False
            now_facts = yield from self.current_facts(uid)
            if _state(now_facts) == _state(facts):
                break
            facts = now_facts
            text = yield from summary.write(facts, ledger, use_llm)
        else:
            if use_llm:
                text = summary.compose(facts)
        current: SummaryRow | None = yield db.get_summary(user_id=uid)
        if text is None or (current["content"] if current else "") == text:
            return False
        try:
            content = self._shared.content(text, "summary") if text else ""
        except ValidationError as exc:  # a NUL, a lone surrogate, too long: as if the model had failed
            log.warning("the summary written cannot be stored (%s): the earlier one stays", exc)
            return False
        yield db.set_summary(user_id=uid, content=content, now=self._shared.now())
        return True

    def facts_changed(self, uid: str, removed: bool) -> Op[None]:
        """After a fact change: by rule at once; with a chat model, the composed summary first when
        a value left the facts (``removed``), and the model's in the background."""
        if self._shared.chat is None or removed:
            yield from self.rewrite(uid, [], use_llm=False)
        if self._shared.chat is not None:
            yield Spawn("refresh_summary", (), {"user_id": uid})

    # -- forgetting --------------------------------------------------------------------------

    def forget_sources(self, uid: str, phrases: Sequence[str], session_id: str | None,
                       turns: tuple[int, int] | None = None) -> Op[None]:
        """Forget the raw conversation text of a deleted memory: in its session, the messages
        that hold one of ``phrases`` (or are in ``turns``, a deleted chunk's first and last
        message) are redacted, the items of that session holding a phrase are deleted and their
        context copies cleared; every summary version drops its sentences holding a phrase."""
        yield from self._forget_in_summaries(uid, phrases)
        if session_id is None or not (phrases or turns):
            return
        session: SessionRead | None = yield db.get_session(user_id=uid, session_id=session_id, with_messages=True,
                                                           after_seq=0)
        if session is not None:
            first, last = turns or (0, -1)
            seqs = [m["seq"] for m in session["messages"]
                    if first <= m["seq"] <= last or (m.get("content") != REDACTED and holds(m.get("content"), phrases))]
            if seqs:
                yield db.redact_messages(user_id=uid, session_id=session_id, seqs=seqs, content=REDACTED)
        if phrases:
            yield from self._forget_in_items(uid, phrases, session_id)

    def _forget_in_items(self, uid: str, phrases: Sequence[str], session_id: str) -> Op[None]:
        where = Filters(user_id=uid, now=self._shared.now(), status="any", include_expired=True)
        ids: set[int] = set()
        for phrase in phrases:
            terms = query_terms(phrase)
            if terms:
                found = yield db.lexical_hits(filters=where, terms=terms, k=SOURCE_CANDIDATES)
                ids.update(i for i, _ in found.scored)
                ids.update(i for i, _ in (yield db.substring_candidates(filters=where, terms=terms,
                                                                          k=SOURCE_CANDIDATES)))
        rows = (yield db.fetch_items(user_id=uid, ids=sorted(ids))) if ids else []
        for row in rows:
            if (row.get("source_ref") or {}).get("session_id") != session_id or row.get("fact_id") is not None:
                continue  # another conversation's, or a fact's copy (its fact says what stays)
            if holds(row.get("content"), phrases) or holds(row.get("title"), phrases):
                yield db.delete_item(user_id=uid, item_id=row["id"])
            elif holds(row.get("context"), phrases):
                yield db.update_item(user_id=uid, item_id=row["id"], changes={"context": None},
                                     model=self._shared.model, now=self._shared.now())

    def forget_turn_context(self, uid: str, session_id: str, text: str) -> Op[None]:
        """A deleted chunk's text is the next turn's context: cleared there too."""
        yield from self._forget_in_items(uid, [_plain(text)], session_id)

    def _forget_in_summaries(self, uid: str, phrases: Sequence[str]) -> Op[None]:
        if not phrases:
            return
        versions = yield db.summary_history(user_id=uid, limit=1_000_000)
        changed = {s["version"]: without_sentences(s["content"], phrases) for s in versions
                   if holds(s["content"], phrases)}
        if changed:
            yield db.rewrite_summaries(user_id=uid, contents=changed)
