"""The LoCoMo measures peers publish (session hit/recall@k, evidence within a token budget), on
hand-made ranked lists whose answers can be counted by eye."""

from __future__ import annotations

import pytest

from navi_memory.bench.locomo_data import budget_score, score, search_depth, session_score, sessions_of, summarise


def test_a_dia_id_names_its_session_and_malformed_evidence_names_what_it_can():
    assert sessions_of("D3:7") == {3}
    assert sessions_of("D12:1") == {12}
    assert sessions_of("D8:6; D9:17") == {8, 9}  # one of the dataset's malformed evidence entries
    assert sessions_of("D") == set()


def test_session_hit_counts_any_turn_of_an_evidence_session_and_recall_the_share_of_sessions():
    evidence = ["D2:4", "D5:1"]  # two evidence sessions: 2 and 5
    ranked = ["D1:1", "D1:2", "D1:3", "D1:4", "D2:9",  # rank 5: another turn of session 2
              "D3:1", "D3:2", "D3:3", "D3:4", "D5:7"]  # rank 10: a turn of session 5
    got = session_score(ranked, evidence)
    assert got == {"session_hit@5": 1.0, "session_recall@5": 0.5, "session_hit@10": 1.0, "session_recall@10": 1.0}
    assert session_score(ranked[:4], evidence) == {"session_hit@5": 0.0, "session_recall@5": 0.0,
                                                   "session_hit@10": 0.0, "session_recall@10": 0.0}
    # no session to find (evidence "D"): a miss, never a division by zero
    assert session_score(ranked, ["D"])["session_hit@5"] == 0.0


def test_budget_keeps_turns_in_rank_order_until_the_next_would_overflow():
    tokens = {"a": 400, "b": 500, "c": 200, "d": 50}
    # a (400) + b (900) fit; c would make 1100: the list ends there, d is never reached
    assert budget_score(["a", "b", "c", "d"], ["b", "d"], tokens, budget=1000) == {
        "budget_recall": 0.5, "budget_turns": 2.0, "budget_short": 0.0}
    # exactly the budget still fits
    assert budget_score(["a", "b", "d"], ["d"], {"a": 450, "b": 500, "d": 50}, budget=1000)["budget_recall"] == 1.0
    # a list that runs out first says so
    assert budget_score(["c", "d"], ["c"], tokens, budget=1000) == {
        "budget_recall": 1.0, "budget_turns": 2.0, "budget_short": 1.0}
    # a first turn longer than the budget leaves nothing
    assert budget_score(["a"], ["a"], tokens, budget=300)["budget_recall"] == 0.0


def test_a_retrieved_id_that_is_no_turn_costs_the_mean_turn():
    tokens = {"a": 100, "b": 300}  # mean 200
    assert budget_score([None, "a"], ["a"], tokens, budget=250)["budget_recall"] == 0.0
    assert budget_score([None, "a"], ["a"], tokens, budget=300)["budget_recall"] == 1.0


def test_score_adds_the_peer_measures_only_with_token_counts_and_summarise_averages_them():
    tokens = {f"D1:{i}": 10 for i in range(1, 4)} | {"D2:1": 10}
    plain = score(["D1:1", "D2:1"], ["D2:1"])
    assert "session_hit@5" not in plain and plain["recall@1"] == 0.0
    rows = [score(["D1:1", "D2:1"], ["D2:1"], tokens, budget=15),  # only D1:1 fits: session 1, no evidence
            score(["D2:1", "D1:1"], ["D2:1", "D1:3"], tokens, budget=15)]
    assert rows[0]["budget_recall"] == 0.0 and rows[1]["budget_recall"] == 0.5
    report = summarise(rows)
    assert report["session_hit"] == {"5": 1.0, "10": 1.0}
    assert report["session_recall"] == {"5": 1.0, "10": 1.0}
    assert report["budget"] == {"recall": 0.25, "turns": 1.0, "short": 0.0}
    assert "budget" not in summarise([plain])


@pytest.mark.parametrize(("budget", "depth"), [(1000, 50), (100, 20), (2000, 100)])
def test_the_search_goes_deep_enough_to_fill_the_budget(budget, depth):
    assert search_depth(budget) == depth
