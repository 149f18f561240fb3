"""Time in queries and memories (retrieval.dates) and the ranking boosts that use it. Pure."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from navi_memory.retrieval import rerank
from navi_memory.retrieval.dates import QueryTime, mentions_time, read_query, zone
from navi_memory.retrieval.rerank import RankInput, adjustments

UTC = timezone.utc
NOW = datetime(2024, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize("query", ["When did Ann adopt a puppy?", "How long has Bob played chess?",
                                   "What year did they move?", "since when do you run", "which month was it"])
def test_questions_about_when(query):
    assert read_query(query).asks_when


@pytest.mark.parametrize("query", ["What did Ann adopt?", "Where does Bob live?", "whenever"])
def test_other_questions_do_not_ask_when(query):
    assert not read_query(query).asks_when


@pytest.mark.parametrize("query, start, end", [
    ("What did Maria donate on 3 June, 2023?", datetime(2023, 6, 3), datetime(2023, 6, 11)),
    ("What happened on October 13, 2023?", datetime(2023, 10, 13), datetime(2023, 10, 21)),
    ("the 1st of Feb 2023 party", datetime(2023, 2, 1), datetime(2023, 2, 9)),
    ("What setback did Melanie face in October 2023?", datetime(2023, 10, 1), datetime(2023, 12, 2)),
    ("plans for December, 2023", datetime(2023, 12, 1), datetime(2024, 2, 1)),
    ("trips in 2022", datetime(2022, 1, 1), datetime(2023, 1, 1)),
])
def test_named_periods_run_on_for_the_telling_delay(query, start, end):
    when = read_query(query)
    assert (when.start, when.end) == (start.replace(tzinfo=UTC), end.replace(tzinfo=UTC))


def test_no_period_without_a_date_and_impossible_days_fall_back():
    assert read_query("What did Ann say about May?").start is None
    assert read_query("on 31 February, 2023").start == datetime(2023, 2, 1, tzinfo=UTC)  # the month
    assert not QueryTime().says_anything and read_query("When?").says_anything


def test_covers_takes_naive_times_as_utc_and_nothing_without_a_period():
    when = read_query("in October 2023")
    assert when.covers(datetime(2023, 10, 31, 23)) and when.covers(datetime(2023, 11, 20, tzinfo=UTC))
    assert not when.covers(datetime(2023, 9, 30, tzinfo=UTC)) and not when.covers(None)
    assert not read_query("When did it happen?").covers(NOW)


@pytest.mark.parametrize("text", ["I adopted a pup last week", "We met yesterday", "I've had them for 3 years now",
                                  "back in 2019", "See you on Friday!", "It was in October", "a few weeks ago"])
def test_time_expressions(text):
    assert mentions_time(text)


@pytest.mark.parametrize("text", ["I love my turtles", "Her name is Shadow!", "You may like it", "Lisbon is lovely"])
def test_texts_without_time(text):
    assert not mentions_time(text)


def test_boosts_apply_only_when_the_query_and_the_row_agree():
    timed = RankInput(id=1, fused=0.5, created_at=NOW, mentions_time=True,
                      observed_at=datetime(2023, 10, 5, tzinfo=UTC))
    plain = RankInput(id=2, fused=0.5, created_at=NOW, observed_at=datetime(2023, 3, 5, tzinfo=UTC))
    asks = read_query("When did Ann move in October 2023?")
    assert adjustments(timed, NOW, recency_decay=False, when=asks) == {
        "when": pytest.approx(rerank.WHEN_BOOST), "date": pytest.approx(rerank.DATE_BOOST)}
    assert adjustments(plain, NOW, recency_decay=False, when=asks) == {}
    assert adjustments(timed, NOW, recency_decay=False, when=read_query("What did Ann buy?")) == {}
    assert adjustments(timed, NOW, recency_decay=False) == {}
    order = rerank.rerank([plain, timed], NOW, recency_decay=False, when=asks)
    assert [r.id for r in order] == [1, 2]


@pytest.mark.parametrize("query", ["How many weeks passed between the two adoptions?", "how many years ago was it"])
def test_counting_time_asks_when(query):
    assert read_query(query).asks_when


@pytest.mark.parametrize("query, start, end", [
    ("what happened on 2023-05-08", datetime(2023, 5, 8), datetime(2023, 5, 16)),
    ("notes from 2023-05", datetime(2023, 5, 1), datetime(2023, 7, 2)),
    ("the 2023-13 sprint in 2023", datetime(2023, 1, 1), datetime(2024, 1, 1)),  # no 13th month: the year
])
def test_iso_dates_and_months(query, start, end):
    when = read_query(query)
    assert (when.start, when.end, when.every_year) == (start.replace(tzinfo=UTC), end.replace(tzinfo=UTC), False)


def test_a_month_without_a_year_is_that_month_of_any_year():
    when = read_query("When did Melanie go camping in June?")
    assert when.every_year and when.asks_when
    for moment in (datetime(2019, 6, 1), datetime(2023, 6, 30, 23), datetime(2023, 7, 20)):  # July: told after
        assert when.covers(moment)
    for moment in (datetime(2023, 5, 31), datetime(2023, 8, 2), datetime(2024, 1, 15)):
        assert not when.covers(moment)
    december = read_query("gifts at the end of December")
    assert december.covers(datetime(2024, 1, 20)) and december.covers(datetime(2023, 12, 24))
    assert not december.covers(datetime(2024, 2, 2)) and not december.covers(datetime(1, 1, 5))


@pytest.mark.parametrize("query", ["You may like it", "this may be wrong", "March on!", "the may pole"])
def test_month_words_that_are_not_months(query):
    assert read_query(query).start is None


THURSDAY = datetime(2026, 11, 26, 15, tzinfo=UTC)


@pytest.mark.parametrize("query, start, end", [
    ("what did I say yesterday?", datetime(2026, 11, 25), datetime(2026, 12, 3)),
    ("what did we talk about today", datetime(2026, 11, 26), datetime(2026, 12, 4)),
    ("plans I made last night", datetime(2026, 11, 25), datetime(2026, 12, 3)),
    ("what did I cook last week", datetime(2026, 11, 16), datetime(2026, 11, 30)),
    ("this week's plans", datetime(2026, 11, 23), datetime(2026, 12, 7)),
    ("last weekend", datetime(2026, 11, 21), datetime(2026, 11, 30)),
    ("films this month", datetime(2026, 11, 1), datetime(2027, 1, 1)),
    ("films last month", datetime(2026, 10, 1), datetime(2026, 12, 2)),
    ("trips last year", datetime(2025, 1, 1), datetime(2026, 1, 1)),
    ("3 days ago", datetime(2026, 11, 23), datetime(2026, 12, 1)),
    ("two weeks ago", datetime(2026, 11, 9), datetime(2026, 11, 23)),
    ("a couple of months ago", datetime(2026, 9, 1), datetime(2026, 11, 1)),
    ("what was it, 11 months ago?", datetime(2025, 12, 1), datetime(2026, 2, 1)),  # a year back
    ("a year ago", datetime(2025, 1, 1), datetime(2026, 1, 1)),
])
def test_relative_periods_are_read_from_the_time_of_the_search(query, start, end):
    when = read_query(query, THURSDAY)
    assert (when.start, when.end) == (start.replace(tzinfo=UTC), end.replace(tzinfo=UTC))
    assert read_query(query).start is None  # without the time of the search, nothing relative


def test_an_absolute_date_wins_over_a_relative_one():
    assert read_query("what did I say yesterday about 3 June, 2023", THURSDAY).start == datetime(2023, 6, 3, tzinfo=UTC)
    assert read_query("yesterday", THURSDAY.replace(tzinfo=None)).start == datetime(2026, 11, 25, tzinfo=UTC)


def test_days_are_those_of_the_time_zone_of_now():
    la = zone("America/Los_Angeles")
    evening = datetime(2026, 11, 26, 3, tzinfo=UTC).astimezone(la)  # 25 November, 19:00 in Los Angeles
    yesterday = read_query("what did I say yesterday?", evening)
    assert yesterday.start == datetime(2026, 11, 24, 8, tzinfo=UTC)  # midnight in Los Angeles
    assert yesterday.covers(datetime(2026, 11, 24, 20, tzinfo=UTC)) and not yesterday.covers(
        datetime(2026, 11, 24, 6, tzinfo=UTC))
    assert read_query("what did I say yesterday?", evening.astimezone(UTC)).start == datetime(2026, 11, 25, tzinfo=UTC)
    lisbon = read_query("on 3 June, 2023", datetime(2024, 1, 1, tzinfo=zone("Europe/Lisbon")))
    assert lisbon.start == datetime(2023, 6, 2, 23, tzinfo=UTC)  # summer time: UTC+1
    june = read_query("camping in June", datetime(2024, 1, 1, tzinfo=zone("Asia/Tokyo")))
    assert june.covers(datetime(2023, 5, 31, 16, tzinfo=UTC)) and not june.covers(datetime(2023, 5, 31, 14, tzinfo=UTC))


def test_time_zones_by_name():
    assert zone("UTC") is timezone.utc and zone(" utc ") is timezone.utc
    assert str(zone("Europe/Lisbon")) == "Europe/Lisbon"
    for bad in ("Mars/Olympus", "", "../etc/passwd", None, 5, "localtime", "posixrules", "Europe/Lisbon\x00",
                "Europe", "Europe/" + "x" * 300, "x" * 300):  # with tzdata: a folder, a file name too long
        with pytest.raises(ValueError):
            zone(bad)
    with pytest.raises(ValueError) as long_name:  # a long name is not echoed whole
        zone("x" * 5000)
    assert len(str(long_name.value)) < 200
