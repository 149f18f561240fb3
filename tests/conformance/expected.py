"""The LangGraph store tests that cannot judge NaviStore, each with its reason, and the ones it
still fails, each with why. ``tests/test_langgraph_conformance.py`` holds the harness to them:
every other test function must pass on both backends, and one listed as failing that starts to
pass must leave the list."""

from __future__ import annotations

_INDEX_CONFIG = ("reads the original store's `index_config` dict (`dims`, `embed`, `text_fields`, `__tokenized_fields`)"
                 " and its `embeddings` attribute: NaviStore's index is `{'fields': [...]}`, the store's embedder embeds")
_RAW_ROWS = ("reads and rewrites the rows of LangGraph's own `store` table through `store._cursor()` (backdates "
             "`expires_at` in SQL, counts rows): NaviStore keeps items in navi-memory's schema, and never returns "
             "an expired item, so `omit_expired=False` has no meaning")
_HELPER = "tests a helper function of LangGraph's store module (SQL escaping, pattern building), not a store"

# inspects the original stores' internals
NOT_APPLICABLE: dict[str, str] = {
    "memory/test_store.py::test_vector_store_initialization": _INDEX_CONFIG,
    "sqlite/test_store.py::test_vector_store_initialization": _INDEX_CONFIG,
    "sqlite/test_async_store.py::test_vector_store_initialization": _INDEX_CONFIG,
    "postgres/test_store.py::test_vector_store_initialization": _INDEX_CONFIG,
    "postgres/test_async_store.py::test_vector_store_initialization": _INDEX_CONFIG,
    "postgres/test_async_store.py::test_abatch_uses_single_pool_checkout":
        "monkeypatches `langgraph.checkpoint.postgres._ainternal.get_connection` to count the original "
        "store's pool checkouts",
    **{f"postgres/{file}::test_omit_expired_{name}": _RAW_ROWS
       for file in ("test_store.py", "test_async_store.py")
       for name in ("filters_read_paths", "disabled_preserves_expired_rows", "refresh_ttl_only_refreshes_live_rows",
                    "search_pagination")},
}

# exercises no store at all (a LangGraph helper, a mock store, the class's migration list): they pass
# whatever NaviStore does, so they are counted apart from its passes
NO_STORE: dict[str, str] = {
    "memory/test_store.py::test_get_text_at_path": "tests LangGraph's `get_text_at_path`",
    "memory/test_store.py::test_async_batch_store": "tests LangGraph's `AsyncBatchedBaseStore` on a mock store",
    "memory/test_store.py::test_async_batch_store_handles_cancellation":
        "tests LangGraph's `AsyncBatchedBaseStore` on a mock store",
    "sqlite/test_store.py::test_escape_glob_literal": _HELPER,
    "sqlite/test_store.py::test_namespace_match_pattern": _HELPER,
    "sqlite/test_store.py::test_list_namespaces_prefix_uses_indexable_condition":
        "inspects the SQL of LangGraph's `BaseSqliteStore` query builder",
    "sqlite/test_store.py::test_nonnull_migrations": "reads the original store's `MIGRATIONS` list",
    "postgres/test_store.py::test_escape_like_literal": _HELPER,
    "postgres/test_store.py::test_namespace_match_pattern": _HELPER,
    "postgres/test_store.py::test_nonnull_migrations": "reads the original store's `MIGRATIONS` list",
}

# still failing, with why (the goal: none; the harness fails when a listed test passes)
STILL_FAILING: dict[str, str] = {}
