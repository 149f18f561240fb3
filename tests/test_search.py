"""Hybrid search contract: result shape, match-all, limits, filters, robustness, fusions, boosts, isolation."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from navi_memory import NotFoundError, SearchResult, ValidationError

pytestmark = pytest.mark.on_citus  # and on the Citus cluster (tests/conftest.py)


U = "alice"


@pytest.fixture
def coffee(store, clock):
    ids = {}
    ids["latte"] = store.add(user_id=U, content="I love lattes with oat milk", theme="drinks")
    clock.advance(hours=1)
    ids["espresso"] = store.add(user_id=U, content="Espresso in the morning is a must", theme="drinks",
                                type="preference")
    clock.advance(hours=1)
    ids["hike"] = store.add(user_id=U, content="Went hiking in the Alps last summer", theme="travel")
    clock.advance(hours=1)
    return ids


def test_results_read_as_attributes_and_mapping(store, coffee):
    r = store.search("lattes", user_id=U)[0]
    assert isinstance(r, SearchResult)
    assert r["content"] == r.content == "I love lattes with oat milk"
    assert r["id"] == r.id == coffee["latte"]
    assert r.snippet == r.content_snippet == r.content
    assert r.kind == "item" and r.fact is None and r.theme == "drinks"
    assert set(r.keys()) >= {"id", "content", "snippet", "score", "signals", "scores", "theme", "type"}
    json.dumps(r.to_dict())
    with pytest.raises(KeyError):
        r["nope"]


def test_signals_are_booleans_for_fts_and_semantic(store, coffee):
    for r in store.search("lattes", user_id=U):
        assert isinstance(r.signals["fts"], bool) and isinstance(r.signals["semantic"], bool)
    top = store.search("lattes", user_id=U)[0]
    assert top.signals["fts"] is True and top.signals["semantic"] is True


def test_long_content_gets_a_short_snippet(store):
    store.add(user_id=U, content="coffee " + "x" * 1000)
    r = store.search("coffee", user_id=U)[0]
    assert len(r.snippet) == 300 and r.snippet.endswith("…") and len(r.content) == 1007


@pytest.mark.parametrize("query", ["", "*", "  ", " * ", None])
def test_match_all_queries_return_newest_first(store, coffee, query):
    results = store.search(query, user_id=U)
    assert [r.id for r in results] == [coffee["hike"], coffee["espresso"], coffee["latte"]]
    assert all(r.signals == {"fts": False, "semantic": False, "substring": False, "context": False} for r in results)


def test_limit_defaults_to_10_and_max_is_50(store):
    store.add_many([{"user_id": U, "content": f"coffee note number {n}"} for n in range(60)])
    assert len(store.search("coffee", user_id=U)) == 10
    assert len(store.search("coffee", user_id=U, limit=50)) == 50
    assert len(store.search("*", user_id=U, limit=50)) == 50
    assert len(store.search("coffee", user_id=U, limit=1)) == 1
    with pytest.raises(ValidationError):
        store.search("coffee", user_id=U, limit=51)


def test_theme_and_types_filters(store, coffee):
    assert {r.id for r in store.search("lattes espresso hiking", user_id=U, theme="Drinks")} == {
        coffee["latte"], coffee["espresso"]}
    assert [r.id for r in store.search("lattes espresso hiking", user_id=U, types=["preference"])] == [
        coffee["espresso"]]
    assert [r.id for r in store.search("*", user_id=U, theme="travel")] == [coffee["hike"]]


def test_recency_days_filter(store, clock):
    old = store.add(user_id=U, content="coffee long ago")
    clock.advance(10)
    new = store.add(user_id=U, content="coffee recently")
    clock.advance(1)
    assert [r.id for r in store.search("coffee", user_id=U, recency_days=5)] == [new]
    assert {r.id for r in store.search("coffee", user_id=U, recency_days=30)} == {old, new}
    assert [r.id for r in store.search("*", user_id=U, recency_days=5)] == [new]


def test_person_filter(store):
    bob = store.add(user_id=U, content="coffee with Bob", person="bob")
    store.add(user_id=U, content="coffee with Carol", person="carol")
    assert [r.id for r in store.search("coffee", user_id=U, person="bob")] == [bob]


def test_expired_rows_are_excluded(store, clock):
    temp = store.add(user_id=U, content="coffee voucher valid today", expires_days=1)
    keep = store.add(user_id=U, content="coffee habits")
    clock.advance(2)
    assert [r.id for r in store.search("coffee voucher", user_id=U)] == [keep]
    assert [r.id for r in store.search("*", user_id=U)] == [keep]
    assert temp in {r.id for r in store.search("coffee voucher", user_id=U, include_expired=True)}


@pytest.mark.parametrize("query", [
    "NOT", "NOT lattes", "lattes NOT", '"', '"lattes', 'say "hi"', "*lattes*", "lattes*", "-lattes", "- -",
    "NEAR(lattes milk)", "NEAR", "content:lattes", "title:", ":", "(", ")", "(lattes OR", "AND OR NOT", "^lattes",
    "{title}: lattes", "lattes + milk", "\\", "%", "_", "☕️🍵", "café crème", "日本語", "'; DROP TABLE items;--",
    "lattes " * 3000, "x" * 20000,
])
def test_fts_syntax_in_queries_never_raises(store, lexical_store, coffee, query):
    assert isinstance(store.search(query, user_id=U), list)
    assert isinstance(store.search(query, user_id=U, fusion="rrf"), list)
    assert isinstance(lexical_store.search(query, user_id=U), list)


@pytest.mark.parametrize("query", ["-lattes", "lattes*", "content:lattes", "NEAR(lattes milk)", '"lattes'])
def test_operator_characters_still_find_the_words(store, coffee, query):
    top = store.search(query, user_id=U)[0]
    assert top.id == coffee["latte"] and top.signals["fts"]


def test_diacritics_and_emoji_content_are_searchable(store):
    item = store.add(user_id=U, content="Café crème ☕ at the corner")
    assert store.search("cafe creme", user_id=U, min_score=0)[0].id == item
    assert store.search("CAFÉ", user_id=U)[0].signals["fts"]


@pytest.mark.parametrize(("content", "query"), [
    ("Café crème at the corner", "cafe"), ("the cafe at the corner", "Café"), ("we met in Zürich", "zurich"),
    ("São Paulo in May", "sao"), ("ﬁsh and chips", "fish"), ("ＦＵＬＬ width letters", "full"),
    ("write to bob@example.com", "example"), ("write to bob@example.com", "bob"),
    ("the docs are at https://docs.example.org/setup/guide", "guide"), ("upgrade to version 3.5", "3.5"),
    ("call 555-0100 after six", "555"), ("saved in C:\\Users\\me\\notes.txt", "notes"),
    # PostgreSQL's parser drops tags, and every word after an unclosed <script>: here they are words
    ("<script>alert(1)</script> tea notes", "notes"), ("<script> tea notes", "notes"), ("<b>bold</b> move", "bold"),
])
def test_words_match_without_accents_and_inside_addresses_on_every_backend(lexical_store, content, query):
    """The full-text side alone (no vectors) finds a word with or without its accents, a word
    inside an address, a path or a number, the same on SQLite and PostgreSQL (schema version 15)."""
    item = lexical_store.add(user_id=U, content=content)
    found = lexical_store.search(query, user_id=U, min_score=0)
    assert [r.id for r in found] == [item] and found[0].signals["fts"]


def _common_and_rare(store, user_id: str) -> tuple[int, int]:
    """Rows where 'coffee' is common and 'Oslo' rare: the row saying coffee most, the Oslo row."""
    for n in range(8):
        store.add(user_id=user_id, content=f"coffee with friends, meeting {n}")
    common = store.add(user_id=user_id, content="coffee, coffee and more coffee every morning")
    rare = store.add(user_id=user_id, content="a weekend trip to Oslo in spring")
    return common, rare


def test_a_word_the_users_rows_rarely_hold_outweighs_a_common_one(lexical_store):
    """Lexical ranking by the user's own statistics on every backend (BM25's inverse document
    frequency; on PostgreSQL over the user's newest rows, ``sql.IDF_SAMPLE``)."""
    common, rare = _common_and_rare(lexical_store, U)
    assert [r.id for r in lexical_store.search("coffee Oslo", user_id=U, min_score=0)][:2] == [rare, common]


def test_other_users_rows_leave_a_users_lexical_order_as_it_was(lexical_store):
    _common_and_rare(lexical_store, U)
    before = [(r.id, r.score) for r in lexical_store.search("coffee Oslo morning", user_id=U, min_score=0)]
    for n in range(30):  # another user for whom Oslo is common and coffee rare
        lexical_store.add(user_id="bob", content=f"Oslo again, visit {n}")
    lexical_store.add(user_id="bob", content="one coffee")
    assert [(r.id, r.score) for r in lexical_store.search("coffee Oslo morning", user_id=U, min_score=0)] == before


def test_query_over_the_content_limit_is_a_validation_error(store):
    with pytest.raises(ValidationError):
        store.search("x" * (32 * 1024 + 1), user_id=U)


@pytest.mark.parametrize("fusion", ["weighted", "rrf"])
def test_both_fusions_rank_the_best_match_first(store, coffee, fusion):
    results = store.search("lattes oat milk", user_id=U, fusion=fusion)
    assert results[0].id == coffee["latte"]
    assert results[0].signals == {"fts": True, "semantic": True, "substring": False, "context": False}


def test_rrf_scores_are_reciprocal_ranks(store, coffee):
    top = store.search("lattes oat milk", user_id=U, fusion="rrf", recency="neutral")[0]
    assert top.scores["fused"] == pytest.approx(1 / 61 + 1 / 61)
    assert top.scores["rank"] == pytest.approx(2 / 61)  # what orders; the score is the evidence
    assert 0 < top.score <= 1 and top.score == pytest.approx(min(1.0, top.scores["semantic"] + 0.1))


def test_weighted_scores_best_match_is_one(store, coffee):
    top = store.search("lattes oat milk", user_id=U, fusion="weighted", recency="neutral")[0]
    assert top.scores["fused"] == pytest.approx(1.0)
    assert top.scores["semantic_part"] == pytest.approx(1.0) and top.scores["fts_part"] == pytest.approx(1.0)


def test_store_wide_fusion_setting(db_url, fake_embeddings, clock):
    from navi_memory import MemoryStore
    with MemoryStore.open(db_url, embeddings=fake_embeddings, clock=clock, fusion="rrf") as s:
        s.add(user_id=U, content="lattes")
        assert s.search("lattes", user_id=U, recency="neutral")[0].scores["rank"] == pytest.approx(2 / 61)


def test_pinned_boost(store, clock):
    older = store.add(user_id=U, content="green tea in the afternoon", dedup=False)
    clock.advance(hours=1)
    newer = store.add(user_id=U, content="green tea in the afternoon", dedup=False)
    assert [r.id for r in store.search("green tea", user_id=U)] == [newer, older]
    store.pin(older, user_id=U)
    results = store.search("green tea", user_id=U)
    assert [r.id for r in results] == [older, newer]
    assert results[0].scores["pinned"] == pytest.approx(0.20)
    assert results[0].scores["rank"] - results[1].scores["rank"] == pytest.approx(0.20)
    assert results[0].score == results[1].score  # the same text: the same relevance, pinned or not
    assert results[0].pinned is True


def test_person_hints_boost(store):
    bob = store.add(user_id=U, content="dinner plans for friday")
    carol = store.add(user_id=U, content="dinner plans for friday", person="carol")
    store.update(bob, user_id=U, person="bob")
    results = store.search("dinner plans", user_id=U, person_hints=["bob"])
    assert [r.id for r in results] == [bob, carol]
    assert results[0].scores["person"] == pytest.approx(0.15) and "person" not in results[1].scores


def test_recency_decay_and_neutral(store, clock):
    old = store.add(user_id=U, content="museum visit", dedup=False)
    clock.advance(200)
    new = store.add(user_id=U, content="museum visit", dedup=False)
    decayed = {r.id: r for r in store.search("museum", user_id=U)}
    assert decayed[old].scores["recency"] == pytest.approx(-0.10)
    assert "recency" not in decayed[new].scores
    neutral = {r.id: r for r in store.search("museum", user_id=U, recency="neutral")}
    assert "recency" not in neutral[old].scores and neutral[old].score == pytest.approx(neutral[new].score)
    store.pin(old, user_id=U)
    assert "recency" not in {r.id: r for r in store.search("museum", user_id=U)}[old].scores


def test_observed_at_drives_recency(store, clock):
    item = store.add(user_id=U, content="museum visit", observed_at=clock.now.replace(year=2024))
    assert store.search("museum", user_id=U)[0].id == item
    assert store.search("museum", user_id=U)[0].scores["recency"] == pytest.approx(-0.10)


def test_substring_fallback_when_nothing_else_matches(lexical_store):
    latte = lexical_store.add(user_id=U, content="I love lattes")
    lexical_store.add(user_id=U, content="tea time")
    results = lexical_store.search("atte", user_id=U)  # inside a word: no FTS token, no stem
    assert [r.id for r in results] == [latte]
    assert results[0].signals == {"fts": False, "semantic": False, "substring": True, "context": False}
    assert lexical_store.search("zzz", user_id=U) == []


def test_substring_fallback_ignores_the_case_of_any_letter(lexical_store):
    emile = lexical_store.add(user_id=U, content="ÉMILE ZOLA ÉCRIVAIT", title="ÇAVA")
    lexical_store.add(user_id=U, content="tea time")
    for query in ("émi", "Émi", "mile", "ÉCRI", "écri", "çav"):  # inside a word: substrings only
        results = lexical_store.search(query, user_id=U)
        assert [r.id for r in results] == [emile], query
        assert results[0].signals["substring"], query
    assert lexical_store.search("émx", user_id=U) == []


def test_word_prefix_is_found_by_stem_or_substring(lexical_store):
    latte = lexical_store.add(user_id=U, content="I love lattes")
    results = lexical_store.search("latt", user_id=U)  # porter stems "lattes" to "latt"
    assert [r.id for r in results] == [latte]
    assert results[0].signals["fts"] or results[0].signals["substring"]


def test_substring_fallback_ranks_more_matching_terms_first(lexical_store, clock):
    one = lexical_store.add(user_id=U, content="xxabcxx")
    clock.advance(hours=1)
    two = lexical_store.add(user_id=U, content="xxabcxx yydefyy")
    results = lexical_store.search("abc def", user_id=U)
    assert [r.id for r in results] == [two, one]


def test_lexical_only_store_searches_with_fts(lexical_store):
    assert lexical_store.embedding_model is None
    a = lexical_store.add(user_id=U, content="running shoes size 44")
    lexical_store.add(user_id=U, content="coffee beans")
    results = lexical_store.search("shoes", user_id=U)
    assert [r.id for r in results] == [a]
    assert results[0].signals == {"fts": True, "semantic": False, "substring": False, "context": False}
    assert lexical_store.get(a, user_id=U).embedding is None


def test_stemming_matches_word_forms(lexical_store):
    item = lexical_store.add(user_id=U, content="She was running every morning")
    assert lexical_store.search("runs", user_id=U)[0].id == item


def test_all_users_admin_search(store):
    a = store.add(user_id="alice", content="shared hobby: chess")
    b = store.add(user_id="bob", content="shared hobby: chess")
    results = store.search("chess", all_users=True)
    assert {(r.id, r.user_id) for r in results} == {(a, "alice"), (b, "bob")}  # each result says whose it is
    assert {(r.id, r.user_id) for r in store.search("*", all_users=True)} == {(a, "alice"), (b, "bob")}
    assert [r.user_id for r in store.search("chess", user_id="bob")] == ["bob"]
    with pytest.raises(ValidationError):
        store.search("chess")


def test_user_isolation(store):
    a_item = store.add(user_id="alice", content="alice secret diary entry")
    store.upsert_fact(user_id="alice", category="profile", key="secret_word", value="swordfish")
    b_item = store.add(user_id="bob", content="bob grocery list")
    for query in ("secret diary", "swordfish", "secret word", "*", "latt", "diary"):
        assert all(r.id == b_item for r in store.search(query, user_id="bob"))
    assert [i.id for i in store.list_items(user_id="bob")] == [b_item]
    assert store.get_all_facts(user_id="bob") == []
    with pytest.raises(NotFoundError):
        store.get_fact("secret_word", user_id="bob")
    with pytest.raises(NotFoundError):
        store.delete_fact("secret_word", user_id="bob")
    for call in (lambda: store.get(a_item, user_id="bob"),
                 lambda: store.update(a_item, user_id="bob", content="hacked"),
                 lambda: store.pin(a_item, user_id="bob"),
                 lambda: store.archive(a_item, user_id="bob"),
                 lambda: store.delete(a_item, user_id="bob")):
        with pytest.raises(NotFoundError):
            call()
    item = store.get(a_item, user_id="alice")
    assert (item.content, item.pinned, item.status) == ("alice secret diary entry", False, "active")
    assert store.get_fact("secret_word", user_id="alice").value == "swordfish"
    assert [r.id for r in store.search("secret diary", user_id="alice")][0] == a_item


def test_substring_fallback_respects_user_isolation(lexical_store):
    lexical_store.add(user_id="alice", content="alice secret diary")
    assert lexical_store.search("ecre", user_id="bob") == []
    assert len(lexical_store.search("ecre", user_id="alice")) == 1


def test_person_hints_accepts_a_single_name(store, clock):
    carol = store.add(user_id=U, content="dinner plans for friday", person="carol")
    clock.advance(hours=1)
    bob = store.add(user_id=U, content="dinner plans for friday", person="bob")
    clock.advance(hours=1)
    try:
        results = store.search("dinner plans", user_id=U, person_hints="carol")
    except ValidationError:
        return  # rejecting a bare string is also acceptable
    assert [r.id for r in results] == [carol, bob]


QUERY_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=200)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=QUERY_TEXT)
def test_any_text_query_returns_only_the_users_results(store, lexical_store, query):
    for s in (store, lexical_store):
        if not s.list_items(user_id=U):
            s.add(user_id=U, content="I love lattes with oat milk (NOT tea) -- \"really\" *",)
            s.add(user_id="bob", content="bob's lattes")
        results = s.search(query, user_id=U, limit=50)
        assert all(r.id in {i.id for i in s.list_items(user_id=U)} for r in results)


def test_relative_periods_in_the_query_read_the_store_clock(store, clock):
    older = store.add(user_id=U, content="I cooked a mushroom risotto", observed_at=clock.now - timedelta(days=20))
    recent = store.add(user_id=U, content="I cooked a lentil soup", observed_at=clock.now - timedelta(days=1))
    found = store.search("what did I cook yesterday?", user_id=U, min_score=0)  # the hashing fake is no judge
    assert [r.id for r in found][:2] == [recent, older]
    assert "date" in found[0].scores and "date" not in found[1].scores
    assert [r.id for r in store.search("what did I cook 20 days ago?", user_id=U, min_score=0)][0] == older
    clock.advance(days=30)  # the same words a month later name other days
    assert all("date" not in r.scores for r in store.search("what did I cook yesterday?", user_id=U))


def test_relative_periods_use_the_time_zone_of_the_search(db_url, fake_embeddings, clock):
    from datetime import datetime, timezone

    from navi_memory import ConfigurationError, MemoryStore, Settings

    clock.now = datetime(2026, 11, 26, 3, tzinfo=timezone.utc)  # 25 November, 19:00 in Los Angeles
    la = Settings(url=db_url, timezone="America/Los_Angeles")
    with MemoryStore.open(db_url, embeddings=fake_embeddings, clock=clock, settings=la) as store:
        # 24 November, 12:00 in Los Angeles: yesterday there; two days ago in UTC
        store.add(user_id=U, content="I cooked a lentil soup", observed_at=datetime(2026, 11, 24, 20, tzinfo=timezone.utc))
        assert "date" in store.search("what did I cook yesterday?", user_id=U)[0].scores  # the store's zone
        assert "date" not in store.search("what did I cook yesterday?", user_id=U, timezone="UTC")[0].scores
        for bad in ("Mars/Olympus", "", 5):
            with pytest.raises(ValidationError, match="timezone"):
                store.search("soup", user_id=U, timezone=bad)
            with pytest.raises(ValidationError, match="timezone"):
                store.search("*", user_id=U, timezone=bad)
    with pytest.raises(ConfigurationError, match="NAVI_MEMORY_TIMEZONE"):
        Settings(url=db_url, timezone="Mars/Olympus")
    assert Settings.from_env({"NAVI_MEMORY_TIMEZONE": "Europe/Lisbon"}).timezone == "Europe/Lisbon"
    with pytest.raises(ConfigurationError, match="unknown time zone"):
        Settings.from_env({"NAVI_MEMORY_TIMEZONE": "Europe/Atlantis"})


def test_a_users_own_time_zone_reads_her_queries(store, clock):
    from datetime import datetime, timezone

    clock.now = datetime(2026, 11, 26, 3, tzinfo=timezone.utc)  # 25 November, 19:00 in Los Angeles
    for user in (U, "bob"):  # 24 November, 12:00 in Los Angeles: yesterday there, two days ago in UTC
        store.add(user_id=user, content="I cooked a lentil soup", observed_at=datetime(2026, 11, 24, 20, tzinfo=timezone.utc))
    assert store.user_timezone(user_id=U) is None
    assert "date" not in store.search("what did I cook yesterday?", user_id=U)[0].scores  # the store's UTC
    assert store.set_user_timezone(" America/Los_Angeles ", user_id=U) == "America/Los_Angeles"
    assert store.user_timezone(user_id=U) == "America/Los_Angeles"
    assert "date" in store.search("what did I cook yesterday?", user_id=U)[0].scores
    assert "date" not in store.search("what did I cook yesterday?", user_id="bob")[0].scores  # hers only
    assert "date" not in store.search("what did I cook yesterday?", user_id=U, timezone="UTC")[0].scores
    assert "date" not in store.search("what did I cook yesterday?", all_users=True)[0].scores
    users = {u["id"]: u for u in store.list_users()}
    assert users[U]["timezone"] == "America/Los_Angeles" and users["bob"]["timezone"] is None
    for bad in ("Mars/Olympus", "", 5):
        with pytest.raises(ValidationError, match="timezone"):
            store.set_user_timezone(bad, user_id=U)
    assert store.user_timezone(user_id=U) == "America/Los_Angeles"  # a refused zone changes nothing
    assert store.set_user_timezone("utc", user_id=U) == "UTC"
    assert store.set_user_timezone(None, user_id=U) is None and store.user_timezone(user_id=U) is None
    assert store.set_user_timezone("Europe/Lisbon", user_id="new-user") == "Europe/Lisbon"  # a user of no rows yet
    assert store.user_timezone(user_id="new-user") == "Europe/Lisbon"
    assert store.user_timezone(user_id="nobody") is None
