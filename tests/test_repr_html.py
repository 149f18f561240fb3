"""Jupyter rendering: search results, fact lists and summaries as escaped HTML tables."""

from __future__ import annotations

import re

from navi_memory import FactList, SearchResults, SummaryHistory, SummaryText

from .ui_helpers import IMG, SCRIPT, fill


def cells(html: str) -> list[str]:
    return re.findall(r"<td[^>]*>(.*?)</td>", html, flags=re.S)


def assert_inert(html: str) -> None:
    assert "<script" not in html and "<img" not in html
    assert "&lt;script&gt;" in html or "&lt;img" in html


def test_search_results_render_as_a_table_with_signals_and_scores(store, clock):
    ids = fill(store, clock)
    results = store.search("tea notes", user_id="alice")
    assert isinstance(results, SearchResults) and isinstance(results, list)
    html = results._repr_html_()
    assert html.startswith("<table") and html.count("<tr>") == len(results) + 1
    assert "score breakdown" in html and "fused=" in html and "fts" in html
    assert_inert(html)
    top = results[0]
    assert top.id == ids["script"] and cells(top._repr_html_())[0] == str(top.id)
    assert store.search("*", user_id="alice")._repr_html_().count("<tr>") == 7  # match-all: same type


def test_no_results_is_an_empty_table(store):
    results = store.search("nothing at all here", user_id="nobody")
    assert results == [] and isinstance(results, SearchResults)
    assert "0 searchresult(s)" in results._repr_html_()


def test_fact_lists_show_source_confidence_and_history(store, clock):
    fill(store, clock)
    facts = store.get_all_facts(user_id="alice", include_history=True)
    assert isinstance(facts, FactList)
    html = facts._repr_html_()
    assert "Porto" in html and "Lisbon (until" in html and "conversation" in html
    assert_inert(html)
    drink = next(f for f in facts if f.key == "drink")
    assert_inert(drink._repr_html_())


def test_summary_and_its_history(store, clock):
    fill(store, clock)
    text = store.get_summary(user_id="alice")
    assert isinstance(text, SummaryText) and text.endswith(SCRIPT)
    assert_inert(text._repr_html_())
    history = store.summary_history(user_id="alice")
    assert isinstance(history, SummaryHistory) and [s.version for s in history] == [2, 1]
    html = history._repr_html_()
    assert_inert(html)
    assert cells(html)[0] == "2"
    assert store.get_summary(user_id="nobody") is None


def test_items_and_other_models_render_too(store, clock):
    ids = fill(store, clock)
    item = store.get(ids["img"], user_id="alice")
    html = item._repr_html_()
    assert_inert(html)
    assert "ready FakeEmbeddings:fake-hash" in html
    theme = store.list_themes(user_id="alice")[0]
    assert f">{theme.slug}<" in theme._repr_html_()
    assert IMG not in html
