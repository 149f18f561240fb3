"""Checked by mypy in tests/test_store_api.py (never imported by pytest): what a user's IDE sees."""

from navi_memory import AsyncMemoryStore, MemoryStore


def sync_api(store: MemoryStore) -> None:
    reveal_type(store.search("coffee", user_id="u1"))
    reveal_type(store.add(user_id="u1", content="I drink oat milk lattes"))
    reveal_type(store.upsert_fact(user_id="u1", category="preferences", key="coffee", value="latte"))


async def async_api(store: AsyncMemoryStore) -> None:
    reveal_type(await store.search("coffee", user_id="u1"))
    reveal_type(await store.add(user_id="u1", content="I drink oat milk lattes"))
    reveal_type(await store.upsert_fact(user_id="u1", category="preferences", key="coffee", value="latte"))
    await store.search("coffee", user_id="u1", limit="ten")  # type: ignore[arg-type]  # mypy must object
