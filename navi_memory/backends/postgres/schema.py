"""PostgreSQL schema as numbered, idempotent migration steps (``MIGRATIONS``), like SQLite's.

``migrate`` applies the steps above the highest version recorded in ``navi_schema_migrations``,
then the two steps that depend on the server rather than on a version (``ENVIRONMENT``): the
vector column becomes ``vector`` once pgvector is installed (tables are created with ``real[]``,
which stores vectors without it), and the trigram indexes appear once pg_trgm is installed.

Every table carries ``user_id`` and every primary key starts with it, so the tables can be
distributed by ``user_id`` on Citus: on a Citus coordinator, ``migrate`` distributes ``DISTRIBUTED``
and makes ``REFERENCE`` reference tables (``citus.py``). ``embeddings.embedding`` is an untyped ``vector`` column:
each model gets its own partial HNSW index on ``embedding::vector(N)`` (pgvector's recipe for
several dimensions in one column), created when the model's first vector is stored.
"""

from __future__ import annotations

import re
import unicodedata

from ...models import (
    EMBEDDING_STATES,
    FACT_CATEGORIES,
    FACT_SOURCES,
    HOUSEHOLD_MODES,
    ITEM_STATUSES,
    ITEM_TYPES,
    LLM_PURPOSES,
    MESSAGE_ROLES,
    SESSION_STATES,
)


def _in(values: tuple[str, ...]) -> str:
    return "(" + ", ".join(f"'{v}'" for v in values) + ")"


TSV_EXPRESSION = (
    "setweight(to_tsvector('english', coalesce(title, '')), 'A') || "
    "setweight(to_tsvector('english', content), 'B') || "
    "setweight(to_tsvector('english', coalesce(context, '')), 'D')"
)

# The marks NFKD splits off Latin, Greek and Cyrillic letters (the Unicode blocks of combining
# diacritical marks): dropped, a word matches with or without its accents.
DIACRITICS = r"[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]"  # PostgreSQL's regex escapes


def folded(text: str) -> str:
    """SQL for ``text`` as the full-text index reads it since version 15: compatibility forms and
    diacritics folded (café = cafe, ﬁ = fi, full-width letters = ASCII) and the separators inside
    addresses, paths, hosts and numbers made spaces (bob@example.com, 3.5, 555-0100: words of their
    own), as SQLite's unicode61 index and its per-user index (``lexicon.py``) read them. ``<`` and
    ``>`` too: PostgreSQL's parser drops what it reads as an HTML tag, and after an opening
    ``<script>`` whose end it does not find, every word (SQLite indexes them all). normalize()
    needs a UTF8 database: elsewhere the column keeps ``TSV_EXPRESSION`` (``FOLD_TEXT``)."""
    return (f"regexp_replace(regexp_replace(normalize({text}, NFKD), '{DIACRITICS}', '', 'g'),"
            " '[-+@/.:<>\\\\]', ' ', 'g')")


# Whether the full-text column reads folded text (version 15 on a UTF8 database): what a search's
# words must then be folded the same way for (a boolean expression; false before the items table).
FOLD_TEXT = ("coalesce((SELECT position('normalize' IN lower(pg_get_expr(d.adbin, d.adrelid))) > 0 FROM pg_attrdef d"
             " JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum"
             " WHERE d.adrelid = to_regclass('items') AND a.attname = 'content_tsv'), false)")

_SEPARATORS = re.compile(r"[-+@/.:<>\\]")
_MARKS = re.compile(DIACRITICS)  # the same escapes in Python


def fold_words(text: str) -> str:
    """``text`` folded as ``folded`` folds it in SQL (Python's Unicode tables for PostgreSQL's): a
    search folds its words here, once, rather than in each use of them in its statement."""
    return _SEPARATORS.sub(" ", _MARKS.sub("", unicodedata.normalize("NFKD", text)))


_TITLE, _CONTEXT = "coalesce(title, '')", "coalesce(context, '')"
FOLDED_TSV_EXPRESSION = (
    f"setweight(to_tsvector('english', {folded(_TITLE)}), 'A') || "
    f"setweight(to_tsvector('english', {folded('content')}), 'B') || "
    f"setweight(to_tsvector('english', {folded(_CONTEXT)}), 'D')"
)

CORE = [
    """CREATE TABLE IF NOT EXISTS users (
        id text PRIMARY KEY,
        created_at timestamptz NOT NULL DEFAULT now()
    )""",
    """CREATE TABLE IF NOT EXISTS themes (
        user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        slug text NOT NULL,
        display_name text NOT NULL,
        description text,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        PRIMARY KEY (user_id, slug)
    )""",
    f"""CREATE TABLE IF NOT EXISTS items (
        user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        id bigserial NOT NULL,
        theme text NOT NULL,
        type text NOT NULL CHECK (type IN {_in(ITEM_TYPES)}),
        title text,
        content text NOT NULL,
        tags jsonb NOT NULL DEFAULT '[]',
        status text NOT NULL DEFAULT 'active' CHECK (status IN {_in(ITEM_STATUSES)}),
        pinned boolean NOT NULL DEFAULT false,
        source text,
        source_ref jsonb,
        person text,
        confidence integer CHECK (confidence BETWEEN 0 AND 100),
        observed_at timestamptz,
        expires_at timestamptz,
        metadata jsonb NOT NULL DEFAULT '{{}}',
        context text,
        fact_id bigint,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        content_tsv tsvector GENERATED ALWAYS AS ({TSV_EXPRESSION}) STORED,
        PRIMARY KEY (user_id, id),
        FOREIGN KEY (user_id, theme) REFERENCES themes(user_id, slug)
    )""",
    "CREATE INDEX IF NOT EXISTS items_user_created ON items (user_id, created_at DESC)",
    "CREATE INDEX IF NOT EXISTS items_user_theme ON items (user_id, theme, created_at DESC)",
    "CREATE INDEX IF NOT EXISTS items_user_type ON items (user_id, type)",
    "CREATE INDEX IF NOT EXISTS items_tsv ON items USING gin (content_tsv)",
    f"""CREATE TABLE IF NOT EXISTS facts (
        user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        id bigserial NOT NULL,
        category text NOT NULL CHECK (category IN {_in(FACT_CATEGORIES)}),
        key text NOT NULL,
        value text NOT NULL,
        source text NOT NULL CHECK (source IN {_in(FACT_SOURCES)}),
        confidence integer NOT NULL CHECK (confidence BETWEEN 0 AND 100),
        source_context text,
        source_session_id text,
        source_message_id text,
        person text,
        expires_at timestamptz,
        last_verified_at timestamptz,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        item_id bigint,
        PRIMARY KEY (user_id, id),
        UNIQUE (user_id, category, key)
    )""",
    "CREATE INDEX IF NOT EXISTS facts_user_updated ON facts (user_id, updated_at DESC)",
    """CREATE TABLE IF NOT EXISTS fact_history (
        user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        id bigserial NOT NULL,
        fact_id bigint NOT NULL,
        value text NOT NULL,
        source text NOT NULL,
        confidence integer NOT NULL,
        source_context text,
        valid_from timestamptz NOT NULL,
        valid_to timestamptz NOT NULL,
        PRIMARY KEY (user_id, id),
        FOREIGN KEY (user_id, fact_id) REFERENCES facts(user_id, id) ON DELETE CASCADE
    )""",
    """CREATE TABLE IF NOT EXISTS summaries (
        user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        version integer NOT NULL,
        content text NOT NULL,
        created_at timestamptz NOT NULL,
        PRIMARY KEY (user_id, version)
    )""",
    """CREATE TABLE IF NOT EXISTS session_state (
        user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        session_id text NOT NULL,
        extracted_at timestamptz,
        updated_at timestamptz NOT NULL,
        PRIMARY KEY (user_id, session_id)
    )""",
]


# real[] until pgvector is there (ENVIRONMENT then retypes it): vectors are stored, not searched
EMBEDDINGS_TABLE = f"""CREATE TABLE IF NOT EXISTS embeddings (
        user_id text NOT NULL,
        item_id bigint NOT NULL,
        model text NOT NULL,
        dimensions integer,
        state text NOT NULL CHECK (state IN {_in(EMBEDDING_STATES)}),
        error text,
        embedding real[],
        updated_at timestamptz NOT NULL,
        PRIMARY KEY (user_id, item_id),
        FOREIGN KEY (user_id, item_id) REFERENCES items(user_id, id) ON DELETE CASCADE
    )"""

EMBEDDING_INDEXES = ["CREATE INDEX IF NOT EXISTS embeddings_user_model ON embeddings (user_id, model, state)"]

TRIGRAM_INDEXES = [
    "CREATE INDEX IF NOT EXISTS items_content_trgm ON items USING gin (content gin_trgm_ops)",
    "CREATE INDEX IF NOT EXISTS facts_key_trgm ON facts USING gin (key gin_trgm_ops)",
    "CREATE INDEX IF NOT EXISTS facts_value_trgm ON facts USING gin (value gin_trgm_ops)",
    "CREATE INDEX IF NOT EXISTS facts_category_trgm ON facts USING gin (category gin_trgm_ops)",
]

# Version 2: conversations. Sessions extend session_state (mark_session_extracted keeps working).
SESSIONS = [
    "ALTER TABLE session_state ADD COLUMN IF NOT EXISTS created_at timestamptz",
    "ALTER TABLE session_state ADD COLUMN IF NOT EXISTS last_active timestamptz",
    # a constraint added with its column is named (PostgreSQL's own name for it): Citus needs the name
    f"ALTER TABLE session_state ADD COLUMN IF NOT EXISTS state text NOT NULL DEFAULT 'open'"
    f" CONSTRAINT session_state_state_check CHECK (state IN {_in(SESSION_STATES)})",
    "ALTER TABLE session_state ADD COLUMN IF NOT EXISTS error text",
    "ALTER TABLE session_state ADD COLUMN IF NOT EXISTS attempts integer NOT NULL DEFAULT 0",
    "ALTER TABLE session_state ADD COLUMN IF NOT EXISTS claimed_at timestamptz",
    "ALTER TABLE session_state ADD COLUMN IF NOT EXISTS message_count integer NOT NULL DEFAULT 0",
    "ALTER TABLE session_state ADD COLUMN IF NOT EXISTS user_messages integer NOT NULL DEFAULT 0",
    "ALTER TABLE session_state ADD COLUMN IF NOT EXISTS extracted_seq integer NOT NULL DEFAULT 0",
    "ALTER TABLE session_state ADD COLUMN IF NOT EXISTS extracted_user_messages integer NOT NULL DEFAULT 0",
    "ALTER TABLE session_state ADD COLUMN IF NOT EXISTS chunked_seq integer NOT NULL DEFAULT 0",
    "CREATE INDEX IF NOT EXISTS session_state_active ON session_state (user_id, last_active)",
    f"""CREATE TABLE IF NOT EXISTS messages (
        user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        session_id text NOT NULL,
        seq integer NOT NULL,
        role text NOT NULL CHECK (role IN {_in(MESSAGE_ROLES)}),
        content text NOT NULL DEFAULT '',
        name text,
        tool_calls jsonb,
        tool_call_id text,
        created_at timestamptz NOT NULL,
        PRIMARY KEY (user_id, session_id, seq),
        FOREIGN KEY (user_id, session_id) REFERENCES session_state(user_id, session_id) ON DELETE CASCADE
    )""",
    f"""CREATE TABLE IF NOT EXISTS llm_calls (
        user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        id bigserial NOT NULL,
        session_id text,
        purpose text NOT NULL CHECK (purpose IN {_in(LLM_PURPOSES)}),
        model text,
        input_tokens integer NOT NULL DEFAULT 0,
        output_tokens integer NOT NULL DEFAULT 0,
        estimated boolean NOT NULL DEFAULT false,
        ok boolean NOT NULL,
        error text,
        created_at timestamptz NOT NULL,
        PRIMARY KEY (user_id, id)
    )""",
    "CREATE INDEX IF NOT EXISTS llm_calls_session ON llm_calls (user_id, session_id)",
]

# version 3: the context column (a turn's previous turn), in the full-text vector too (a generated
# column cannot be altered: rebuilt when its expression lacks it); names mentioned in a query are
# looked up by the person index to become person hints
RETRIEVAL = [
    "ALTER TABLE items ADD COLUMN IF NOT EXISTS context text",
    f"""DO $$ BEGIN
        IF (SELECT position('context' IN pg_get_expr(d.adbin, d.adrelid)) = 0 FROM pg_attrdef d
            JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
            WHERE d.adrelid = 'items'::regclass AND a.attname = 'content_tsv') THEN
          ALTER TABLE items DROP COLUMN content_tsv;
          ALTER TABLE items ADD COLUMN content_tsv tsvector GENERATED ALWAYS AS ({TSV_EXPRESSION}) STORED;
          CREATE INDEX IF NOT EXISTS items_tsv ON items USING gin (content_tsv);
        END IF;
    END $$""","CREATE INDEX IF NOT EXISTS items_user_person ON items (user_id, lower(person)) WHERE person IS NOT NULL"]

# version 4: the household (persons, single or multi mode) and the promotion job's record.
# promotions.fact_id has no foreign key (ON DELETE SET NULL of one column of a composite key needs
# PostgreSQL 15): a deleted fact leaves it dangling, which the queries read as NULL; the items
# stay promoted.
HOUSEHOLD = [
    f"ALTER TABLE users ADD COLUMN IF NOT EXISTS household_mode text NOT NULL DEFAULT 'single'"
    f" CONSTRAINT users_household_mode_check CHECK (household_mode IN {_in(HOUSEHOLD_MODES)})",
    """CREATE TABLE IF NOT EXISTS persons (
        user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        id bigserial NOT NULL,
        display_name text NOT NULL,
        pronouns text,
        role text,
        aliases jsonb NOT NULL DEFAULT '[]',
        birth_date text,
        notes text,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        PRIMARY KEY (user_id, id)
    )""",
    "CREATE UNIQUE INDEX IF NOT EXISTS persons_user_name ON persons (user_id, lower(display_name))",
    """CREATE TABLE IF NOT EXISTS promotions (
        user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        item_id bigint NOT NULL,
        fact_id bigint,
        promoted_at timestamptz NOT NULL,
        PRIMARY KEY (user_id, item_id),
        FOREIGN KEY (user_id, item_id) REFERENCES items(user_id, id) ON DELETE CASCADE
    )""",
    "CREATE INDEX IF NOT EXISTS promotions_user_fact ON promotions (user_id, fact_id)",
]

# version 5: scopes (agent_id, run_id) on items and facts, keyed items (namespace, ext_key: the
# LangGraph store's namespace and key), a GIN index for metadata filters (jsonb_ops: containment
# and key existence). A fact's identity gains agent_id: a fact without one is shared by every agent.
SCOPES = [
    "ALTER TABLE items ADD COLUMN IF NOT EXISTS agent_id text",
    "ALTER TABLE items ADD COLUMN IF NOT EXISTS run_id text",
    "ALTER TABLE items ADD COLUMN IF NOT EXISTS namespace text",
    "ALTER TABLE items ADD COLUMN IF NOT EXISTS ext_key text",
    "ALTER TABLE facts ADD COLUMN IF NOT EXISTS agent_id text",
    "ALTER TABLE facts ADD COLUMN IF NOT EXISTS run_id text",
    "CREATE INDEX IF NOT EXISTS items_user_agent ON items (user_id, agent_id) WHERE agent_id IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS items_user_run ON items (user_id, run_id) WHERE run_id IS NOT NULL",
    "CREATE UNIQUE INDEX IF NOT EXISTS items_user_namespace_key ON items (user_id, namespace, ext_key)"
    " WHERE ext_key IS NOT NULL",
    """DO $$ BEGIN
        IF (SELECT t.typname FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
            WHERE a.attrelid = to_regclass(quote_ident(current_schema()) || '.items')
            AND a.attname = 'metadata' AND NOT a.attisdropped) <> 'jsonb' THEN
          ALTER TABLE items ALTER COLUMN metadata DROP DEFAULT;
          ALTER TABLE items ALTER COLUMN metadata TYPE jsonb USING metadata::jsonb;
          ALTER TABLE items ALTER COLUMN metadata SET DEFAULT '{}';
        END IF;
    END $$""",
    "CREATE INDEX IF NOT EXISTS items_metadata_gin ON items USING gin (metadata)",
    "ALTER TABLE facts DROP CONSTRAINT IF EXISTS facts_user_id_category_key_key",
    "CREATE UNIQUE INDEX IF NOT EXISTS facts_identity ON facts (user_id, (coalesce(agent_id, '')), category, key)",
    "CREATE INDEX IF NOT EXISTS facts_user_agent ON facts (user_id, agent_id) WHERE agent_id IS NOT NULL",
    # the scope of a conversation, given to add_messages: the items extracted from it carry it
    "ALTER TABLE session_state ADD COLUMN IF NOT EXISTS agent_id text",
    "ALTER TABLE session_state ADD COLUMN IF NOT EXISTS run_id text",
]

# version 6: a keyed item's TTL (minutes) as a column, so a read can refresh its expiry (LangGraph's
# refresh_ttl) without a reserved metadata key; NaviStore's old metadata "_langgraph"."ttl" moves here.
KEYED_TTL = [
    "ALTER TABLE items ADD COLUMN IF NOT EXISTS ttl_minutes double precision",
    "UPDATE items SET ttl_minutes = (metadata #>> '{_langgraph,ttl}')::double precision,"
    " metadata = metadata #- '{_langgraph,ttl}' WHERE namespace IS NOT NULL"
    " AND jsonb_typeof(metadata #> '{_langgraph,ttl}') = 'number'",
    "UPDATE items SET metadata = metadata - '_langgraph' WHERE namespace IS NOT NULL"
    " AND metadata -> '_langgraph' = '{}'::jsonb",
    "CREATE INDEX IF NOT EXISTS items_keyed_expiry ON items (expires_at) WHERE namespace IS NOT NULL"
    " AND expires_at IS NOT NULL",
]

# version 7: a session's items in order, for the turns before and after a search hit (their ids
# are not consecutive: other sessions and users take ids from the same sequence meanwhile).
SESSION_ORDER = [
    "CREATE INDEX IF NOT EXISTS items_user_session ON items (user_id, (source_ref ->> 'session_id'), id)",
]

# version 8: the user's own time zone (NULL: the store's ``Settings.timezone``)
USER_TIMEZONE = ["ALTER TABLE users ADD COLUMN IF NOT EXISTS timezone text"]

# version 9: memory off for a user since then (NULL: on)
MEMORY_OFF = ["ALTER TABLE users ADD COLUMN IF NOT EXISTS memory_off_since timestamptz"]

# version 10: the devices each person uses (speaker inference)
PERSON_DEVICES = ["ALTER TABLE persons ADD COLUMN IF NOT EXISTS devices jsonb NOT NULL DEFAULT '[]'"]

# version 11: when a fact's value was said (its statement's time; before: when it was written), and
# the statement a history value came from (chunks of that message are then known to be past)
STATEMENT_TIMES = [
    "ALTER TABLE facts ADD COLUMN IF NOT EXISTS observed_at timestamptz",
    "UPDATE facts SET observed_at = updated_at WHERE observed_at IS NULL",
    "ALTER TABLE fact_history ADD COLUMN IF NOT EXISTS source_session_id text",
    "ALTER TABLE fact_history ADD COLUMN IF NOT EXISTS source_message_id text",
    "CREATE INDEX IF NOT EXISTS fact_history_user_session ON fact_history (user_id, source_session_id)"
    " WHERE source_session_id IS NOT NULL",
]

# version 12: SQLite's per-user lexical index. ts_rank reads no statistics of other rows, so PostgreSQL
# has nothing to change; the step keeps one version history on both backends.
PER_USER_LEXICAL: list[str] = []

# version 13: a new embedding model without downtime. While the store re-embeds (``reembed``), the new
# model's vectors wait here, one per item; a user's searches keep reading ``embeddings`` (the old model)
# until all of that user's items have one, then they move over in one transaction and
# ``users.embedding_model`` names the model the user's vectors now are. Kept as real[]: never searched.
NEXT_EMBEDDINGS = [
    "ALTER TABLE users ADD COLUMN IF NOT EXISTS embedding_model text",
    """CREATE TABLE IF NOT EXISTS next_embeddings (
        user_id text NOT NULL,
        item_id bigint NOT NULL,
        model text NOT NULL,
        dimensions integer NOT NULL,
        embedding real[] NOT NULL,
        updated_at timestamptz NOT NULL,
        PRIMARY KEY (user_id, item_id),
        CONSTRAINT next_embeddings_item_fkey FOREIGN KEY (user_id, item_id) REFERENCES items(user_id, id)
            ON DELETE CASCADE
    )""",
]

# version 14: the household's display name and locale (a BCP 47 tag such as en-US), shown in the
# prompt and the UI (NULL: none recorded)
HOUSEHOLD_DETAILS = [
    "ALTER TABLE users ADD COLUMN IF NOT EXISTS household_name text",
    "ALTER TABLE users ADD COLUMN IF NOT EXISTS locale text",
]

# version 15: the full-text column reads folded text (``folded``): accents, compatibility forms and
# the separators of addresses and numbers match as on SQLite. A generated column cannot be altered:
# rebuilt (the table is rewritten once, under its lock). On a database that is not UTF8 the column
# stays as it was (normalize() would fail every write) and searches do not fold (``FOLD_TEXT``).
FOLDED_TEXT = [
    f"""DO $$ BEGIN
        IF current_setting('server_encoding') = 'UTF8' AND NOT ({FOLD_TEXT}) THEN
          ALTER TABLE items DROP COLUMN content_tsv;
          ALTER TABLE items ADD COLUMN content_tsv tsvector GENERATED ALWAYS AS ({FOLDED_TSV_EXPRESSION}) STORED;
          CREATE INDEX IF NOT EXISTS items_tsv ON items USING gin (content_tsv);
        END IF;
    END $$""",
]

MIGRATIONS: list[tuple[int, list[str]]] = [
    (1, [*CORE, EMBEDDINGS_TABLE, *EMBEDDING_INDEXES]),
    (2, SESSIONS),
    (3, RETRIEVAL),
    (4, HOUSEHOLD),
    (5, SCOPES),
    (6, KEYED_TTL),
    (7, SESSION_ORDER),
    (8, USER_TIMEZONE),
    (9, MEMORY_OFF),
    (10, PERSON_DEVICES),
    (11, STATEMENT_TIMES),
    (12, PER_USER_LEXICAL),
    (13, NEXT_EMBEDDINGS),
    (14, HOUSEHOLD_DETAILS),
    (15, FOLDED_TEXT),
]
LATEST_VERSION = MIGRATIONS[-1][0]

# Citus: each per-user table and its distribution column, in an order where every foreign key points at
# a table distributed before it; all co-located with users, so a user's rows of every table share a shard.
DISTRIBUTED: list[tuple[str, str]] = [
    ("users", "id"), ("themes", "user_id"), ("items", "user_id"), ("facts", "user_id"), ("fact_history", "user_id"),
    ("summaries", "user_id"), ("session_state", "user_id"), ("embeddings", "user_id"), ("next_embeddings", "user_id"),
    ("messages", "user_id"),
    ("llm_calls", "user_id"), ("persons", "user_id"), ("promotions", "user_id"),
]
# the tables every node reads whole (the version history)
REFERENCE = ["navi_schema_migrations"]

VECTOR_COLUMN = "ALTER TABLE embeddings ALTER COLUMN embedding TYPE vector USING embedding::vector"
