"""Checked by mypy (tests/test_store_api.py): the types tell the truth. A ``# E:`` comment is an error
mypy must report, a ``# N:`` a note (``reveal_type``), on the line it ends or, written on a line of
its own, on the code line above; mypy must report nothing else about this file."""

from navi_memory import AsyncMemoryStore, MemoryStore
from navi_memory.integrations._caller import StoreCaller, store_call


def results(store: MemoryStore) -> None:
    for r in store.search("coffee", user_id="u1"):
        reveal_type(r)  # N: Revealed type is "navi_memory.models.SearchResult"
        r.item  # E: "SearchResult" has no attribute "item"  [attr-defined]
    first: int = store.search("coffee", user_id="u1")[0]
    # E: Incompatible types in assignment (expression has type "SearchResult", variable has type "int")  [assignment]
    for fact in store.get_all_facts(user_id="u1"):
        reveal_type(fact)  # N: Revealed type is "navi_memory.models.Fact"
    for summary in store.summary_history(user_id="u1"):
        reveal_type(summary)  # N: Revealed type is "navi_memory.models.Summary"


def keywords(store: MemoryStore) -> None:
    store.add(user_id="u1", content="oat milk", tags=["coffee"], pinned=True, expires_days=30)
    store.add(user_id="u1", content="oat milk", tagz=["coffee"])
    # E: Unexpected keyword argument "tagz" for "add" of "MemoryStoreAPI"  [call-arg]
    # N: "add" defined in "navi_memory.store_api"
    store.add_note(user_id="u1", content="oat milk", pinned="yes")
    # E: Argument "pinned" to "add_note" of "MemoryStoreAPI" has incompatible type "str"; expected "bool"  [arg-type]
    store.update(1, user_id="u1", title=None, tags=("coffee",))
    store.update(1, user_id="u1", titel="Coffee")
    # E: Unexpected keyword argument "titel" for "update" of "MemoryStoreAPI"; did you mean "title"?  [call-arg]
    # N: "update" defined in "navi_memory.store_api"
    store.update(1, user_id="u1", embedding=[0.1, 0.2])  # a field add takes, update does not
    # E: Unexpected keyword argument "embedding" for "update" of "MemoryStoreAPI"  [call-arg]
    # N: "update" defined in "navi_memory.store_api"


async def async_keywords(store: AsyncMemoryStore) -> None:
    await store.add(user_id="u1", content="oat milk", tagz=["coffee"])
    # E: Unexpected keyword argument "tagz" for "add" of "AsyncMemoryStoreAPI"  [call-arg]
    # N: "add" defined in "navi_memory.store_api_async"
    reveal_type(await store.update(1, user_id="u1", content="soy milk"))  # N: Revealed type is "navi_memory.models.Item"


async def backends(store: MemoryStore, astore: AsyncMemoryStore) -> None:
    reveal_type(store.backend)  # N: Revealed type is "navi_memory.backends.base.Backend"
    reveal_type(store.backend.schema_version())  # N: Revealed type is "int"
    reveal_type(await astore.backend.schema_version())  # N: Revealed type is "int"
    store.backend.get_items(user_id="u1")  # E: "Backend" has no attribute "get_items"  [attr-defined]


async def adapters(caller: StoreCaller) -> None:
    reveal_type(caller.call(store_call.search("coffee", user_id="u1")))
    # N: Revealed type is "navi_memory.models.SearchResults"
    reveal_type(await caller.acall(store_call.get(1, user_id="u1")))  # N: Revealed type is "navi_memory.models.Item"
    store_call.search("coffee", user_id="u1", limit="ten")
    # E: Argument "limit" to "search" of "StoreCalls" has incompatible type "str"; expected "int"  [arg-type]
    store_call.serch("coffee", user_id="u1")  # E: "StoreCalls" has no attribute "serch"; maybe "search"?  [attr-defined]
    caller.call("search")  # a method name is not a call
    # E: Argument 1 to "call" of "StoreCaller" has incompatible type "str"; expected "StoreCall[Never]"  [arg-type]
