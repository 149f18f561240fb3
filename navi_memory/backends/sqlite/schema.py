"""SQLite schema, as numbered migration steps. Every statement is idempotent (IF NOT EXISTS)."""

from __future__ import annotations

from .lexicon import LEXICON
from ...models import (EMBEDDING_STATES, FACT_CATEGORIES, FACT_SOURCES, HOUSEHOLD_MODES, ITEM_STATUSES, ITEM_TYPES, LLM_PURPOSES,
                      MESSAGE_ROLES, SESSION_STATES)


def _in(values: tuple[str, ...]) -> str:
    return "(" + ", ".join(f"'{v}'" for v in values) + ")"


def facts_table(name: str, last: str) -> str:
    """The facts table as version 1 made it, ending with ``last`` (v1: its natural key; v5: the
    scope columns, the key becoming a unique index)."""
    return f"""CREATE TABLE IF NOT EXISTS {name} (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    category TEXT NOT NULL CHECK (category IN {_in(FACT_CATEGORIES)}),
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    source TEXT NOT NULL CHECK (source IN {_in(FACT_SOURCES)}),
    confidence INTEGER NOT NULL CHECK (confidence BETWEEN 0 AND 100),
    source_context TEXT,
    source_session_id TEXT,
    source_message_id TEXT,
    person TEXT,
    expires_at TEXT,
    last_verified_at TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    item_id INTEGER REFERENCES items(id) ON DELETE SET NULL,
    {last}
)"""


_FACT_COLUMNS = ("id, user_id, category, key, value, source, confidence, source_context, source_session_id,"
                 " source_message_id, person, expires_at, last_verified_at, created_at, updated_at, item_id")

# Version 5: scopes (agent_id, run_id) on items and facts, keyed items (namespace, ext_key: the
# LangGraph store's namespace and key). A fact's identity gains agent_id, so the table-level
# UNIQUE (user_id, category, key) must go: SQLite cannot drop it, the table is rebuilt. DROP TABLE
# runs the foreign keys' ON DELETE actions (the migration's transaction cannot turn them off), so
# fact_history and the promotions' fact ids are kept aside and put back; ids do not change.
SCOPES = [
    "ALTER TABLE items ADD COLUMN agent_id TEXT",
    "ALTER TABLE items ADD COLUMN run_id TEXT",
    "ALTER TABLE items ADD COLUMN namespace TEXT",
    "ALTER TABLE items ADD COLUMN ext_key TEXT",
    "CREATE INDEX IF NOT EXISTS items_user_agent ON items (user_id, agent_id) WHERE agent_id IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS items_user_run ON items (user_id, run_id) WHERE run_id IS NOT NULL",
    "CREATE UNIQUE INDEX IF NOT EXISTS items_user_namespace_key ON items (user_id, namespace, ext_key)"
    " WHERE ext_key IS NOT NULL",
    facts_table("facts_v5", "agent_id TEXT,\n    run_id TEXT"),
    f"INSERT INTO facts_v5 ({_FACT_COLUMNS}) SELECT {_FACT_COLUMNS} FROM facts",
    "CREATE TEMP TABLE facts_v5_history AS SELECT * FROM fact_history",
    "CREATE TEMP TABLE facts_v5_promotions AS SELECT item_id, fact_id FROM promotions WHERE fact_id IS NOT NULL",
    "CREATE TEMP TABLE facts_v5_seq AS SELECT seq FROM sqlite_sequence WHERE name = 'facts'",
    "DROP TABLE facts",
    "ALTER TABLE facts_v5 RENAME TO facts",
    "INSERT INTO fact_history SELECT * FROM temp.facts_v5_history",
    "UPDATE promotions SET fact_id = (SELECT p.fact_id FROM temp.facts_v5_promotions p"
    " WHERE p.item_id = promotions.item_id) WHERE item_id IN (SELECT item_id FROM temp.facts_v5_promotions)",
    # AUTOINCREMENT never hands out an id again, even one of a fact deleted before the rebuild
    "UPDATE sqlite_sequence SET seq = max(seq, coalesce((SELECT max(seq) FROM temp.facts_v5_seq), 0))"
    " WHERE name = 'facts'",
    "INSERT INTO sqlite_sequence (name, seq) SELECT 'facts', seq FROM temp.facts_v5_seq"
    " WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'facts')",
    "DROP TABLE temp.facts_v5_history",
    "DROP TABLE temp.facts_v5_promotions",
    "DROP TABLE temp.facts_v5_seq",
    "CREATE INDEX IF NOT EXISTS facts_user_updated ON facts (user_id, updated_at DESC)",
    # a fact without agent_id is shared by every agent; '' is never an agent id
    "CREATE UNIQUE INDEX IF NOT EXISTS facts_identity ON facts (user_id, coalesce(agent_id, ''), category, key)",
    "CREATE INDEX IF NOT EXISTS facts_user_agent ON facts (user_id, agent_id) WHERE agent_id IS NOT NULL",
    # the scope of a conversation, given to add_messages: the items extracted from it carry it
    "ALTER TABLE session_state ADD COLUMN agent_id TEXT",
    "ALTER TABLE session_state ADD COLUMN run_id TEXT",
]


# Version 6: a keyed item's TTL (minutes) as a column, so a read can refresh its expiry (LangGraph's
# refresh_ttl) without a reserved metadata key. NaviStore kept it in metadata "_langgraph"."ttl"
# before: that value moves here and leaves the metadata (and an emptied "_langgraph" with it).
KEYED_TTL = [
    "ALTER TABLE items ADD COLUMN ttl_minutes REAL",
    "UPDATE items SET ttl_minutes = CAST(json_extract(metadata, '$._langgraph.ttl') AS REAL),"
    " metadata = json_remove(metadata, '$._langgraph.ttl') WHERE namespace IS NOT NULL AND json_valid(metadata)"
    " AND json_type(metadata, '$._langgraph.ttl') IN ('integer', 'real')",
    "UPDATE items SET metadata = json_remove(metadata, '$._langgraph') WHERE namespace IS NOT NULL"
    " AND json_valid(metadata) AND json_type(metadata, '$._langgraph') = 'object'"
    " AND json_extract(metadata, '$._langgraph') = '{}'",
    "CREATE INDEX IF NOT EXISTS items_keyed_expiry ON items (expires_at) WHERE namespace IS NOT NULL"
    " AND expires_at IS NOT NULL",
]
# version 7: a session's items in order, for the turns before and after a search hit (their ids
# are not consecutive once other sessions or users write between two extraction passes).
SESSION_ORDER = [
    "CREATE INDEX IF NOT EXISTS items_user_session ON items (user_id, json_extract(source_ref, '$.session_id'))",
]
# version 8: the user's own time zone (NULL: the store's ``Settings.timezone``)
USER_TIMEZONE = ["ALTER TABLE users ADD COLUMN timezone TEXT"]
# version 9: memory off for a user since then (NULL: on)
MEMORY_OFF = ["ALTER TABLE users ADD COLUMN memory_off_since TEXT"]
# version 10: the devices each person uses (speaker inference)
PERSON_DEVICES = ["ALTER TABLE persons ADD COLUMN devices TEXT NOT NULL DEFAULT '[]'"]
# version 11: when a fact's value was said (its statement's time; before: when it was written), and
# the statement a history value came from (chunks of that message are then known to be past)
STATEMENT_TIMES = [
    "ALTER TABLE facts ADD COLUMN observed_at TEXT",
    "UPDATE facts SET observed_at = updated_at WHERE observed_at IS NULL",
    "ALTER TABLE fact_history ADD COLUMN source_session_id TEXT",
    "ALTER TABLE fact_history ADD COLUMN source_message_id TEXT",
    "CREATE INDEX IF NOT EXISTS fact_history_user_session ON fact_history (user_id, source_session_id)"
    " WHERE source_session_id IS NOT NULL",
]
# version 13: a new embedding model without downtime (PostgreSQL's version 13 says how)
NEXT_EMBEDDINGS = [
    "ALTER TABLE users ADD COLUMN embedding_model TEXT",
    """CREATE TABLE IF NOT EXISTS next_embeddings (
        item_id INTEGER PRIMARY KEY REFERENCES items(id) ON DELETE CASCADE,
        user_id TEXT NOT NULL,
        model TEXT NOT NULL,
        dimensions INTEGER NOT NULL,
        vector BLOB NOT NULL,
        updated_at TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS next_embeddings_user ON next_embeddings (user_id)",
]
# version 14: the household's display name and locale (a BCP 47 tag such as en-US), shown in the
# prompt and the UI (NULL: none recorded)
HOUSEHOLD_DETAILS = ["ALTER TABLE users ADD COLUMN household_name TEXT", "ALTER TABLE users ADD COLUMN locale TEXT"]

# version 15: PostgreSQL's full-text column reads text folded as SQLite's indexes always have
# (accents, compatibility forms, separators); nothing changes here: one version history on both backends
FOLDED_TEXT: list[str] = []
MIGRATIONS: list[tuple[int, list[str]]] = [
    (
        1,
        [
            """CREATE TABLE IF NOT EXISTS users (
                pk INTEGER PRIMARY KEY AUTOINCREMENT,
                id TEXT NOT NULL UNIQUE,
                vec_gen INTEGER NOT NULL DEFAULT 0,
                created_at TEXT NOT NULL
            )""",
            """CREATE TABLE IF NOT EXISTS themes (
                id INTEGER PRIMARY KEY,
                user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                slug TEXT NOT NULL,
                display_name TEXT NOT NULL,
                description TEXT,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL,
                UNIQUE (user_id, slug)
            )""",
            f"""CREATE TABLE IF NOT EXISTS items (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                theme TEXT NOT NULL,
                type TEXT NOT NULL CHECK (type IN {_in(ITEM_TYPES)}),
                title TEXT,
                content TEXT NOT NULL,
                tags TEXT NOT NULL DEFAULT '[]',
                status TEXT NOT NULL DEFAULT 'active' CHECK (status IN {_in(ITEM_STATUSES)}),
                pinned INTEGER NOT NULL DEFAULT 0,
                source TEXT,
                source_ref TEXT,
                person TEXT,
                confidence INTEGER CHECK (confidence BETWEEN 0 AND 100),
                observed_at TEXT,
                expires_at TEXT,
                metadata TEXT NOT NULL DEFAULT '{{}}',
                fact_id INTEGER,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL,
                FOREIGN KEY (user_id, theme) REFERENCES themes(user_id, slug)
            )""",
            "CREATE INDEX IF NOT EXISTS items_user_created ON items (user_id, created_at DESC)",
            "CREATE INDEX IF NOT EXISTS items_user_theme ON items (user_id, theme, created_at DESC)",
            "CREATE INDEX IF NOT EXISTS items_user_type ON items (user_id, type)",
            "CREATE INDEX IF NOT EXISTS items_fact ON items (fact_id) WHERE fact_id IS NOT NULL",
            # External-content FTS5 index kept in step by triggers; porter = English stemming.
            """CREATE VIRTUAL TABLE IF NOT EXISTS items_fts USING fts5(
                title, content, content='items', content_rowid='id',
                tokenize='porter unicode61 remove_diacritics 2'
            )""",
            """CREATE TRIGGER IF NOT EXISTS items_fts_insert AFTER INSERT ON items BEGIN
                INSERT INTO items_fts (rowid, title, content)
                VALUES (new.id, coalesce(new.title, ''), new.content);
            END""",
            """CREATE TRIGGER IF NOT EXISTS items_fts_delete AFTER DELETE ON items BEGIN
                INSERT INTO items_fts (items_fts, rowid, title, content)
                VALUES ('delete', old.id, coalesce(old.title, ''), old.content);
            END""",
            """CREATE TRIGGER IF NOT EXISTS items_fts_update AFTER UPDATE OF title, content ON items BEGIN
                INSERT INTO items_fts (items_fts, rowid, title, content)
                VALUES ('delete', old.id, coalesce(old.title, ''), old.content);
                INSERT INTO items_fts (rowid, title, content)
                VALUES (new.id, coalesce(new.title, ''), new.content);
            END""",
            f"""CREATE TABLE IF NOT EXISTS embeddings (
                item_id INTEGER PRIMARY KEY REFERENCES items(id) ON DELETE CASCADE,
                user_id TEXT NOT NULL,
                model TEXT NOT NULL,
                dimensions INTEGER,
                state TEXT NOT NULL CHECK (state IN {_in(EMBEDDING_STATES)}),
                error TEXT,
                vector BLOB,
                gen INTEGER NOT NULL DEFAULT 0,
                updated_at TEXT NOT NULL
            )""",
            "CREATE INDEX IF NOT EXISTS embeddings_user_gen ON embeddings (user_id, gen)",
            facts_table("facts", "UNIQUE (user_id, category, key)"),
            "CREATE INDEX IF NOT EXISTS facts_user_updated ON facts (user_id, updated_at DESC)",
            """CREATE TABLE IF NOT EXISTS fact_history (
                id INTEGER PRIMARY KEY,
                fact_id INTEGER NOT NULL REFERENCES facts(id) ON DELETE CASCADE,
                user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                value TEXT NOT NULL,
                source TEXT NOT NULL,
                confidence INTEGER NOT NULL,
                source_context TEXT,
                valid_from TEXT NOT NULL,
                valid_to TEXT NOT NULL
            )""",
            "CREATE INDEX IF NOT EXISTS fact_history_fact ON fact_history (fact_id, valid_to)",
            """CREATE TABLE IF NOT EXISTS summaries (
                user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                version INTEGER NOT NULL,
                content TEXT NOT NULL,
                created_at TEXT NOT NULL,
                PRIMARY KEY (user_id, version)
            )""",
            """CREATE TABLE IF NOT EXISTS session_state (
                user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                session_id TEXT NOT NULL,
                extracted_at TEXT,
                updated_at TEXT NOT NULL,
                PRIMARY KEY (user_id, session_id)
            )""",
        ],
    ),
    (
        2,
        [
            # Sessions extend session_state (kept: mark_session_extracted / get_extracted_at).
            "ALTER TABLE session_state ADD COLUMN created_at TEXT",
            "ALTER TABLE session_state ADD COLUMN last_active TEXT",
            f"ALTER TABLE session_state ADD COLUMN state TEXT NOT NULL DEFAULT 'open'"
            f" CHECK (state IN {_in(SESSION_STATES)})",
            "ALTER TABLE session_state ADD COLUMN error TEXT",
            "ALTER TABLE session_state ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE session_state ADD COLUMN claimed_at TEXT",
            "ALTER TABLE session_state ADD COLUMN message_count INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE session_state ADD COLUMN user_messages INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE session_state ADD COLUMN extracted_seq INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE session_state ADD COLUMN extracted_user_messages INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE session_state ADD COLUMN chunked_seq INTEGER NOT NULL DEFAULT 0",
            "CREATE INDEX IF NOT EXISTS session_state_active ON session_state (user_id, last_active)",
            f"""CREATE TABLE IF NOT EXISTS messages (
                user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                session_id TEXT NOT NULL,
                seq INTEGER NOT NULL,
                role TEXT NOT NULL CHECK (role IN {_in(MESSAGE_ROLES)}),
                content TEXT NOT NULL DEFAULT '',
                name TEXT,
                tool_calls TEXT,
                tool_call_id TEXT,
                created_at TEXT NOT NULL,
                PRIMARY KEY (user_id, session_id, seq),
                FOREIGN KEY (user_id, session_id) REFERENCES session_state(user_id, session_id) ON DELETE CASCADE
            )""",
            f"""CREATE TABLE IF NOT EXISTS llm_calls (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                session_id TEXT,
                purpose TEXT NOT NULL CHECK (purpose IN {_in(LLM_PURPOSES)}),
                model TEXT,
                input_tokens INTEGER NOT NULL DEFAULT 0,
                output_tokens INTEGER NOT NULL DEFAULT 0,
                estimated INTEGER NOT NULL DEFAULT 0,
                ok INTEGER NOT NULL,
                error TEXT,
                created_at TEXT NOT NULL
            )""",
            "CREATE INDEX IF NOT EXISTS llm_calls_session ON llm_calls (user_id, session_id)",
        ],
    ),
    (
        3,
        [
            # names mentioned in a query are looked up here to become person hints
            "CREATE INDEX IF NOT EXISTS items_user_person ON items (user_id, lower(person)) WHERE person IS NOT NULL",
            # context: text that situates an item (e.g. the previous turn), embedded and indexed with it
            "ALTER TABLE items ADD COLUMN context TEXT",
            "DROP TRIGGER IF EXISTS items_fts_insert",
            "DROP TRIGGER IF EXISTS items_fts_delete",
            "DROP TRIGGER IF EXISTS items_fts_update",
            "DROP TABLE IF EXISTS items_fts",
            """CREATE VIRTUAL TABLE items_fts USING fts5(
                title, content, context, content='items', content_rowid='id',
                tokenize='porter unicode61 remove_diacritics 2'
            )""",
            """CREATE TRIGGER items_fts_insert AFTER INSERT ON items BEGIN
                INSERT INTO items_fts (rowid, title, content, context)
                VALUES (new.id, coalesce(new.title, ''), new.content, coalesce(new.context, ''));
            END""",
            """CREATE TRIGGER items_fts_delete AFTER DELETE ON items BEGIN
                INSERT INTO items_fts (items_fts, rowid, title, content, context)
                VALUES ('delete', old.id, coalesce(old.title, ''), old.content, coalesce(old.context, ''));
            END""",
            """CREATE TRIGGER items_fts_update AFTER UPDATE OF title, content, context ON items BEGIN
                INSERT INTO items_fts (items_fts, rowid, title, content, context)
                VALUES ('delete', old.id, coalesce(old.title, ''), old.content, coalesce(old.context, ''));
                INSERT INTO items_fts (rowid, title, content, context)
                VALUES (new.id, coalesce(new.title, ''), new.content, coalesce(new.context, ''));
            END""",
            "INSERT INTO items_fts (items_fts) VALUES ('rebuild')",
        ],
    ),
    (
        4,
        [
            # the household: who the memories are about (see operations/persons.py)
            f"ALTER TABLE users ADD COLUMN household_mode TEXT NOT NULL DEFAULT 'single'"
            f" CHECK (household_mode IN {_in(HOUSEHOLD_MODES)})",
            """CREATE TABLE IF NOT EXISTS persons (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                display_name TEXT NOT NULL,
                pronouns TEXT,
                role TEXT,
                aliases TEXT NOT NULL DEFAULT '[]',
                birth_date TEXT,
                notes TEXT,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL
            )""",
            "CREATE UNIQUE INDEX IF NOT EXISTS persons_user_name ON persons (user_id, lower(display_name))",
            # items turned into a fact by the promotion job; fact_id NULL once that fact is deleted
            # (the items stay promoted: a deleted fact is not promoted again)
            """CREATE TABLE IF NOT EXISTS promotions (
                item_id INTEGER PRIMARY KEY REFERENCES items(id) ON DELETE CASCADE,
                user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                fact_id INTEGER REFERENCES facts(id) ON DELETE SET NULL,
                promoted_at TEXT NOT NULL
            )""",
            "CREATE INDEX IF NOT EXISTS promotions_user_fact ON promotions (user_id, fact_id)",
        ],
    ),
    (5, SCOPES),
    (6, KEYED_TTL),
    (7, SESSION_ORDER),
    (8, USER_TIMEZONE),
    (9, MEMORY_OFF),
    (10, PERSON_DEVICES),
    (11, STATEMENT_TIMES),
    (12, LEXICON),
    (13, NEXT_EMBEDDINGS),
    (14, HOUSEHOLD_DETAILS),
    (15, FOLDED_TEXT),
]

LATEST_VERSION = MIGRATIONS[-1][0]
