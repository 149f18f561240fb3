"""Time in queries and in memories, for ranking: pure functions, English.

Two general signals, used by ``rerank.adjustments``:

* a question about *when* ("When did ...", "How long has ...", "What year ...") is answered by a
  memory that says when: one holding a time expression ("yesterday", "last week", "in 2019",
  "for 3 years", "on Friday"); most memories hold none;
* a query that names a date, a month or a year ("on 3 June, 2023", "in October 2023", "2023-06-03",
  "in June": that month of any year) asks about what was observed then: memories whose
  ``observed_at`` falls in that period, or shortly after it (things are told after they happen:
  "last month", "yesterday"). Given the time of the search, relative periods are read too
  ("yesterday", "last week", "this month", "two weeks ago"). Days are those of the time zone of
  that time (``read_query(query, now)``; UTC without it): a user's "yesterday" ends at her midnight.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone, tzinfo

from ..core.timeutil import LATEST, in_zone
from ..core.timeutil import zone as zone  # the time zone of a name; kept importable from here

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
_ISO_DAY = re.compile(r"\b((?:19|20)\d\d)-(\d\d)-(\d\d)\b")
_ISO_MONTH = re.compile(r"\b((?:19|20)\d\d)-(\d\d)\b(?!-\d)")
# A month without a year only after a word that makes it a time ("in May", not "you may", "this may").
_MONTH_ALONE = re.compile(r"\b(?:in|during|around|since|by|until|before|after|early|mid|late|last"
                          r"|(?:beginning|start|middle|end) of)[\s-]+(january|february|march|april|may|june|july"
                          r"|august|september|october|november|december)\b", re.I)
_NUMBER = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "a couple of": 2,
           "couple of": 2}
_RELATIVE = re.compile(r"\b(today|tonight|this (?:morning|afternoon|evening)|yesterday|last night"
                       r"|(?:this|last) (?:week|weekend|month|year)"
                       r"|(\d{1,2}|an?|one|two|three|four|five|six|(?:a )?couple of) (day|week|month|year)s? ago)\b",
                       re.I)

_WHEN = re.compile(r"\b(when|how long|since when|what (?:year|month|day|date|time|week)|which (?:year|month|day|date)"
                   r"|how many (?:years|months|weeks|days)|what (?:period|season))\b", re.I)
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
    """What a query says about time: whether it asks *when*, and the period it names (UTC);
    ``every_year``: the period's month and day in any year (a month named without a year)."""

    asks_when: bool = False
    start: datetime | None = None
    end: datetime | None = None  # exclusive, with the telling delay (``AFTER``) added
    every_year: bool = False

    @property
    def says_anything(self) -> bool:
        return self.asks_when or self.start is not None

    def covers(self, when: datetime | None) -> bool:
        """Whether ``when`` (aware, or naive UTC) falls in the named period or shortly after it."""
        if when is None or self.start is None or self.end is None:
            return False
        moment = when if when.tzinfo else when.replace(tzinfo=timezone.utc)
        if not self.every_year:
            return self.start <= moment < self.end
        # the period of the moment's year, or of the year before (December runs on into January)
        year = in_zone(moment, self.start.tzinfo).year  # a moment at the calendar's edge: no OverflowError
        starts = (self.start.replace(year=y) for y in (year, year - 1) if y > 1)
        return any(start <= moment < _plus(start, self.end - self.start) for start in starts)


def _plus(start: datetime, span: timedelta) -> datetime:
    """``start + span``, or the end of the calendar when that lies past the year 9999."""
    try:
        return start + span
    except OverflowError:
        return LATEST


def _month(name: str) -> int:
    return next(i for i, month in enumerate(MONTHS, start=1) if month.startswith(name.lower()[:3]))


def _month_period(year: int, month: int, tz: tzinfo = timezone.utc) -> tuple[datetime, datetime, str]:
    start = datetime(year, month, 1, tzinfo=tz)
    return start, datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=tz), "month"


def _year_period(year: int, tz: tzinfo = timezone.utc) -> tuple[datetime, datetime, str]:
    return datetime(year, 1, 1, tzinfo=tz), datetime(year + 1, 1, 1, tzinfo=tz), "year"


def _day_period(year: int, month: int, day: int, tz: tzinfo = timezone.utc) -> tuple[datetime, datetime, str] | None:
    try:
        start = datetime(year, month, day, tzinfo=tz)
    except ValueError:  # 31 February
        return None
    return start, start + timedelta(days=1), "day"


def _period(query: str, tz: tzinfo = timezone.utc) -> tuple[datetime, datetime, str] | None:
    for pattern, order in ((_DAY_MONTH_YEAR, "dmy"), (_MONTH_DAY_YEAR, "mdy")):
        for match in pattern.finditer(query):
            day, month, year = (match.group(1), match.group(2), match.group(3)) if order == "dmy" else \
                (match.group(2), match.group(1), match.group(3))
            if found := _day_period(int(year), _month(month), int(day), tz):
                return found
    for match in _ISO_DAY.finditer(query):
        if found := _day_period(int(match.group(1)), int(match.group(2)), int(match.group(3)), tz):
            return found
    if month_year := _MONTH_YEAR.search(query):
        return _month_period(int(month_year.group(2)), _month(month_year.group(1)), tz)
    for match in _ISO_MONTH.finditer(query):
        if 1 <= int(match.group(2)) <= 12:
            return _month_period(int(match.group(1)), int(match.group(2)), tz)
    if year_only := _YEAR_ONLY.search(query):
        return _year_period(int(year_only.group(1)), tz)
    return None


def _back(unit: str, count: int, now: datetime) -> tuple[datetime, datetime, str]:
    """The day, week (from Monday), month or year ``count`` of them before ``now``'s (in ``now``'s
    time zone)."""
    tz = now.tzinfo or timezone.utc
    today = datetime(now.year, now.month, now.day, tzinfo=tz)
    if unit in ("day", "week"):
        length = timedelta(days=1) if unit == "day" else timedelta(weeks=1)
        start = (today if unit == "day" else today - timedelta(days=today.weekday())) - count * length
        return start, start + length, "day"
    if unit == "month":
        index = now.year * 12 + now.month - 1 - count
        return _month_period(index // 12, index % 12 + 1, tz)
    return _year_period(now.year - count, tz)


def _relative(query: str, now: datetime) -> tuple[datetime, datetime, str] | None:
    """The period a relative expression names, counted back from ``now``."""
    match = _RELATIVE.search(query)
    if match is None:
        return None
    if match.group(2):  # "<n> <unit>s ago"
        return _back(match.group(3).lower(), _NUMBER.get(match.group(2).lower(), 0) or int(match.group(2)), now)
    phrase = " ".join(match.group(1).lower().split())
    if phrase in ("yesterday", "last night"):
        return _back("day", 1, now)
    which, unit = phrase.split() if " " in phrase else ("this", "day")  # today, tonight
    if unit in ("morning", "afternoon", "evening"):
        return _back("day", 0, now)
    if unit == "weekend":  # the last whole weekend, or this week's
        monday = _back("week", 0, now)[0]
        start = monday - timedelta(days=2 if which == "last" else -5)
        return start, start + timedelta(days=2), "day"
    return _back(unit, int(which == "last"), now)


def read_query(query: str, now: datetime | None = None) -> QueryTime:
    """The time signals of a search query; relative periods ("last week") only given ``now``. Days
    are those of ``now``'s time zone (naive: UTC), e.g. ``now.astimezone(zone("Europe/Lisbon"))``."""
    now = None if now is None else now if now.tzinfo else now.replace(tzinfo=timezone.utc)
    tz = timezone.utc if now is None else now.tzinfo or timezone.utc
    asks_when = bool(_WHEN.search(query))
    period, every_year = _period(query, tz), False
    if period is None and (match := _MONTH_ALONE.search(query)):
        period, every_year = _month_period(2000, _month(match.group(1)), tz), True
    if period is None and now is not None:
        period = _relative(query, now)
    if period is None:
        return QueryTime(asks_when=asks_when)
    start, end, unit = period
    return QueryTime(asks_when=asks_when, start=start, end=end + AFTER[unit], every_year=every_year)


def mentions_time(text: str) -> bool:
    """Whether ``text`` holds a time expression (a relative day, week or month, a weekday, a
    month name, a year, a duration)."""
    return bool(_TIME.search(text))
