"""The household and the promotion job as store operations (written once, like ``operations``).

Persons per user (display name, pronouns, role, aliases, birth date, notes) and the household
mode: ``single`` (one person at most; speaker inference always answers that person, tools hide
their person parameters) or ``multi``. Mode rules: single -> multi makes the existing person the
``primary``; multi -> single is allowed only while at most one person remains; a second person
cannot be added in single mode.

``promote`` turns clusters of repeated items into facts (see ``promotion``); ``promoted_facts``
is the always-in-prompt set; ``memory_markdown`` renders the user's facts and pinned notes as a
MEMORY.md.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Sequence

from ..core import convert
from ..core import validation as v
from ..backends.base import Filters, UserSettings
from ..calls import db
from ..errors import NotFoundError, ValidationError
from ..models import HOUSEHOLD_MODES, ITEM_TYPES, Fact
from .facts import FactOperations
from .memory import MemoryOperations
from .shared import Shared, fit_utf8
from ..core.persons import (
    Person,
    SpeakerInference,
    check_aliases,
    clean_person_fields,
    hinted_person,
    infer_speaker,
    matches,
    person,
)
from ..promotion import (
    MARKDOWN_ENTRIES,
    MAX_ITEMS,
    PINNED_NOTES,
    PROMPT_FACTS,
    PromotionReport,
    confidence,
    fact_fields,
    find_clusters,
    find_lexical_clusters,
    render_memory_markdown,
)
from ..sansio import Op, operation

log = logging.getLogger("navi_memory.persons")

ROWS_PER_READ = 1000
PROMOTABLE_TYPES = tuple(t for t in ITEM_TYPES if t not in ("fact", "summary"))  # facts already


def household_details(display_name: Any, locale: Any) -> dict[str, str | None]:
    """The columns ``put_household`` changes: those given (not None), ``""`` as None (cleared)."""
    out: dict[str, str | None] = {}
    if display_name is not None:
        out["household_name"] = v.optional_text(display_name, "display_name", v.MAX_KEY)
    if locale is not None:
        out["locale"] = v.locale_tag(locale) if str(locale).strip() else None
    return out


class PersonOperations:
    """Persons, household mode, speaker inference and promotion ."""

    def __init__(self, shared: Shared, memory: MemoryOperations, facts: FactOperations) -> None:
        self._shared = shared
        self._memory = memory
        self._facts = facts

    def _person_fields(self, fields: dict[str, Any], partial: bool) -> dict[str, Any]:
        return clean_person_fields(fields, partial, self._shared.max_content_bytes)

    def _persons(self, uid: str) -> Op:
        return [person(r) for r in (yield db.list_persons(user_id=uid))]

    def _find(self, uid: str, ref: Any) -> Op:
        """The person an id or a reference names; NotFoundError when none or ambiguous."""
        persons = yield from self._persons(uid)
        if isinstance(ref, int) and not isinstance(ref, bool):
            found = [p for p in persons if p.id == ref]
        else:
            found = matches(persons, v.text(ref, "person", v.MAX_KEY))
        if len(found) != 1:
            raise NotFoundError(f"no person {ref!r} for this user" if not found
                                else f"{ref!r} is ambiguous: {', '.join(p.display_name for p in found)}")
        return found[0], persons

    # -- persons ---------------------------------------------------------------------------

    @operation
    def add_person(self, display_name: str, *, user_id: str, aliases: Sequence[str] = (), role: str | None = None,
                   pronouns: str | None = None, birth_date: str | None = None, notes: str | None = None,
                   devices: Sequence[str] = ()) -> Op[Person]:
        """Add a member to the user's household; returns the ``Person``. In single mode only one
        person is allowed (switch with ``set_household_mode(..., "multi")`` first). ``devices``: ids
        of the devices they use (a turn from one is theirs: ``infer_speaker(device=...)``, an
        adapter's ``search_kwargs={"device": ...}``); a device belongs to one person."""
        uid = v.user_id(user_id)
        fields = self._person_fields({"display_name": display_name, "aliases": list(aliases), "role": role,
                                      "pronouns": pronouns, "birth_date": birth_date, "notes": notes,
                                      "devices": list(devices)}, False)
        persons = yield from self._persons(uid)
        if persons and (yield db.household_mode(user_id=uid)) == "single":
            raise ValidationError("the household is in single mode: switch it to multi to add another person")
        problem = check_aliases(persons, Person(id=-1, user_id=uid, display_name=fields["display_name"],
                                                aliases=fields["aliases"], devices=fields["devices"]))
        if problem:
            raise ValidationError(problem)
        return person((yield db.insert_person(user_id=uid, fields=fields, now=self._shared.now())))

    @operation
    def update_person(self, ref: Any, *, user_id: str, **changes: Any) -> Op[Person]:
        """Change a person (by id or reference): display_name, pronouns, role, aliases, birth_date,
        notes. A new display name is carried to the items and facts about the person."""
        uid = v.user_id(user_id)
        clean = self._person_fields(changes, True)
        target, persons = yield from self._find(uid, ref)
        merged = Person(id=target.id, user_id=uid, display_name=clean.get("display_name", target.display_name),
                        aliases=clean.get("aliases", target.aliases), devices=clean.get("devices", target.devices))
        problem = check_aliases(persons, merged)
        if problem:
            raise ValidationError(problem)
        if not clean:
            return target
        row = yield db.update_person(user_id=uid, person_id=target.id, changes=clean, now=self._shared.now())
        return person(row)

    @operation
    def remove_person(self, ref: Any, *, user_id: str) -> Op[Person]:
        """Remove a person (by id or reference). Their items and facts keep the name."""
        uid = v.user_id(user_id)
        target, _ = yield from self._find(uid, ref)
        yield db.delete_person(user_id=uid, person_id=target.id)
        return target

    @operation
    def list_persons(self, *, user_id: str) -> Op[list[Person]]:
        """The household's persons, in the order they were added."""
        return (yield from self._persons(v.user_id(user_id)))

    @operation
    def get_person(self, ref: Any, *, user_id: str) -> Op[Person]:
        """One person by id or reference; ``NotFoundError`` when unknown or ambiguous."""
        return (yield from self._find(v.user_id(user_id), ref))[0]

    @operation
    def resolve_person_ref(self, ref: str, *, user_id: str) -> Op[Person | None]:
        """The person a reference names (display name, first name, alias, then role, all
        case-insensitive); None when nobody or more than one person matches."""
        uid = v.user_id(user_id)
        found = matches((yield from self._persons(uid)), v.text(ref, "ref", v.MAX_KEY))
        return found[0] if len(found) == 1 else None

    @operation
    def household_mode(self, *, user_id: str) -> Op[str]:
        """'single' (the default) or 'multi'."""
        return (yield db.household_mode(user_id=v.user_id(user_id)))

    @operation
    def set_household_mode(self, mode: str, *, user_id: str) -> Op[str]:
        """Switch modes. single -> multi: the existing person becomes role 'primary'. multi ->
        single: only while at most one person remains (remove the others first)."""
        uid = v.user_id(user_id)
        mode = v.choice(mode, "mode", HOUSEHOLD_MODES)
        current = yield db.household_mode(user_id=uid)
        persons = yield from self._persons(uid)
        if mode == current:
            return mode
        if mode == "single" and len(persons) > 1:
            raise ValidationError(f"cannot switch to single mode with {len(persons)} persons: remove all but one")
        primary = persons[0].id if mode == "multi" and len(persons) == 1 else None
        yield db.set_household_mode(user_id=uid, mode=mode, primary_id=primary, now=self._shared.now())
        return mode

    @operation
    def household(self, *, user_id: str) -> Op[dict[str, Any]]:
        """``{"display_name", "locale", "mode", "timezone", "memory_enabled", "persons"}``: the household
        as one record (``display_name``, ``locale``: ``put_household``'s, or None; ``timezone``: the
        user's own, ``set_user_timezone``, or None; ``memory_enabled``: ``set_memory_enabled``)."""
        uid = v.user_id(user_id)
        settings: UserSettings = yield db.user_settings(user_id=uid)
        return {"display_name": settings["household_name"], "locale": settings["locale"],
                "mode": settings["household_mode"], "timezone": settings["timezone"],
                "memory_enabled": settings["memory_off_since"] is None, "persons": (yield from self._persons(uid))}

    @operation
    def put_household(
        self, *, user_id: str, members: Sequence[Any] = (), mode: str | None = None, timezone: str | None = None,
        replace: bool = False, display_name: str | None = None, locale: str | None = None,
    ) -> Op[dict[str, Any]]:
        """Set the household in one call (the REST API's ``PUT .../household``): members whose display
        name matches a person (case-insensitively) update that person with the fields given, the
        others are added; persons not listed stay, unless ``replace`` (then they are removed: the
        household becomes exactly ``members``; their items and facts keep the name). ``mode``
        switches first (to multi) or last (to single); ``timezone`` (an IANA name; None: unchanged)
        becomes the user's; ``display_name`` ("The Millers") and ``locale`` (``en-US``) too ("": cleared).
        Every member and the resulting household are checked before anything is written."""
        uid = v.user_id(user_id)
        mode = None if mode is None else v.choice(mode, "mode", HOUSEHOLD_MODES)
        zone_name = None if timezone is None else v.timezone_name(timezone)
        details = household_details(display_name, locale)
        if isinstance(members, (str, bytes)) or not isinstance(members, Sequence):
            raise ValidationError("members must be a list of persons")
        if not all(isinstance(m, dict) for m in members):
            raise ValidationError("each member must be an object with at least a display_name")
        if not isinstance(replace, bool):
            raise ValidationError("replace must be true or false")
        clean = [self._person_fields(dict(m), False) for m in members]
        names = [fields["display_name"].lower() for fields in clean]
        if replace and len(set(names)) < len(names):
            raise ValidationError("members name the same person twice")
        changed: dict[str, Any] = yield db.in_one_transaction(
            make_plan=lambda: self._put_household(uid, clean, names, mode, replace, zone_name, details))
        return changed

    def _put_household(self, uid: str, clean: list[dict[str, Any]], names: list[str], mode: str | None,
                       replace: bool, zone_name: str | None, details: dict[str, Any]) -> Op[dict[str, Any]]:
        """A plan for ``in_one_transaction``, under the user's write lock: concurrent puts of the same
        new member each found it missing and inserted it (a unique violation on PostgreSQL)."""
        yield db.lock_user_writes(user_id=uid)
        persons = yield from self._persons(uid)
        current = yield db.household_mode(user_id=uid)
        planned: list[tuple[Person | None, dict[str, Any]]] = []
        leaving = [p for p in persons if p.display_name.lower() not in names] if replace else []
        after = [p for p in persons if p not in leaving]
        for number, fields in enumerate(clean):
            existing = next((p for p in after if p.display_name.lower() == fields["display_name"].lower()), None)
            candidate = Person(id=existing.id if existing else -1 - number, user_id=uid,
                               display_name=existing.display_name if existing else fields["display_name"],
                               aliases=fields.get("aliases", existing.aliases if existing else []),
                               devices=fields.get("devices", existing.devices if existing else []))
            problem = check_aliases(after, candidate)
            if problem:
                raise ValidationError(problem)
            after = [p for p in after if p.id != candidate.id] + [candidate]
            planned.append((existing, fields))
        if (mode or current) == "single" and len(after) > 1:
            raise ValidationError(f"a single-mode household holds one person, this one would hold {len(after)}")
        if mode == "multi":
            yield from self.set_household_mode("multi", user_id=uid)
        for gone in leaving:  # first: a newcomer may take a leaving person's alias
            yield db.delete_person(user_id=uid, person_id=gone.id)
        for existing, fields in planned:
            if existing is None:
                yield db.insert_person(user_id=uid, fields=fields, now=self._shared.now())
            else:  # matched by name: the name keeps its stored spelling
                changes = {key: value for key, value in fields.items() if key != "display_name"}
                if changes:
                    yield db.update_person(user_id=uid, person_id=existing.id, changes=changes, now=self._shared.now())
        if mode == "single":
            yield from self.set_household_mode("single", user_id=uid)
        if zone_name is not None:
            yield db.set_user_timezone(user_id=uid, name=zone_name, now=self._shared.now())
        if details:
            yield db.set_household_details(user_id=uid, changes=details, now=self._shared.now())
        return (yield from self.household(user_id=uid))

    @operation
    def infer_speaker(
        self, text: str | None = None, *, user_id: str, hint: str | int | None = None, device: str | None = None
    ) -> Op[SpeakerInference]:
        """Who is speaking in this turn, and the person hints for the search. ``hint``: the person
        of the session (id or reference), trusted first; else ``device``: the person whose
        ``devices`` hold it; then the single-mode fast path; then the first-person parser ("my
        wife is cooking": the wife is not the speaker)."""
        uid = v.user_id(user_id)
        text = None if text is None else v.text(text, "text", self._shared.max_content_bytes, allow_empty=True)
        persons = yield from self._persons(uid)
        if not persons:  # no household: nothing to infer (and one query per turn, not two)
            return infer_speaker([], "single")
        mode = yield db.household_mode(user_id=uid)
        return infer_speaker(persons, mode, text, hinted_person(persons, hint, device))

    # -- promotion -------------------------------------------------------------------------

    @operation
    def promote(self, *, user_id: str | None = None, all_users: bool = False,
                max_items: int = MAX_ITEMS,
                progress: Callable[[int, int], None] | None = None) -> Op[PromotionReport]:
        """Turn clusters of similar items (3 or more) into facts and mark the items promoted;
        idempotent. Similar: cosine distance < 0.15 between vectors of the store's embedding model;
        in a store without one, half their content words shared (Jaccard >= 0.5).
        ``progress(users_done, users)`` after each user."""
        if all_users and user_id is None:
            users = [u["id"] for u in (yield db.list_users())]
        else:
            users = [v.user_id(user_id)]
        report = PromotionReport()
        for done, uid in enumerate(users, 1):
            yield from self._promote_user(uid, v.limit(max_items, 1_000_000, "max_items"), report)
            if progress is not None:
                progress(done, len(users))
        return report

    def _promote_user(self, uid: str, max_items: int, report: PromotionReport) -> Op:
        model = yield from self._memory.serving_model(uid)
        if model is None:  # no vectors to compare: shared words
            rows = yield from self._lexical_candidates(uid, max_items)
            clusters = find_lexical_clusters(rows)
        else:
            rows = yield db.promotion_candidates(user_id=uid, model=model, now=self._shared.now(), limit=max_items)
            clusters = find_clusters(rows)
        report.users += 1
        report.candidates += len(rows)
        changes: list[str] = []
        for cluster in clusters:
            report.clusters += 1
            fact_id = cluster.fact_id
            if fact_id is None and not cluster.retired:
                fields = fact_fields(cluster)
                change = yield from self._facts.upsert_fact(
                    user_id=uid, category=fields["category"], key=fields["key"],
                    value=fit_utf8(fields["value"], self._shared.max_content_bytes), source="auto_discovery",
                    confidence=confidence(len(cluster.members)), source_context=fields["source_context"],
                    person=fields["person"], observed_at=fields["observed_at"],
                    update_summary=False)  # once for the user, below
                changes.append(change.action)

                fact_id = change.fact.id
                report.facts_added += change.action == "added"
                report.facts_updated += change.action == "updated"
            report.items_promoted += yield db.record_promotion(
                user_id=uid, fact_id=fact_id, item_ids=cluster.new_ids, now=self._shared.now()
            )
        if any(action != "unchanged" for action in changes):
            yield from self._facts.follow.facts_changed(uid, removed="updated" in changes)
        log.info("promotion of user %s: %d clusters, %d items promoted", uid, report.clusters, report.items_promoted)

    def _lexical_candidates(self, uid: str, max_items: int) -> Op:
        """What ``promotion_candidates`` gives, without vectors: the newest active items (fact
        mirrors and summaries excluded) with ``promoted`` and ``fact_id`` from the promotions."""
        where = Filters(user_id=uid, now=self._shared.now(), types=PROMOTABLE_TYPES)
        rows: list[dict] = []
        while len(rows) < max_items:
            page = yield db.list_items(filters=where, limit=min(ROWS_PER_READ, max_items - len(rows)), offset=len(rows))
            rows += page
            if len(page) < ROWS_PER_READ:
                break
        promoted: dict[int, int | None] = {}
        after: list[Any] | None = None
        while True:  # the promotions of the user, as the export reads them (few: one per promoted item)
            page = yield db.export_page(kind="promotions", user_id=uid, after=after, limit=ROWS_PER_READ)
            promoted.update((r["item_id"], r.get("fact_id")) for r in page)
            if len(page) < ROWS_PER_READ:
                break
            after = [page[-1]["item_id"]]
        return [{**r, "promoted": r["id"] in promoted, "fact_id": promoted.get(r["id"])} for r in rows]

    @operation
    def promoted_facts(self, *, user_id: str, limit: int = PROMPT_FACTS) -> Op[list[Fact]]:
        """The facts made by promotion, most confirmed first: the small always-in-prompt set."""
        rows = yield db.promoted_facts(user_id=v.user_id(user_id), limit=v.limit(limit, 1000), now=self._shared.now())
        return [convert.fact(r) for r in rows]

    @operation
    def memory_markdown(self, *, user_id: str, limit: int = MARKDOWN_ENTRIES) -> Op[str]:
        """A MEMORY.md text: the user's facts by category (at most ``limit``: the promoted ones
        first, then the newest), each promoted one with how often it came up, and the pinned notes."""
        uid = v.user_id(user_id)
        cap = v.limit(limit, 10_000)
        now = self._shared.now()
        counts = {r["id"]: r["promoted_items"] for r in (yield db.promoted_facts(user_id=uid, limit=cap, now=now))}
        rows = yield from self._facts.newest_facts(uid)
        rows = sorted(rows, key=lambda r: -counts.get(r["id"], 0))  # stable: the rest stay newest first
        pinned: list[dict] = []
        where = Filters(user_id=uid, now=now, types=PROMOTABLE_TYPES)
        offset = 0
        while len(pinned) < PINNED_NOTES:  # the backends filter no pinned flag: read pages, newest first
            page = yield db.list_items(filters=where, limit=ROWS_PER_READ, offset=offset)
            pinned += [r for r in page if r.get("pinned")]
            offset += ROWS_PER_READ
            if len(page) < ROWS_PER_READ:
                break
        return render_memory_markdown([convert.fact(r) for r in rows], user_id=uid, limit=cap, pinned=pinned,
                                      promoted=counts)
