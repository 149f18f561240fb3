"""Vector checks (finite, fixed dimension with zero-padding) and the in-memory cosine index."""

from __future__ import annotations

import math

import numpy as np
import pytest

from navi_memory.errors import EmbeddingError, NaviMemoryError
from navi_memory.vectors import VectorIndex, check_vector, from_blob, normalise, to_blob, top_k_order


def test_check_vector_returns_float32():
    vec = check_vector([1, 2, 3])
    assert vec.dtype == np.float32
    assert vec.tolist() == [1.0, 2.0, 3.0]


@pytest.mark.parametrize("bad", [[1.0, math.nan], [math.inf, 0.0], [-math.inf], [], np.array([]),
                                 ["a", "b"], [[1.0], [2.0, 3.0]], None])
def test_check_vector_rejects_non_finite_empty_and_non_numeric(bad):
    with pytest.raises(EmbeddingError):
        check_vector(bad)


def test_embedding_error_is_a_navi_memory_error():
    assert issubclass(EmbeddingError, NaviMemoryError)


def test_check_vector_zero_pads_to_fixed_dimension():
    vec = check_vector([1.0, 2.0], dimensions=5)
    assert vec.tolist() == [1.0, 2.0, 0.0, 0.0, 0.0]
    assert vec.dtype == np.float32


def test_check_vector_exact_dimension_is_unchanged():
    assert check_vector([1.0, 2.0, 3.0], dimensions=3).tolist() == [1.0, 2.0, 3.0]


def test_check_vector_larger_than_fixed_dimension_is_an_error():
    with pytest.raises(EmbeddingError, match="dimensions"):
        check_vector([1.0, 2.0, 3.0], dimensions=2)


def test_blob_round_trip():
    vec = np.array([0.5, -1.25, 3.0], dtype=np.float32)
    assert from_blob(to_blob(vec)).tolist() == vec.tolist()
    assert len(to_blob(vec)) == 12


def test_normalise():
    assert normalise(np.array([3.0, 4.0])).tolist() == pytest.approx([0.6, 0.8])
    assert normalise(np.zeros(3)).tolist() == [0.0, 0.0, 0.0]


def make_index() -> VectorIndex:
    index = VectorIndex(3, capacity=2)
    index.upsert_many([1, 2, 3], np.array([[1, 0, 0], [0, 2, 0], [1, 1, 0]], dtype=np.float32))
    return index


def test_index_upsert_grows_past_capacity_and_normalises():
    index = make_index()
    assert len(index) == 3
    assert index.scores(np.array([0, 1, 0]), [2]) == {2: pytest.approx(1.0)}  # [0, 2, 0] was normalised


def test_index_scores_are_cosines_for_known_ids_only():
    scores = make_index().scores(np.array([1.0, 0.0, 0.0]), [1, 2, 3, 99])
    assert scores == {1: pytest.approx(1.0), 2: pytest.approx(0.0), 3: pytest.approx(1 / math.sqrt(2))}
    assert make_index().scores(np.array([1.0, 0.0, 0.0]), [99]) == {}


def test_index_ranked_returns_all_ids_with_similarities():
    ids, sims = make_index().ranked(np.array([1.0, 0.0, 0.0]))
    got = {int(i): float(s) for i, s in zip(ids, sims)}
    assert got == {1: pytest.approx(1.0), 2: pytest.approx(0.0), 3: pytest.approx(1 / math.sqrt(2))}
    assert [int(ids[j]) for j in top_k_order(sims, 3)] == [1, 3, 2]


def test_index_upsert_existing_id_replaces_vector():
    index = make_index()
    index.upsert_many([1], np.array([[0, 0, 1]], dtype=np.float32))
    assert len(index) == 3
    assert index.dead_rows == 0
    assert index.scores(np.array([0.0, 0.0, 1.0]), [1]) == {1: pytest.approx(1.0)}


def test_index_remove_hides_the_row():
    index = make_index()
    index.remove(1)
    index.remove(12345)  # unknown ids are ignored
    assert len(index) == 2
    assert index.dead_rows == 1
    assert index.scores(np.array([1.0, 0.0, 0.0]), [1]) == {}
    ids, sims = index.ranked(np.array([1.0, 0.0, 0.0]))
    assert [int(ids[j]) for j in top_k_order(sims, 10)] == [3, 2]


def test_index_reinsert_after_remove():
    index = make_index()
    index.remove(2)
    index.upsert_many([2], np.array([[0, 0, 1]], dtype=np.float32))
    assert len(index) == 3
    assert index.scores(np.array([0.0, 0.0, 1.0]), [2]) == {2: pytest.approx(1.0)}


def test_index_rejects_wrong_dimension():
    with pytest.raises(EmbeddingError):
        VectorIndex(3).upsert_many([1], np.zeros((1, 4), dtype=np.float32))
    with pytest.raises(EmbeddingError):
        VectorIndex(3).upsert_many([1], np.zeros(3, dtype=np.float32))


def test_zero_vector_in_index_scores_zero():
    index = VectorIndex(2)
    index.upsert_many([1], np.zeros((1, 2), dtype=np.float32))
    assert index.scores(np.array([1.0, 0.0]), [1]) == {1: 0.0}


def test_top_k_order_best_first():
    sims = np.array([0.1, 0.9, 0.5, 0.7])
    assert top_k_order(sims, 2).tolist() == [1, 3]
    assert top_k_order(sims, 4).tolist() == [1, 3, 2, 0]
    assert top_k_order(sims, 100).tolist() == [1, 3, 2, 0]


def test_top_k_order_skips_non_finite():
    sims = np.array([-np.inf, 0.2, -np.inf, 0.4])
    assert top_k_order(sims, 10).tolist() == [3, 1]
    assert top_k_order(sims, 1).tolist() == [3]


def test_top_k_order_empty_cases():
    assert top_k_order(np.array([0.5]), 0).tolist() == []
    assert top_k_order(np.array([-np.inf, -np.inf]), 3).tolist() == []
    assert top_k_order(np.array([]), 3).tolist() == []


def test_top_k_order_matches_full_sort_on_random_data():
    rng = np.random.default_rng(7)
    sims = rng.standard_normal(1000)
    sims[rng.choice(1000, 50, replace=False)] = -np.inf
    for k in (1, 10, 950, 1000):
        expected = [i for i in np.argsort(-sims) if np.isfinite(sims[i])][:k]
        assert top_k_order(sims, k).tolist() == expected


@pytest.mark.parametrize("name", ["ann_from", "lexical_row_budget"])
@pytest.mark.parametrize("rows", [-5, True, 2.5, "100"])
def test_row_counts_of_the_sqlite_backend_are_checked(tmp_path, name, rows):
    from navi_memory import ValidationError
    from navi_memory.backends.sqlite import SQLiteBackend

    with pytest.raises(ValidationError, match=fr"{name} must be a whole number of rows \(0 or more\), or None"):
        SQLiteBackend(str(tmp_path / "x.db"), **{name: rows})
    assert not (tmp_path / "x.db").exists()
    SQLiteBackend(str(tmp_path / "y.db"), **{name: 0}).close()  # 0: no budget; a graph from the first row
