"""Score fusion: normalisation (min-max, cosine scaling, sets without spread), weighted 0.7/0.3 fusion,
reciprocal rank fusion (k=60), and the relevance floor of the search plan."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st

from navi_memory.retrieval.fusion import (DEFAULT_WEIGHTS, RRF_K, SIMILARITY_SPREAD, min_max, ranked_ids,
                                          rrf_fusion, scale_similarity, weighted_fusion)
from navi_memory.retrieval.search import LEXICAL_CREDIT, Fused, SearchPlan

approx = pytest.approx


def test_default_weights_and_k():
    assert DEFAULT_WEIGHTS == {"semantic": 0.7, "fts": 0.3}
    assert RRF_K == 60


def test_min_max_scales_to_unit_interval():
    assert min_max({"a": 2.0, "b": 4.0, "c": 3.0}) == {"a": 0.0, "b": 1.0, "c": 0.5}


def test_min_max_handles_negative_scores():
    assert min_max({"a": -10.0, "b": -5.0}) == {"a": 0.0, "b": 1.0}


def test_min_max_of_a_set_without_spread_is_not_one_by_construction():
    # equal positive lexical scores all matched the query: as good as a match gets
    assert min_max({"a": 0.3, "b": 0.3}) == {"a": 1.0, "b": 1.0}
    assert min_max({"only": 2.5}) == {"only": 1.0}
    # nothing positive is no match: 0, not the 1.0 plain min-max used to give
    assert min_max({"only": -7.0}) == {"only": 0.0}
    assert min_max({"a": 0.0, "b": 0.0, "c": 0.0}) == {"a": 0.0, "b": 0.0, "c": 0.0}
    assert min_max({"a": 4.0, "b": 4.0}, flat=lambda value: 0.5) == {"a": 0.5, "b": 0.5}


def test_scale_similarity_keeps_absolute_cosine_for_a_set_without_spread():
    assert scale_similarity({"pin": 0.0}) == {"pin": 0.0}  # the one unrelated note is not a perfect match
    assert scale_similarity({"a": 0.0, "b": 0.0, "c": 0.0}) == {"a": 0.0, "b": 0.0, "c": 0.0}
    assert scale_similarity({"only": 0.42}) == {"only": approx(0.42)}
    assert scale_similarity({"a": 0.8, "b": 0.8}) == {"a": approx(0.8), "b": approx(0.8)}
    assert scale_similarity({"neg": -0.3, "big": 1.5}) == {"neg": 0.0, "big": 1.0}  # clipped (spread 1.8: min-max)
    assert scale_similarity({"a": -0.2, "b": -0.2}) == {"a": 0.0, "b": 0.0}
    assert scale_similarity({}) == {}


def test_scale_similarity_is_min_max_from_the_full_spread_and_blends_below():
    assert scale_similarity({"a": 0.2, "b": 0.5, "c": 0.35}) == {"a": 0.0, "b": 1.0, "c": approx(0.5)}
    assert SIMILARITY_SPREAD == 0.1
    # spread 0.05: half relative, half absolute
    out = scale_similarity({"a": 0.30, "b": 0.35})
    assert out["a"] == approx(0.5 * 0.0 + 0.5 * 0.30)
    assert out["b"] == approx(0.5 * 1.0 + 0.5 * 0.35)
    # near-equal similarities stay near their absolute value instead of becoming 0 and 1
    tiny = scale_similarity({"a": 0.05, "b": 0.05 + 1e-7})
    assert tiny["a"] == approx(0.05, abs=1e-5) and tiny["b"] == approx(0.05, abs=1e-5)
    assert tiny["a"] <= tiny["b"]


def test_normalisation_never_returns_nan():
    nan, inf = float("nan"), float("inf")
    assert scale_similarity({"zero-vector": nan}) == {"zero-vector": 0.0}
    assert scale_similarity({"a": nan, "b": 0.6, "c": 0.1}) == {"a": 0.0, "b": 1.0, "c": approx(1 / 6)}
    assert min_max({"a": nan, "b": 2.0}) == {"a": 0.0, "b": 1.0}
    assert min_max({"a": inf, "b": -inf}) == {"a": 1.0, "b": 0.0}
    assert min_max({"a": inf, "b": inf}) == {"a": 1.0, "b": 1.0}


def test_weighted_fusion_of_one_unrelated_candidate_is_not_a_perfect_match():
    # "what is the capital of France?" against a user whose only note is "my bank PIN is 4242"
    assert weighted_fusion({"semantic": {1: 0.0}, "fts": {}}) == {1: (0.0, {"semantic": 0.0})}
    fused = weighted_fusion({"semantic": {1: 0.0, 2: 0.0, 3: 0.0}, "fts": {}})
    assert {key: score for key, (score, _) in fused.items()} == {1: 0.0, 2: 0.0, 3: 0.0}
    assert weighted_fusion({"semantic": {1: 0.31}, "fts": {}})[1][0] == approx(0.31)
    # a single full-text match is a match
    assert weighted_fusion({"semantic": {}, "fts": {7: 0.001}})[7][0] == approx(1.0)


finite_or_nan = st.one_of(st.floats(-1.0, 1.0), st.just(float("nan")))


@settings(derandomize=True, max_examples=300)
@given(st.dictionaries(st.integers(), finite_or_nan, min_size=1))
def test_scale_similarity_stays_in_range_keeps_order_and_has_no_nan(scores):
    out = scale_similarity(scores)
    assert set(out) == set(scores)
    assert all(0.0 <= x <= 1.0 for x in out.values())
    clean = {k: (0.0 if math.isnan(v) else v) for k, v in scores.items()}
    for a in clean:
        for b in clean:
            if clean[a] < clean[b]:
                assert out[a] <= out[b]
    if len(set(clean.values())) == 1:
        value = next(iter(clean.values()))
        assert all(x == approx(min(1.0, max(0.0, value))) for x in out.values())


def test_min_max_of_nothing_is_empty():
    assert min_max({}) == {}


@given(st.dictionaries(st.integers(), st.floats(-1e6, 1e6), min_size=1))
def test_min_max_stays_in_range_and_keeps_order(scores):
    out = min_max(scores)
    assert set(out) == set(scores)
    assert all(0.0 <= x <= 1.0 for x in out.values())
    for a in scores:
        for b in scores:
            if scores[a] < scores[b]:
                assert out[a] <= out[b]


def test_weighted_fusion_exact_values_with_missing_signals_as_zero():
    fused = weighted_fusion({"semantic": {1: 0.9, 2: 0.5, 3: 0.1}, "fts": {1: 8.0, 4: 2.0}})
    assert set(fused) == {1, 2, 3, 4}
    assert fused[1][0] == approx(0.7 * 1.0 + 0.3 * 1.0)
    assert fused[2][0] == approx(0.7 * 0.5 + 0.3 * 0.0)  # no lexical hit: fts part is 0
    assert fused[3][0] == approx(0.0)
    assert fused[4][0] == approx(0.7 * 0.0 + 0.3 * 0.0)  # no semantic score: semantic part is 0
    assert fused[2][1] == {"semantic": approx(0.5), "fts": 0.0}
    assert fused[4][1] == {"semantic": 0.0, "fts": approx(0.0)}


def test_weighted_fusion_lexical_only_hit_gets_its_weight():
    fused = weighted_fusion({"semantic": {1: 0.8, 2: 0.2}, "fts": {3: 5.0, 1: 1.0}})
    assert fused[3][0] == approx(0.3)  # best lexical, no semantic
    assert fused[1][0] == approx(0.7)  # best semantic, worst lexical


def test_weighted_fusion_single_signal_is_renormalised():
    fused = weighted_fusion({"semantic": {}, "fts": {1: 3.0, 2: 1.0, 3: 2.0}})
    assert {k: v[0] for k, v in fused.items()} == {1: approx(1.0), 2: approx(0.0), 3: approx(0.5)}


def test_weighted_fusion_ignores_unweighted_signals():
    fused = weighted_fusion({"fts": {1: 1.0}, "substring": {2: 1.0}})
    assert set(fused) == {1}
    fused = weighted_fusion({"fts": {1: 1.0}, "substring": {2: 1.0}}, {"fts": 0.3, "substring": 0.0})
    assert set(fused) == {1}


def test_weighted_fusion_custom_weights():
    fused = weighted_fusion({"a": {1: 1.0, 2: 0.0}, "b": {1: 0.0, 2: 1.0}}, {"a": 3.0, "b": 1.0})
    assert fused[1][0] == approx(0.75)
    assert fused[2][0] == approx(0.25)


def test_weighted_fusion_of_nothing_is_empty():
    assert weighted_fusion({"semantic": {}, "fts": {}}) == {}


def test_rrf_exact_values_with_k_60():
    fused = rrf_fusion({"fts": [1, 2, 3], "semantic": [2, 4]})
    assert fused[1][0] == approx(1 / 61)
    assert fused[2][0] == approx(1 / 62 + 1 / 61)
    assert fused[3][0] == approx(1 / 63)
    assert fused[4][0] == approx(1 / 62)
    assert fused[2][1] == {"fts": approx(1 / 62), "semantic": approx(1 / 61)}


def test_rrf_custom_k_and_weights():
    fused = rrf_fusion({"fts": [7], "semantic": [7]}, k=0, weights={"fts": 2.0, "semantic": 0.0})
    assert fused == {7: (approx(2.0), {"fts": approx(1.0)})}


def test_rrf_order_puts_items_found_by_both_first():
    fused = rrf_fusion({"fts": [1, 2], "semantic": [2, 3]})
    assert ranked_ids({k: v[0] for k, v in fused.items()}) == [2, 1, 3]


def test_ranked_ids_sorts_descending_keeping_ties_in_insertion_order():
    assert ranked_ids({"a": 1.0, "b": 3.0, "c": 1.0, "d": 2.0}) == ["b", "d", "a", "c"]
    assert ranked_ids({"a": 1.0, "b": 3.0}, limit=1) == ["b"]


def test_search_plan_uses_50_candidates_weighted_and_40_rrf():
    assert SearchPlan.create("coffee", "weighted").k == 50
    assert SearchPlan.create("coffee", "rrf").k == 40
    assert SearchPlan.create("the best coffee", "weighted").terms == ["best", "coffee"]


def test_search_plan_fuse_flags_signals_per_candidate():
    plan = SearchPlan.create("coffee", "weighted")
    fused = plan.fuse([(1, 5.0), (2, 1.0)], [(1, 0.9), (3, 0.2)], [], {2: 0.1})
    assert fused[1].signals == {"fts": True, "semantic": True, "substring": False, "context": False}
    assert fused[2].signals == {"fts": True, "semantic": False, "substring": False, "context": False}
    assert fused[2].raw == {"fts": 1.0, "semantic": 0.1}  # looked-up cosine is used for scoring
    assert fused[1].score == approx(1.0)


def test_search_plan_substring_counts_only_when_nothing_else_matched():
    plan = SearchPlan.create("latt", "weighted")
    fused = plan.fuse([], [], [(5, 2.0), (6, 1.0)], {})
    assert fused[5].score == approx(1.0) and fused[6].score == approx(0.0)
    assert fused[5].signals["substring"] is True


def test_search_plan_missing_semantic_only_for_weighted():
    assert SearchPlan.create("x", "weighted").missing_semantic([(1, 1.0), (2, 1.0)], [(2, 0.5)]) == [1]
    assert SearchPlan.create("x", "rrf").missing_semantic([(1, 1.0)], []) == []


def _fused(raw: dict, **signals: bool) -> Fused:
    flags = {"fts": False, "semantic": "semantic" in raw, "substring": False, "context": False, **signals}
    return Fused(score=0.5, raw=raw, parts={}, signals=flags)


def test_relevance_is_similarity_with_credit_for_a_content_word_match():
    plan = SearchPlan.create("what is the capital of France?", "weighted")
    assert plan.has_content_terms and LEXICAL_CREDIT == 0.1
    relevance = lambda fused, text="": plan.relevance(fused, text)  # noqa: E731
    assert relevance(_fused({"semantic": 0.0})) == 0.0  # the bank PIN note
    assert relevance(_fused({"semantic": 0.3})) == approx(0.3)
    assert relevance(_fused({"semantic": 0.19}, fts=True)) < 0.3  # a common word is not enough
    assert relevance(_fused({"semantic": 0.2}, fts=True)) >= 0.3
    assert relevance(_fused({"semantic": 0.2}, substring=True)) >= 0.3
    # no vector to judge by: the share of the query's content words the row holds, if it matched
    assert relevance(_fused({}, fts=True), "Paris is the capital of France") == 1.0
    assert relevance(_fused({}, fts=True), "The capital letters") == 0.5
    assert relevance(_fused({}), "Paris is the capital of France") == 0.0
    assert relevance(_fused({"semantic": float("nan")})) == 0.0


def test_relevance_gives_no_credit_for_stop_words():
    plan = SearchPlan.create("what is it?", "weighted")  # only stop words: they are the terms
    assert plan.terms == ["what", "is", "it"] and not plan.has_content_terms
    assert plan.relevance(_fused({"semantic": 0.25}, fts=True), "what is it") == approx(0.25)
    assert plan.relevance(_fused({}, fts=True), "what is it") == 0.0


def test_cosines_of_lexical_hits_are_looked_up_for_a_floor_also_with_rrf():
    assert SearchPlan.create("x", "rrf").missing_semantic([(1, 1.0), (2, 1.0)], [(2, 0.5)], floor=True) == [1]
