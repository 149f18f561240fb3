"""Score fusion: min-max normalisation, weighted 0.7/0.3 fusion and reciprocal rank fusion (k=60)."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from navi_memory.retrieval.fusion import (DEFAULT_WEIGHTS, RRF_K, min_max, ranked_ids, rrf_fusion,
                                          weighted_fusion)
from navi_memory.retrieval.search import SearchPlan

approx = pytest.approx


def test_default_weights_and_k():
    assert DEFAULT_WEIGHTS == {"semantic": 0.7, "fts": 0.3}
    assert RRF_K == 60


def test_min_max_scales_to_unit_interval():
    assert min_max({"a": 2.0, "b": 4.0, "c": 3.0}) == {"a": 0.0, "b": 1.0, "c": 0.5}


def test_min_max_handles_negative_scores():
    assert min_max({"a": -10.0, "b": -5.0}) == {"a": 0.0, "b": 1.0}


def test_min_max_of_equal_scores_is_all_ones():
    assert min_max({"a": 0.3, "b": 0.3}) == {"a": 1.0, "b": 1.0}
    assert min_max({"only": -7.0}) == {"only": 1.0}


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
