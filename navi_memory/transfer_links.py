"""What ties the records of an export file together, checked before anything is written. Pure.

Promotions name an item by the id it had in the exporting store (the ``id`` of an earlier item
record of the same user) and a fact by its natural key (category, key); both must come earlier in
the file. Persons must form a valid household together with the persons the target store already
has: no two with one name, no alias that is another person's name, one person at most in single
mode. ``FileLinks`` follows a file record by record (the checking pass of an import) and keeps
what that needs: the exported ids of items and the fact keys per user, and the households.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from .errors import ValidationError
from .core.persons import Person, check_aliases, norm


@dataclass
class Household:
    """A user's household as the file describes it: its mode (None: no user record seen) and its
    persons, each with the label of its line."""

    mode: str | None = None
    persons: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


class FileLinks:
    """References between the records of one file, followed in file order."""

    def __init__(self) -> None:
        self.items: set[tuple[str, int]] = set()
        self.facts: set[tuple[str, str, str]] = set()
        self.households: dict[str, Household] = {}

    def see(self, record: dict[str, Any], label: str) -> None:
        """Take note of a checked record; ValidationError when it names one the file lacks."""
        kind, uid = record["type"], record["user_id"]
        if kind == "item" and record["source_id"] is not None:
            self.items.add((uid, record["source_id"]))
        elif kind == "fact":
            self.facts.add((uid, record["category"], record["key"]))
            if isinstance(record["item"], dict) and record["item"]["source_id"] is not None:
                self.items.add((uid, record["item"]["source_id"]))
        elif kind == "user":
            self.households.setdefault(uid, Household()).mode = record["household_mode"]
        elif kind == "person":
            self.households.setdefault(uid, Household()).persons.append((label, record))
        elif kind == "promotion":
            if (uid, record["item"]) not in self.items:
                raise ValidationError(f"promotion names item {record['item']}, which is not the id of an earlier"
                                      f" item record of user {uid!r}")
            fact = record["fact"]
            if fact is not None and (uid, fact["category"], fact["key"]) not in self.facts:
                raise ValidationError(f"promotion names fact {fact['category']}/{fact['key']}, which is not an"
                                      f" earlier fact record of user {uid!r}")

    def take_households(self) -> dict[str, Household]:
        """The households seen since the last call (one batch of a single-pass import)."""
        out, self.households = self.households, {}
        return out


def household_problem(household: Household, stored: Sequence[Person], stored_mode: str) -> str | None:
    """Why the file's persons cannot join the stored household (prefixed with the line), or None.
    A person whose name is stored already is skipped by the import, so it is not checked."""
    taken = {norm(p.display_name) for p in stored}
    members = list(stored)
    mode = "multi" if "multi" in (household.mode, stored_mode) else "single"
    for number, (label, record) in enumerate(household.persons):
        if norm(record["display_name"]) in taken:
            continue
        candidate = Person(id=-1 - number, user_id=record["user_id"], display_name=record["display_name"],
                           aliases=record["aliases"])
        problem = check_aliases(members, candidate)
        if problem is None and mode == "single" and members:
            problem = "a single-mode household holds one person (the user record sets household_mode multi)"
        if problem is not None:
            return f"{label}: {problem}"
        members.append(candidate)
        taken.add(norm(candidate.display_name))
    return None
