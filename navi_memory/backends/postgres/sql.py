"""SQL for the PostgreSQL backend, composed with ``psycopg.sql``: pure functions, no I/O.

Values always travel as parameters; only identifiers and a few trusted constants (the model name
and vector size, which a partial HNSW index must see as literals) are composed into the text.
"""

from __future__ import annotations

import hashlib
from typing import Any, Sequence

from psycopg import sql
from psycopg.types.json import Jsonb

from ...retrieval.query import like_pattern
from ...core.contract import embed_text_sql
from ...core.keyed import like_prefix
from ..base import Beside, Filters
from ..shared import dialect as shared
from ..shared.dialect import Dialect, Q as Q  # Q re-exported: the statements tests run through a runner
from ..shared.items import RANK_COLUMNS, where as shared_where
from .metadata import condition_sql


def set_local(name: str, value: int | str) -> sql.Composed:
    """``SET LOCAL name = value`` (a trusted setting name; an integer or a keyword value)."""
    return sql.SQL("SET LOCAL {} = {}").format(sql.SQL(name), sql.Literal(value if isinstance(value, str)
                                                                            else int(value)))


def adapt_vectors(conn: Any) -> None:
    """Send numpy vectors through pgvector's own binary dumper: unlike ``register_vector`` it needs
    no type lookup (so it also works on connections opened before the extension existed), and
    unlike its text form it costs no float formatting (about 0.2 ms per 384-d vector). Every
    statement casts the parameter (``%s::vector``), which gives the server its type."""
    import numpy as np
    from pgvector.psycopg.vector import VectorBinaryDumper

    conn.adapters.register_dumper(np.ndarray, VectorBinaryDumper)


# PostgreSQL's limit on one statement's parameters.
MAX_PARAMETERS = 65535
# Rows per multi-row INSERT. A single node parses and plans each statement: 100 rows ingested 3,744 items/s,
# 1,000 rows 3,355, executemany 3,624 (50k items). Citus splits one by shard, so more rows means fewer
# statements: 1,000 rows 1,713/s, 100 rows 1,227, executemany 845 (docs/benchmarks.md).
ROWS_PER_INSERT = 100
ROWS_PER_DISTRIBUTED_INSERT = 1000


def rows_at_once(text: Any, rows: Sequence[Sequence[Any]], per_statement: int = ROWS_PER_INSERT
                 ) -> list[tuple[Any, list[Any]]] | None:
    """An ``INSERT ... VALUES (...)`` meant for each of ``rows`` as few multi-row INSERTs (text and flat
    parameters), or None for any other statement (left to executemany). One statement per row costs
    Citus a routed round trip each; a multi-row INSERT it splits by shard and sends in parallel."""
    if not isinstance(text, str) or not text.startswith("INSERT ") or "RETURNING" in text or not rows:
        return None
    start = text.find(" VALUES (")
    if start < 0:
        return None
    start += len(" VALUES ")
    depth, end = 0, start
    for end in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[end], 0)
        if depth == 0:
            break
    group = text[start:end + 1]
    width = group.count("%s")
    if width == 0 or depth != 0 or any(len(r) != width for r in rows):
        return None
    per = max(1, min(per_statement, MAX_PARAMETERS // width))
    head, tail = text[:start], text[end + 1:]
    return [(head + ", ".join([group] * len(rows[i:i + per])) + tail, [v for r in rows[i:i + per] for v in r])
            for i in range(0, len(rows), per)]


ITEM_SELECT = sql.SQL(shared.ITEM_SELECT)
# How PostgreSQL binds and spells what the storage generators of ``backends/shared`` yield.
POSTGRES = Dialect(
    name="postgresql", placeholder="%s", time=lambda value: value,
    json=lambda value: None if value is None else Jsonb(value), ids=list, in_ids="{column} = ANY(%s)",
    # in UTC's timestamp arithmetic: immutable, which Citus needs of what an UPDATE computes from a column
    plus_minutes="(({time} AT TIME ZONE 'UTC') + {minutes} * interval '1 minute') AT TIME ZONE 'UTC'",
    embed_text=embed_text_sql("chr(10)"),
    for_update=" FOR UPDATE", key_lock="SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
    null_safe_eq="{column} IS NOT DISTINCT FROM %s", like_any_case="{column} ILIKE %s", greatest="greatest",
    item_key="i.user_id, i.id", item_row_key="user_id, item_id", by_id="", metadata=condition_sql,
    first_word="split_part({text}, ' ', 1)", json_list="jsonb_array_elements_text({column}) AS a(value)",
    under_namespace=lambda prefix: ("(i.namespace = %s OR i.namespace LIKE %s)", [prefix, like_prefix(prefix)]))
EMBED_TEXT = sql.SQL(POSTGRES.embed_text)  # the text an item is embedded from (contract)
HNSW_MAX_DIMENSIONS = 2000


def where(f: Filters) -> tuple[sql.Composable, list[Any]]:
    """The WHERE conditions on items ``i`` for a filter set (``shared.items.where``)."""
    text, params = shared_where(POSTGRES, f)
    return sql.SQL(text), params  # composed of constants, values as parameters


def vector_index_text(model: str, dimensions: int) -> str:
    digest = hashlib.sha1(f"{model}\x00{dimensions}".encode()).hexdigest()[:12]
    return f"embeddings_hnsw_{digest}"


def vector_index_name(model: str, dimensions: int) -> sql.Identifier:
    return sql.Identifier(vector_index_text(model, dimensions))


def create_vector_index(model: str, dimensions: int, m: int = 16, ef_construction: int = 64) -> sql.Composed:
    """A partial HNSW index for one model: vectors of other models/sizes never enter it."""
    return sql.SQL(
        "CREATE INDEX IF NOT EXISTS {name} ON embeddings USING hnsw ((embedding::vector({dims})) vector_cosine_ops)"
        " WITH (m = {m}, ef_construction = {efc}) WHERE model = {model} AND dimensions = {dims}"
    ).format(name=vector_index_name(model, dimensions), dims=sql.Literal(dimensions), m=sql.Literal(m),
             efc=sql.Literal(ef_construction), model=sql.Literal(model))


def create_ivfflat_index(model: str, dimensions: int, lists: int) -> sql.Composed:
    """The same partial index as IVFFlat, for pgvector before 0.5 (no HNSW). Its centroids come
    from the rows present when it is built, so it is built once a model has vectors."""
    return sql.SQL(
        "CREATE INDEX IF NOT EXISTS {name} ON embeddings USING ivfflat ((embedding::vector({dims})) vector_cosine_ops)"
        " WITH (lists = {lists}) WHERE model = {model} AND dimensions = {dims}"
    ).format(name=vector_index_name(model, dimensions), dims=sql.Literal(dimensions), lists=sql.Literal(lists),
             model=sql.Literal(model))


def ivfflat_lists(rows: int) -> int:
    """pgvector's rule of thumb: rows / 1000 up to 1M rows, sqrt(rows) above; at least 1."""
    return max(1, rows // 1000 if rows <= 1_000_000 else int(rows ** 0.5))


# What re-ranking reads of a row (``rank_rows``): a few columns, not whole rows.


def rank_columns(alias: str) -> sql.Composed:
    """``RANK_COLUMNS`` of the row named ``alias``."""
    return sql.SQL(", ").join(sql.Identifier(alias, c) for c in RANK_COLUMNS)


def owner_and_session(alias: str) -> sql.Composed:
    """The user and conversation session of the row named ``alias``, as ``owner`` and ``session``
    (what ``session_neighbours`` joins a centre's neighbours on)."""
    return sql.SQL("{}, {} ->> 'session_id' AS session").format(
        sql.SQL("{} AS owner").format(sql.Identifier(alias, "user_id")), sql.Identifier(alias, "source_ref"))


RANK_SELECT = rank_columns("i")
# A wrapped candidate query's columns (``hits_beside``): those, the owner and the conversation session.
WIDE_SELECT = RANK_SELECT + sql.SQL(", ") + owner_and_session("i")


def semantic_candidates(f: Filters, model: str, dimensions: int, query: Any, k: int,
                        exact: bool = False, wide: bool = False,
                        index_depth: int | None = None) -> tuple[sql.Composed, list[Any]]:
    """Nearest rows by cosine; the model and size are literals so the partial HNSW index applies.
    ``exact``: the distance on the uncast column, which the HNSW index cannot serve, so the rows
    come from the (user_id, model, state) btree and are all compared. ``wide``: with the columns
    ``hits_beside`` reads (``WIDE_SELECT``) beside ``score``, instead of ``id`` alone.
    ``index_depth``: the HNSW plan fixed: the index's nearest ``index_depth`` vectors of the model
    (all users) in a subquery with a LIMIT, into which the planner cannot push the user's
    condition, so it cannot choose the user's btree instead, filtered afterwards. The same rows as
    the HNSW plan of the plain statement, whose scan also stops at ``hnsw.ef_search`` (=
    ``index_depth``), and one plan whatever the parameters, so a generic plan serves (``Pins``)."""
    cond, params = where(f)
    dims = sql.Literal(dimensions)
    user = sql.SQL("TRUE") if f.user_id is None else sql.SQL("e.user_id = %s")
    user_params = [] if f.user_id is None else [f.user_id]
    columns = WIDE_SELECT if wide else sql.SQL("e.item_id AS id")
    if index_depth is not None:
        return sql.SQL(
            "SELECT {columns}, 1 - e.distance AS score FROM (SELECT n.user_id, n.item_id, n.state,"
            " n.embedding::vector({dims}) <=> %s::vector({dims}) AS distance FROM embeddings n"
            " WHERE n.model = {model} AND n.dimensions = {dims} ORDER BY distance LIMIT {depth}) e"
            " JOIN items i ON i.user_id = e.user_id AND i.id = e.item_id"
            " WHERE {user} AND e.state = 'ready' AND {cond} ORDER BY e.distance LIMIT %s"
        ).format(columns=columns, dims=dims, model=sql.Literal(model), depth=sql.Literal(int(index_depth)),
                 user=user, cond=cond), [query, *user_params, *params, k]  # the vector sent once
    distance = sql.SQL("(e.embedding <=> %s::vector)" if exact else
                       "(e.embedding::vector({dims}) <=> %s::vector({dims}))").format(dims=dims)
    text = sql.SQL(
        "SELECT {columns}, 1 - {distance} AS score FROM embeddings e"
        " JOIN items i ON i.user_id = e.user_id AND i.id = e.item_id"
        " WHERE {user} AND e.model = {model} AND e.dimensions = {dims} AND e.state = 'ready' AND {cond}"
        " ORDER BY {distance} LIMIT %s"
    ).format(columns=columns, distance=distance, user=user, model=sql.Literal(model), dims=dims, cond=cond)
    return text, [query, *user_params, *params, query, k]


def user_shares(model: str, dimensions: int) -> tuple[sql.SQL, list[Any]]:
    """Whether the model's HNSW index exists (``indexed``), and the users holding the most
    vectors with their share of the embeddings table (``users``, ``shares``), from the planner's
    statistics (``most_common_vals`` of ``embeddings.user_id``; empty before the first ANALYZE)."""
    return sql.SQL(
        "WITH st AS (SELECT s.most_common_vals::text::text[] AS users, s.most_common_freqs AS shares"
        " FROM pg_stats s JOIN pg_class c ON c.relname = s.tablename JOIN pg_namespace n"
        " ON n.oid = c.relnamespace AND n.nspname = s.schemaname"
        " WHERE c.oid = 'embeddings'::regclass AND s.attname = 'user_id')"
        " SELECT to_regclass(%s) IS NOT NULL AS indexed, coalesce((SELECT users FROM st), '{}') AS users,"
        " coalesce((SELECT shares FROM st), '{}') AS shares"
    ), [vector_index_text(model, dimensions)]


def shard_user_shares(model: str, dimensions: int) -> tuple[sql.SQL, list[Any]]:
    """``user_shares`` on Citus: whether the model's index exists, and per shard of ``embeddings``
    its most common users with their share of that shard (the shard's own statistics; the
    coordinator's table is empty), as JSON text ``{"users": [...], "shares": [...]}`` (``{}``
    before the shard's first ANALYZE). A user's share of its shard is what the worker's planner and
    HNSW scan see."""
    per_shard = ("SELECT coalesce((SELECT json_build_object('users', s.most_common_vals::text::text[],"
                 " 'shares', s.most_common_freqs)::text FROM pg_stats s JOIN pg_class c ON c.relname = s.tablename"
                 " JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = s.schemaname"
                 " WHERE c.oid = '%%s'::regclass AND s.attname = 'user_id'), '{}')")
    return sql.SQL(
        "SELECT to_regclass(%s) IS NOT NULL AS indexed, coalesce(array_agg(result) FILTER (WHERE success),"
        " '{}') AS shards FROM run_command_on_shards('embeddings', %s)"
    ), [vector_index_text(model, dimensions), per_shard.replace("%%s", "%s")]


def neighbour_centres(f: Filters, ids: list[int]) -> tuple[sql.Composed, list[Any]]:
    """The items ``ids`` (of ``f.user_id``, when set) as the centres ``session_neighbours`` reads."""
    user = sql.SQL("TRUE") if f.user_id is None else sql.SQL("c.user_id = %s")
    return sql.SQL("(SELECT c.id, {} FROM unnest(%s::bigint[]) AS u(id) JOIN items c ON {} AND c.id = u.id) h").format(
        owner_and_session("c"), user), [ids, *([] if f.user_id is None else [f.user_id])]


def hit_centres(f: Filters) -> sql.Composable:
    """The rows of the ``hits`` CTE as the centres ``session_neighbours`` reads. Of one user, the CTE
    itself; of all users, each hit's row read again from ``items``: on Citus the CTE is a result
    gathered on the coordinator, and a neighbour lookup correlated with it (not with a distributed
    table on its user column) cannot be pushed down to the shards."""
    if f.user_id is not None:
        return sql.SQL("hits h")
    return sql.SQL("(SELECT c.id, {} FROM hits x JOIN items c ON c.user_id = x.owner AND c.id = x.id) h").format(
        owner_and_session("c"))


def session_neighbours(f: Filters, centres: sql.Composable, centre_params: list[Any],
                       columns: sql.Composable = sql.SQL("i.id")) -> tuple[sql.Composed, list[Any]]:
    """``centre`` and ``columns`` of the items ``i`` stored right before and after each centre in
    the same conversation session (by id, ``items_user_session``), of those passing the filters.
    ``centres``: a FROM item named ``h`` with the columns ``id``, ``owner`` (its user) and ``session``."""
    cond, params = where(f)
    user, user_params = same_user("s", f)
    # the lookups return the neighbours' rows themselves: joined to ``items`` again, a planner without
    # statistics joined all of the user's rows to each centre first and looked up neighbours for each
    adjacent = ("SELECT s.* FROM items s WHERE s.user_id = h.owner{} AND s.source_ref ->> 'session_id' = h.session"
                " AND s.id {} h.id ORDER BY s.id {} LIMIT 1")
    return sql.SQL(
        "SELECT h.id AS centre, {} FROM {} CROSS JOIN LATERAL (({}) UNION ALL ({})) AS i"
        " WHERE h.session IS NOT NULL AND {}"
    ).format(columns, centres, sql.SQL(adjacent.format(user, "<", "DESC")),
             sql.SQL(adjacent.format(user, ">", "ASC")), cond), [*centre_params, *user_params, *user_params, *params]


def same_user(alias: str, f: Filters) -> tuple[str, list[Any]]:
    """`` AND <alias>.user_id = %s`` when the filters name a user (else nothing): said of every table a
    per-user statement reads, not only implied by a join, so Citus routes the statement to the one
    shard of that user (it cannot infer the value through a join on a CTE's column)."""
    return ("", []) if f.user_id is None else (f" AND {alias}.user_id = %s", [f.user_id])


def hits_beside(hits: sql.Composable, hits_params: list[Any], f: Filters,
                beside: Beside) -> tuple[sql.Composed, list[Any]]:
    """A candidate query made ``wide`` (columns ``WIDE_SELECT`` and ``score``) wrapped to return in
    the same statement what search reads next: the re-ranking columns (``rank_rows``) of each hit,
    its session neighbours (``neighbours``) with their columns, and the hits' cosine to
    ``beside.query``. One row per hit, then one per neighbour that is no hit; ``score`` is NULL on
    a neighbour, ``adjacent`` and ``cosine`` NULL where not asked. The hits carry their own columns,
    so only the neighbours are looked up again (fewer joins to plan: it is the HNSW statement)."""
    params = list(hits_params)
    text: list[sql.Composable] = [sql.SQL("WITH hits AS MATERIALIZED ({})").format(hits)]
    adjacent: sql.Composable = sql.SQL("NULL::bigint[]")
    if beside.neighbours:
        nb, nb_params = session_neighbours(f, hit_centres(f), [], RANK_SELECT)
        text.append(sql.SQL(", nb AS ({})").format(nb))
        params += nb_params
        adjacent = sql.SQL("ARRAY(SELECT nb.id FROM nb WHERE nb.centre = h.id)")
    cosine: sql.Composable = sql.SQL("NULL::float8")
    join: sql.Composable = sql.SQL("")
    if beside.query is not None and beside.model is not None:
        dims = sql.Literal(int(beside.query.size))
        cosine = sql.SQL("1 - (e.embedding::vector({d}) <=> %s::vector({d}))").format(d=dims)
        user, user_params = same_user("e", f)
        join = sql.SQL(" LEFT JOIN embeddings e ON e.user_id = h.owner AND e.item_id = h.id AND e.model = %s"
                       " AND e.dimensions = {d} AND e.state = 'ready'{u}").format(d=dims, u=sql.SQL(user))
        params += [beside.query, beside.model, *user_params]
    text.append(sql.SQL(" SELECT {columns}, h.score, {adjacent} AS adjacent, {cosine} AS cosine FROM hits h{join}"
                        ).format(columns=rank_columns("h"), adjacent=adjacent, cosine=cosine, join=join))
    if beside.neighbours:
        text.append(sql.SQL(" UNION ALL SELECT DISTINCT ON (nb.id) {}, NULL, NULL, NULL FROM nb"
                            " WHERE nb.id NOT IN (SELECT id FROM hits)").format(rank_columns("nb")))
    return sql.Composed(text), params


def count_vectors(user_id: str, model: str, dimensions: int, cap: int) -> tuple[sql.Composable, list[Any]]:
    """How many ready vectors the user has for the model, counting no further than ``cap``."""
    return (sql.SQL("SELECT count(*) AS n FROM (SELECT 1 FROM embeddings WHERE user_id = %s AND model = %s"
                    " AND state = 'ready' AND dimensions = %s LIMIT %s) s"), [user_id, model, dimensions, cap])


# How many of the user's newest rows say how common each query word is (its weight: BM25's inverse
# document frequency): all of a user's rows up to this many, a bounded read for larger users.
IDF_SAMPLE = 2000
# ts_rank's normalisation of a row's score by its length: 1 divides by log2(1 + length), the closest
# to BM25's (chosen leave one conversation out on LoCoMo over 0, 1 and 2: docs/benchmarks.md)
RANK_NORMALIZATION = 1


def lexical_candidates(f: Filters, terms: list[str], k: int, match: list[str] | None = None,
                       match_all: bool = False, wide: bool = False,
                       sample: int | None = None) -> tuple[sql.Composed, list[Any]]:
    """Full-text candidates: rows containing any of ``match`` (all of them with ``match_all``;
    default: any of ``terms``), ranked as SQLite ranks them, by the user's own statistics: the sum
    over ``terms`` of the term's ts_rank (length-normalised) x its inverse document frequency among
    the user's newest ``sample`` rows (default ``IDF_SAMPLE``), so a word the user's rows rarely
    hold outweighs a common one (equal weights without a user, or for one term). The condition's
    tsquery is written inline so the planner folds it to a constant, reads its statistics and can use
    the GIN index; the ranking's are made once in a CTE. websearch_to_tsquery never raises on user
    text, and the terms are plain word tokens. ``wide``:
    with the columns ``hits_beside`` reads (``WIDE_SELECT``), not ``id`` alone. The terms come
    folded as the column reads its text where it does (``schema.fold_words``): folding them here
    would cost the planner a normalize() per use."""
    cond, params = where(f)
    sample = IDF_SAMPLE if sample is None else sample
    weighted = f.user_id is not None and len(terms) > 1 and sample > 0
    # each term's tsquery once per statement: under a generic plan (a statement psycopg prepared) one
    # written beside a column would be parsed again for every row it is compared with
    queries = ", ".join(f"plainto_tsquery('english', %s) AS q{n}" for n in range(len(terms)))
    ranks = [f"ts_rank(i.content_tsv, tq.q{n}, {int(RANK_NORMALIZATION)})" for n in range(len(terms))]
    ctes, sources = [f"tq AS MATERIALIZED (SELECT {queries})"], ["tq"]
    cte_params: list[Any] = list(terms)
    if weighted:
        ranks = [f"st.w{n} * {rank}" for n, rank in enumerate(ranks)]
        # BM25's idf from the sample's row count and the rows holding the term. MATERIALIZED: once per
        # statement, also where the planner (without statistics) would join it to each candidate again
        holding = "count(*) FILTER (WHERE s.content_tsv @@ tq.q{n})"
        idf = ", ".join(f"ln(1.0 + (count(*) - {holding.format(n=n)} + 0.5)::float8 / ({holding.format(n=n)} + 0.5))"
                        f" AS w{n}" for n in range(len(terms)))
        ctes.append(f"st AS MATERIALIZED (SELECT {idf} FROM (SELECT content_tsv FROM items WHERE user_id = %s"
                    " ORDER BY created_at DESC LIMIT %s) s, tq)")
        sources.append("st")
        cte_params += [f.user_id, sample]
    text = sql.SQL(
        "WITH " + ", ".join(ctes) + " SELECT {}, (" + " + ".join(ranks) + ") AS score FROM items i, "
        + ", ".join(sources) + " WHERE i.content_tsv @@ websearch_to_tsquery('english', %s) AND {}"
        " ORDER BY score DESC, i.id LIMIT %s"
    ).format(WIDE_SELECT if wide else sql.SQL("i.id"), cond)
    selecting = match or terms
    return text, [*cte_params, (" " if match_all else " or ").join(selecting), *params, k]


def term_row_estimates(user_id: str, terms: list[str]) -> tuple[sql.Composable, list[Any]]:
    """For each term, about how many of the user's items contain it (``rows``) and how many items
    the user has (``user_rows``), from the planner's statistics (ANALYZE): table rows x the user's
    share (items.user_id's most common values) x the term's share (content_tsv's most common
    lexemes). 0 where a statistic is missing: a user or a word too rare to be listed, or a table
    never analysed."""
    return sql.SQL(
        "WITH rel AS (SELECT c.reltuples, n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE c.oid = 'items'::regclass),"
        " st AS (SELECT s.attname, s.most_common_vals::text::text[] AS vals, s.most_common_freqs AS freqs,"
        " s.most_common_elems::text::text[] AS elems, s.most_common_elem_freqs AS elem_freqs"
        " FROM pg_stats s, rel WHERE s.schemaname = rel.nspname AND s.tablename = 'items'"
        " AND s.attname IN ('user_id', 'content_tsv'))"
        " , mine AS (SELECT greatest(rel.reltuples, 0)"
        " * coalesce((SELECT freqs[array_position(vals, %s)] FROM st WHERE attname = 'user_id'), 0) AS rows FROM rel)"
        " SELECT t.term, mine.rows AS user_rows, mine.rows"
        " * coalesce((SELECT max(elem_freqs[array_position(elems, v.lexeme)]) FROM st,"
        " unnest(to_tsvector('english', t.term)) v WHERE attname = 'content_tsv'), 0) AS rows"
        " FROM unnest(%s::text[]) AS t(term), mine"
    ), [user_id, terms]


def substring_hits(terms: list[str]) -> tuple[sql.Composed, list[Any]]:
    """Number of terms found as substrings of title or content (ILIKE; pg_trgm indexes it)."""
    one = sql.SQL("(i.content ILIKE %s OR coalesce(i.title, '') ILIKE %s)::int")
    params = [p for t in terms for p in (like_pattern(t), like_pattern(t))]
    return sql.SQL(" + ").join([one] * len(terms)), params
