"""Time in queries and in memories, for ranking: pure functions, English.

Two general signals, used by ``rerank.adjustments``:

* a question about *when* ("When did ...", "How long has ...", "What year ...") is answered by a
  memory that says when: one holding a time expression ("yesterday", "last week", "in 2019",
  "for 3 years", "on Friday"); most memories hold none;
* a query that names a date, a month or a year ("on 3 June, 2023", "in October 2023") asks about
  what was observed then: memories whose ``observed_at`` falls in that period, or shortly after it
  (things are told after they happen: "last month", "yesterday").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")
_MONTH = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?" \
         r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
_YEAR = r"((?:19|20)\d\d)"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_DAY_MONTH_YEAR = re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}\.?,?\s+{_YEAR}\b", re.I)
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\.?\s+{_DAY},?\s+{_YEAR}\b", re.I)
_MONTH_YEAR = re.compile(rf"\b{_MONTH}\.?,?\s+(?:of\s+)?{_YEAR}\b", re.I)
_YEAR_ONLY = re.compile(rf"\b{_YEAR}\b")

_WHEN = re.compile(r"\b(when|how long|since when|what (?:year|month|day|date|time|week)|which (?:year|month|day|date)"
                   r"|how many (?:years|months|weeks|days) ago|what (?:period|season))\b", re.I)
_TIME = re.compile(
    r"\b(yesterday|today|tonight|tomorrow|ago|recently|lately|earlier|soon|later|weekend|weekends"
    r"|(?:last|next|this|past|coming|previous|few|couple of)\s+(?:\w+\s+)?(?:week|weeks|month|months|year|years|day|days"
    r"|night|morning|evening|summer|spring|fall|autumn|winter|weekend|time)"
    r"|monday|tuesday|wednesday|thursday|friday|saturday|sunday|mondays|fridays|saturdays|sundays"
    r"|january|february|march|april|june|july|august|september|october|november|december"
    r"|(?:19|20)\d\d|\d+\s+(?:years?|months?|weeks?|days?|hours?)|since|until|anniversary|birthday)\b", re.I)

# How long after a named period a memory of it is still likely to be told.
AFTER = {"day": timedelta(days=7), "month": timedelta(days=31), "year": timedelta(0)}


@dataclass(frozen=True)
class QueryTime:
    """What a query says about time: whether it asks *when*, and the period it names (UTC)."""

    asks_when: bool = False
    start: datetime | None = None
    end: datetime | None = None  # exclusive, with the telling delay (``AFTER``) added

    @property
    def says_anything(self) -> bool:
        return self.asks_when or self.start is not None

    def covers(self, when: datetime | None) -> bool:
        """Whether ``when`` (aware, or naive UTC) falls in the named period or shortly after it."""
        if when is None or self.start is None or self.end is None:
            return False
        moment = when if when.tzinfo else when.replace(tzinfo=timezone.utc)
        return self.start <= moment < self.end


def _month(name: str) -> int:
    return next(i for i, month in enumerate(MONTHS, start=1) if month.startswith(name.lower()[:3]))


def _period(query: str) -> tuple[datetime, datetime, str] | None:
    for pattern, order in ((_DAY_MONTH_YEAR, "dmy"), (_MONTH_DAY_YEAR, "mdy")):
        for match in pattern.finditer(query):
            day, month, year = (match.group(1), match.group(2), match.group(3)) if order == "dmy" else \
                (match.group(2), match.group(1), match.group(3))
            try:
                start = datetime(int(year), _month(month), int(day), tzinfo=timezone.utc)
            except ValueError:  # 31 February
                continue
            return start, start + timedelta(days=1), "day"
    match = _MONTH_YEAR.search(query)
    if match:
        year, month = int(match.group(2)), _month(match.group(1))
        start = datetime(year, month, 1, tzinfo=timezone.utc)
        end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=timezone.utc)
        return start, end, "month"
    match = _YEAR_ONLY.search(query)
    if match:
        year = int(match.group(1))
        return datetime(year, 1, 1, tzinfo=timezone.utc), datetime(year + 1, 1, 1, tzinfo=timezone.utc), "year"
    return None


def read_query(query: str) -> QueryTime:
    """The time signals of a search query."""
    period = _period(query)
    if period is None:
        return QueryTime(asks_when=bool(_WHEN.search(query)))
    start, end, unit = period
    return QueryTime(asks_when=bool(_WHEN.search(query)), start=start, end=end + AFTER[unit])


def mentions_time(text: str) -> bool:
    """Whether ``text`` holds a time expression (a relative day, week or month, a weekday, a
    month name, a year, a duration)."""
    return bool(_TIME.search(text))
