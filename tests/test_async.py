"""AsyncMemoryStore runs the same operations as MemoryStore and gives the same results."""

from __future__ import annotations

import asyncio
import inspect

import pytest

from navi_memory import AsyncMemoryStore, MemoryStore, NotFoundError, ValidationError

from .fakes import FakeClock, FakeEmbeddings

U = "alice"


class SyncOnlyEmbeddings:
    """A provider without aembed_* methods: the async store must run it in a thread."""

    def __init__(self) -> None:
        self._inner = FakeEmbeddings()
        self.model = self._inner.model

    def embed_documents(self, texts):
        return self._inner.embed_documents(texts)

    def embed_query(self, text):
        return self._inner.embed_query(text)


@pytest.fixture
def aclock():
    return FakeClock()


@pytest.fixture
def sclock():
    return FakeClock()


@pytest.fixture
async def astore(new_db_url, aclock):
    s = await AsyncMemoryStore.open(new_db_url(), embeddings=FakeEmbeddings(),
                                    clock=aclock)
    yield s
    await s.close()


@pytest.fixture
def sstore(new_db_url, sclock):
    s = MemoryStore.open(new_db_url(), embeddings=FakeEmbeddings(), clock=sclock)
    yield s
    s.close()


async def maybe(value):
    return await value if inspect.isawaitable(value) else value


async def scenario(store, clock_advance):
    """The same script against either store; returns comparable plain data."""
    out = {}
    ids = []
    for text in ("I love lattes with oat milk", "Espresso in the morning", "Went hiking in the Alps"):
        ids.append(await maybe(store.add(user_id=U, content=text, theme="daily")))
        clock_advance()
    out["ids"] = ids
    out["add_many"] = await maybe(store.add_many([{"user_id": U, "content": "batch lattes"},
                                                  {"user_id": "bob", "content": "bob lattes"}]))
    change = await maybe(store.upsert_fact(user_id=U, category="preferences", key="drink", value="oat latte"))
    again = await maybe(store.upsert_fact(user_id=U, category="preferences", key="drink", value="flat white"))
    out["facts_actions"] = [change.action, again.action, again.previous_value]
    out["facts"] = [(f.category, f.key, f.value, f.confidence, [h.value for h in f.history])
                    for f in await maybe(store.get_all_facts(user_id=U, include_history=True))]
    for query in ("lattes", "flat white", "*", "latt", "NOT \"(*"):
        results = await maybe(store.search(query, user_id=U))
        out[f"search {query}"] = [(r.id, r.kind, round(r.score, 6), r.signals) for r in results]
    out["rrf"] = [(r.id, round(r.score, 6)) for r in await maybe(store.search("lattes", user_id=U, fusion="rrf"))]
    summary = await maybe(store.set_summary("Alice likes coffee.", user_id=U))
    out["summary"] = (summary.version, await maybe(store.get_summary(user_id=U)))
    out["item"] = (await maybe(store.get(ids[0], user_id=U))).to_dict()
    out["themes"] = [(t.slug, t.active_count) for t in await maybe(store.list_themes(user_id=U))]
    out["status"] = await maybe(store.embedding_status())
    out["timezone"] = [await maybe(store.set_user_timezone("Europe/Lisbon", user_id=U)),
                       await maybe(store.user_timezone(user_id=U)),
                       [r.id for r in await maybe(store.search("lattes yesterday", user_id=U))]]
    out["forget"] = await maybe(store.forget(user_id=U))
    out["after_forget"] = (await maybe(store.search("*", user_id=U)), await maybe(store.get_all_facts(user_id=U)),
                           await maybe(store.get_summary(user_id=U)))
    out["bob"] = [r.content for r in await maybe(store.search("lattes", user_id="bob"))]
    out["timezone after forget"] = await maybe(store.user_timezone(user_id=U))
    return out


async def test_async_store_gives_the_same_results_as_the_sync_store(astore, sstore, aclock, sclock):
    sync_result = await scenario(sstore, lambda: sclock.advance(hours=1))
    async_result = await scenario(astore, lambda: aclock.advance(hours=1))
    assert async_result == sync_result
    assert sync_result["facts_actions"] == ["added", "updated", "oat latte"]
    assert sync_result["after_forget"] == ([], [], None)
    assert sync_result["timezone"][:2] == ["Europe/Lisbon"] * 2 and sync_result["timezone after forget"] is None
    assert sync_result["bob"] == ["bob lattes"]
    assert sync_result["ids"][0] in [r[0] for r in sync_result["search lattes"]]
    assert sync_result["search flat white"][0][1] == "fact"


async def test_async_methods_are_coroutines(astore):
    assert inspect.iscoroutinefunction(AsyncMemoryStore.add)
    assert inspect.iscoroutinefunction(AsyncMemoryStore.search)
    assert not inspect.iscoroutinefunction(MemoryStore.search)


async def test_async_errors_are_the_documented_ones(astore):
    with pytest.raises(ValidationError):
        await astore.add(user_id=U, content="")
    with pytest.raises(NotFoundError):
        await astore.get(12345, user_id=U)
    with pytest.raises(ValidationError):
        await astore.search("x", user_id=U, limit=0)


async def test_async_concurrent_writes_all_land(astore):
    ids = await asyncio.gather(*(astore.add(user_id=U, content=f"note {n}") for n in range(20)))
    assert len(set(ids)) == 20
    assert len(await astore.list_items(user_id=U, limit=100)) == 20


async def test_async_with_sync_only_provider_and_outage(db_url):
    provider = SyncOnlyEmbeddings()
    async with await AsyncMemoryStore.open(db_url, embeddings=provider) as s:
        item = await s.add(user_id=U, content="I love lattes")
        assert (await s.get(item, user_id=U)).embedding.state == "ready"
        assert (await s.search("lattes", user_id=U))[0].signals["semantic"] is True
        provider._inner.fail = True
        other = await s.add(user_id=U, content="espresso")
        assert (await s.get(other, user_id=U)).embedding.state == "error"
        provider._inner.fail = False
        report = await s.backfill()
        assert (report.embedded, report.remaining) == (1, 0)
