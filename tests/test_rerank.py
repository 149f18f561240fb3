"""Re-ranking heuristics: pinned +0.20, person +0.15, recency -0.10*min(1, age/90), stable ties."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from navi_memory.retrieval.rerank import (PERSON_BOOST, PINNED_BOOST, RECENCY_HORIZON_DAYS, RECENCY_PENALTY,
                                          RankInput, adjustments, rerank)

NOW = datetime(2025, 6, 1, tzinfo=timezone.utc)
approx = pytest.approx


def row(id=1, fused=0.5, age_days=0.0, observed_days=None, pinned=False, person=None) -> RankInput:
    return RankInput(id=id, fused=fused, created_at=NOW - timedelta(days=age_days),
                     observed_at=None if observed_days is None else NOW - timedelta(days=observed_days),
                     pinned=pinned, person=person)


def test_constants_match_the_spec():
    assert (PINNED_BOOST, PERSON_BOOST, RECENCY_PENALTY, RECENCY_HORIZON_DAYS) == (0.20, 0.15, 0.10, 90.0)


def test_fresh_unpinned_row_has_no_adjustment():
    assert adjustments(row(), NOW) == {}


def test_pinned_gets_plus_0_20():
    assert adjustments(row(pinned=True), NOW) == {"pinned": approx(0.20)}


def test_person_hint_gets_plus_0_15():
    assert adjustments(row(person="alice"), NOW, person_hints=["alice"]) == {"person": approx(0.15)}


def test_person_without_matching_hint_gets_nothing():
    assert adjustments(row(person="alice"), NOW, person_hints=["bob"]) == {}
    assert adjustments(row(person=None), NOW, person_hints=["bob"]) == {}


@pytest.mark.parametrize("age, penalty", [(9, 0.01), (45, 0.05), (90, 0.10), (365, 0.10)])
def test_recency_penalty_grows_linearly_to_0_10_at_90_days(age, penalty):
    assert adjustments(row(age_days=age), NOW) == {"recency": approx(-penalty)}


def test_recency_uses_observed_at_before_created_at():
    assert adjustments(row(age_days=300, observed_days=45), NOW) == {"recency": approx(-0.05)}


def test_future_timestamps_give_no_penalty():
    assert adjustments(row(age_days=-10), NOW) == {}


def test_pinned_rows_do_not_decay():
    assert adjustments(row(age_days=365, pinned=True), NOW) == {"pinned": approx(0.20)}


def test_recency_decay_can_be_switched_off():
    assert adjustments(row(age_days=365), NOW, recency_decay=False) == {}


def test_all_adjustments_add_up_in_the_score():
    ranked = rerank([row(fused=0.4, person="al", age_days=45)], NOW, person_hints=["al"])
    assert ranked[0].score == approx(0.4 + 0.15 - 0.05)
    assert ranked[0].adjustments == {"person": approx(0.15), "recency": approx(-0.05)}


def test_pinned_boost_overtakes_a_better_unpinned_row():
    ranked = rerank([row(id=1, fused=0.9), row(id=2, fused=0.75, pinned=True)], NOW)
    assert [r.id for r in ranked] == [2, 1]
    assert ranked[0].score == approx(0.95)


def test_old_row_loses_to_a_slightly_worse_fresh_one():
    ranked = rerank([row(id=1, fused=0.55, age_days=200), row(id=2, fused=0.5)], NOW)
    assert [r.id for r in ranked] == [2, 1]
    assert ranked[1].score == approx(0.45)


def test_ties_prefer_newer_created_at():
    ranked = rerank([row(id=1, age_days=2), row(id=2, age_days=1), row(id=3, age_days=3)], NOW, recency_decay=False)
    assert [r.id for r in ranked] == [2, 1, 3]


def test_ties_with_same_created_at_prefer_lower_id():
    rows = [row(id=10), row(id=2), row(id=7)]
    assert [r.id for r in rerank(rows, NOW)] == [2, 7, 10]
    assert [r.id for r in rerank(list(reversed(rows)), NOW)] == [2, 7, 10]


def test_numeric_ids_tie_break_numerically_not_lexically():
    assert [r.id for r in rerank([row(id=10), row(id=9)], NOW)] == [9, 10]


def test_rerank_of_nothing():
    assert rerank([], NOW) == []
