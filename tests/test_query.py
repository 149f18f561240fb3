"""Query parsing: stop words, FTS5 quoting and LIKE escaping (pure functions, plus an FTS5 probe)."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings, strategies as st

from navi_memory.retrieval.query import (MAX_TERMS, STOP_WORDS, fts5_or_expression, fts5_quote, is_match_all,
                                         like_pattern, query_terms, select_matching_terms, tokenize)

NASTY = [
    "NOT", "NOT coffee", "coffee NOT tea", '"', '"coffee', 'say "hi"', "*", "coffee*", "-coffee", "--",
    "NEAR(coffee tea)", "NEAR", "title:coffee", "content:", ":", "(", ")", "(coffee OR tea", "AND OR NOT",
    "^coffee", "coffee + tea", "{title content}: x", "☕️🍵", "café", "日本語のテキスト", "'; DROP TABLE items; --",
    "a" * 5000, "\\", "%_", "\t\n",
]


@pytest.fixture(scope="module")
def fts() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(title, content, tokenize='porter unicode61 remove_diacritics 2')")
    conn.executemany("INSERT INTO t (title, content) VALUES (?, ?)",
                     [("drinks", "I drink coffee NOT tea"), ("", "say hi to the NEAR team"), ("", "café au lait")])
    return conn


def test_tokenize_lowercases_and_keeps_order_and_duplicates():
    assert tokenize("Coffee, coffee & TEA!") == ["coffee", "coffee", "tea"]


def test_query_terms_drops_stop_words():
    assert query_terms("What is the best coffee in town?") == ["best", "coffee", "town"]


def test_query_terms_keeps_stop_words_when_all_are_stop_words():
    assert query_terms("Who are you") == ["who", "are", "you"]
    assert all(t in STOP_WORDS for t in query_terms("Who are you"))


def test_query_terms_are_distinct_and_lower_case():
    assert query_terms("Tea tea TEA coffee") == ["tea", "coffee"]


def test_query_terms_of_punctuation_only_is_empty():
    assert query_terms('"*-:()') == []
    assert query_terms("") == []


def test_query_terms_respects_max_terms():
    words = [f"word{i}" for i in range(100)]
    assert query_terms(" ".join(words)) == words[:MAX_TERMS]
    assert query_terms(" ".join(words), 3) == words[:3]


@pytest.mark.parametrize("query", ["NOT", "AND OR NOT", "NEAR(coffee tea)", "title:coffee", "-coffee", "coffee*"])
def test_query_terms_strip_fts_operators_to_plain_words(query):
    for term in query_terms(query):
        assert term.isalnum()


def test_fts5_quote_doubles_inner_quotes():
    assert fts5_quote("coffee") == '"coffee"'
    assert fts5_quote('say "hi"') == '"say ""hi"""'


def test_fts5_or_expression():
    assert fts5_or_expression(["coffee", "tea"]) == '"coffee" OR "tea"'
    assert fts5_or_expression([]) == ""


@pytest.mark.parametrize("query", NASTY)
def test_nasty_queries_become_valid_fts5(fts, query):
    terms = query_terms(query)
    if terms:  # an sqlite3.OperationalError here would be a query syntax leak
        fts.execute("SELECT rowid FROM t WHERE t MATCH ?", (fts5_or_expression(terms),)).fetchall()
    else:
        assert fts5_or_expression(terms) == ""


def test_operator_words_are_matched_as_words_not_syntax(fts):
    # "NOT" as syntax would be an error at the start of a query; quoted it matches the word.
    rows = fts.execute("SELECT rowid FROM t WHERE t MATCH ?", (fts5_or_expression(query_terms("NOT")),)).fetchall()
    assert rows == [(1,)]
    rows = fts.execute("SELECT rowid FROM t WHERE t MATCH ?", (fts5_or_expression(query_terms("NEAR")),)).fetchall()
    assert rows == [(2,)]


def test_column_filter_syntax_is_harmless(fts):
    rows = fts.execute("SELECT rowid FROM t WHERE t MATCH ?",
                       (fts5_or_expression(query_terms("title:coffee")),)).fetchall()
    assert (1,) in rows  # "coffee" is in the content column, so no column filter was applied


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")))
def test_any_text_quoted_is_valid_fts5(fts, text):
    fts.execute("SELECT rowid FROM t WHERE t MATCH ?", (fts5_quote(text),)).fetchall()
    expression = fts5_or_expression(query_terms(text))
    if expression:
        fts.execute("SELECT rowid FROM t WHERE t MATCH ?", (expression,)).fetchall()


@pytest.mark.parametrize("query", [None, "", "   ", "*", " * "])
def test_match_all_queries(query):
    assert is_match_all(query)


@pytest.mark.parametrize("query", ["**", "coffee", "* coffee", "a"])
def test_not_match_all(query):
    assert not is_match_all(query)


def test_like_pattern_escapes_wildcards():
    assert like_pattern("latt") == "%latt%"
    assert like_pattern("50%_off") == "%50\\%\\_off%"
    assert like_pattern("a\\b") == "%a\\\\b%"


def test_like_pattern_matches_literally_in_sqlite():
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE x (v TEXT)")
    conn.executemany("INSERT INTO x VALUES (?)", [("50%_off",), ("500 off",), ("a\\b",)])
    got = conn.execute("SELECT v FROM x WHERE v LIKE ? ESCAPE '\\'", (like_pattern("50%_"),)).fetchall()
    assert got == [("50%_off",)]
    got = conn.execute("SELECT v FROM x WHERE v LIKE ? ESCAPE '\\'", (like_pattern("a\\b"),)).fetchall()
    assert got == [("a\\b",)]


def test_common_terms_only_score_when_rarer_terms_select():
    estimates = {"today": 48_000.0, "quinoa": 12.0}
    assert select_matching_terms(["today", "quinoa", "salad"], estimates, 5_000) == (["quinoa", "salad"], False)


def test_terms_are_taken_rarest_first_within_the_row_budget():
    estimates = {"a": 3_000.0, "b": 1_500.0, "c": 400.0, "d": 2_000.0}
    assert select_matching_terms(["a", "b", "c", "d"], estimates, 5_000) == (["b", "c", "d"], False)
    assert select_matching_terms(["a", "b", "c", "d"], estimates, 400) == (["c"], False)


def test_when_every_term_is_common_rows_need_them_all():
    estimates = {"today": 48_000.0, "note": 9_000.0}
    assert select_matching_terms(["today", "note"], estimates, 5_000) == (["today", "note"], True)
    assert select_matching_terms(["today"], estimates, 5_000) == (["today"], False)


def test_terms_without_statistics_count_as_rare():
    assert select_matching_terms(["a", "b"], {}, 5_000) == (["a", "b"], False)
