"""A long result's snippet is the part of it the question matched, and the prompt shows that part."""

from __future__ import annotations

from datetime import datetime, timezone

from navi_memory import MemoryStore
from navi_memory.core.convert import SNIPPET_CHARS
from navi_memory.models import SearchResult
from navi_memory.prompt import relevant_memory_block
from navi_memory.retrieval.lexical import excerpt
from navi_memory.retrieval.query import query_terms

FILLER = "We went through the budget line by line and argued about the vendor contracts again. " * 8
TAIL = "Unrelated to work: my sister moved to Lisbon and bakes sourdough at a small bakery."
NOTE = f"{FILLER}\n\n{FILLER}\n\n{TAIL}"


def test_the_excerpt_is_the_passage_holding_the_query_words() -> None:
    part = excerpt(NOTE, query_terms("where does my sister live?"), SNIPPET_CHARS)
    assert part == "…" + TAIL  # the last passage: an ellipsis before it only
    middle = f"{FILLER}\n\n{TAIL}\n\n{FILLER}"
    assert excerpt(middle, query_terms("sourdough bakery"), SNIPPET_CHARS) == f"…{TAIL}…"
    assert len(excerpt(middle, query_terms("sourdough bakery"), 120) or "") <= 120


def test_no_excerpt_when_the_text_is_short_or_its_opening_serves() -> None:
    assert excerpt("my sister lives in Lisbon", query_terms("sister"), SNIPPET_CHARS) is None
    assert excerpt(NOTE, query_terms("budget vendor"), SNIPPET_CHARS) is None  # the opening holds them
    assert excerpt(NOTE, query_terms("quantum physics"), SNIPPET_CHARS) is None  # no part does
    assert excerpt(NOTE, query_terms("the of and"), SNIPPET_CHARS) is None  # stop words only


def test_a_search_result_of_a_long_note_shows_the_part_it_was_found_by(store: MemoryStore) -> None:
    note = store.add(user_id="u1", content=NOTE)
    store.add(user_id="u1", content="Window seats on long flights, please.")

    [found] = [r for r in store.search("where does my sister live?", user_id="u1", min_score=0) if r.id == note]

    assert found.snippet == "…" + TAIL and found.content == NOTE
    [opening] = [r for r in store.search("vendor contracts", user_id="u1", min_score=0) if r.id == note]
    assert opening.snippet == NOTE[:SNIPPET_CHARS - 1].rstrip() + "…"


def _result(content: str, snippet: str, item_id: int) -> SearchResult:
    return SearchResult(id=item_id, content=content, snippet=snippet, theme="general", type="note",
                        created_at=datetime(2026, 1, 5, tzinfo=timezone.utc), score=0.5,
                        signals={"fts": True, "semantic": False, "substring": False, "context": False}, scores={})


def test_the_prompt_gives_a_long_memory_as_its_snippet_when_it_does_not_fit() -> None:
    short = _result("Prefers window seats.", "Prefers window seats.", 2)
    long = _result(NOTE, "…" + TAIL, 1)

    block = relevant_memory_block([short, long], max_tokens=150)

    assert block is not None and "Prefers window seats." in block
    assert f"] …{TAIL}" in block and "vendor contracts" not in block
    roomy = relevant_memory_block([short, long], max_tokens=2000)
    assert roomy is not None and "vendor contracts" in roomy and TAIL in roomy  # fits: the whole note


def test_a_reranking_model_reads_a_long_result_around_its_snippet() -> None:
    from navi_memory.retrieval.search import MODEL_CHARS, model_text

    long = "Opening words. " * 150 + TAIL + " Closing words." * 50
    found = _result(long, "…" + TAIL + "…", 1)
    read = model_text(found)
    assert TAIL in read and len(read) == MODEL_CHARS and read != long[:MODEL_CHARS]
    assert model_text(_result(long, long[:SNIPPET_CHARS - 1] + "…", 1)) == long[:MODEL_CHARS]  # no part matched
    assert model_text(_result(TAIL, TAIL, 1)) == TAIL
    titled = _result(long, "…" + TAIL + "…", 1)
    titled.title = "Diary"
    assert model_text(titled) == "Diary\n" + read


def test_the_store_gives_the_reranker_the_part_a_long_note_was_found_by(db_url, fake_embeddings, clock) -> None:
    read: list[str] = []

    def scorer(query: str, texts: list[str]) -> list[float]:
        read.extend(texts)
        return [float(len(t)) for t in texts]

    long = "Opening words. " * 150 + TAIL + " Closing words." * 50
    with MemoryStore.open(db_url, fake_embeddings, clock=clock, reranker=scorer) as store:
        store.add(user_id="u1", content=long)
        store.search("where does my sister live?", user_id="u1", min_score=0)
    assert len(read) == 1 and TAIL in read[0] and "Closing" in read[0] and read[0] != long[:len(read[0])]
