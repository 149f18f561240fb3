"""SQLite's per-user lexical index: which words each user's rows hold, so a user's full-text ranking
reads that user's rows only (``retrieval.lexical``: BM25 with the user's statistics).

FTS5's ``bm25()`` reads the statistics of everything its index holds (how many rows hold a word,
the rows' average length), so on one shared index every user's rows move every user's order.
Here each row's words are stemmed (``stems``: the same porter stemmer as ``items_fts``) and indexed
in ``lex_fts`` as ``u<user pk>x<stem>``: one user's words are other terms than another user's, so
the index reads and counts a user's rows alone. ``lex_rows`` keeps each row's stems (an FTS5
delete needs the exact words indexed) and length; ``lex_users`` each user's row count and total
length. Triggers on ``items`` keep the three in step; they call ``navi_stems``, registered on each
of the backend's connections (``register``): a write to ``items`` through a connection without it
fails ("no such function"), it never leaves the index behind. Deletes need no function.
"""

from __future__ import annotations

import re
import sqlite3
import threading
import unicodedata
from typing import Iterable

import numpy as np

from ...retrieval.lexical import COLUMN_WEIGHTS, Occurrences

_WORD = re.compile(r"[^\W_]+")  # letters and digits: what FTS5's unicode61 keeps as a token
_CACHE_LIMIT = 200_000
_stems: dict[str, str] = {}
_local = threading.local()


def _stemmer() -> sqlite3.Connection:
    """This thread's in-memory FTS5 table: FTS5's porter stemmer (as ``items_fts`` stems) applied to
    words already split, lower-cased and folded ('ascii' keeps any non-ASCII letter inside a word)."""
    conn = getattr(_local, "conn", None)
    if conn is None:
        conn = sqlite3.connect(":memory:", isolation_level=None)
        conn.execute("CREATE VIRTUAL TABLE words USING fts5(w, content='', tokenize='porter ascii')")
        conn.execute("CREATE VIRTUAL TABLE stems USING fts5vocab(words, 'instance')")
        _local.conn = conn
    return conn


def _stem_new(words: list[str]) -> dict[str, str]:
    conn = _stemmer()
    conn.execute("BEGIN")
    try:  # rolled back: the table stays empty (cheaper than deleting)
        conn.execute("INSERT INTO words (rowid, w) VALUES (1, ?)", (" ".join(words),))
        found = {offset: term for term, offset in conn.execute("SELECT term, offset FROM stems")}
    finally:
        conn.execute("ROLLBACK")
    if len(_stems) + len(words) > _CACHE_LIMIT:
        _stems.clear()
    new = {word: found.get(n, word) for n, word in enumerate(words)}
    _stems.update(new)
    return new


def words(text: str | None) -> list[str]:
    """The words of ``text``, lower-cased, without diacritics (café = cafe), in order."""
    if not text:
        return []
    text = text.lower()
    if not text.isascii():
        text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return _WORD.findall(text)


def stem_all(found: list[str]) -> list[str]:
    """The stems of ``found`` (``words``), in order (read once from the shared cache: another thread
    may clear it meanwhile)."""
    known = {w: _stems.get(w) for w in found}
    missing = [w for w, stem in known.items() if stem is None]
    if missing:
        known.update(_stem_new(missing))
    return [known[w] or w for w in found]


def stems(text: str | None) -> str:
    """The stems of ``text``'s words, space-separated: what a row's column holds in ``lex_fts``."""
    return " ".join(stem_all(words(text)))


def query_stems(terms: Iterable[str]) -> dict[str, int]:
    """``{stem: how many of the query terms have it}``: each term counts once per stem it holds, as
    each quoted term of an FTS5 OR query counts once in ``bm25()``."""
    out: dict[str, int] = {}
    for term in terms:
        for stem in dict.fromkeys(stem_all(words(term))):
            out[stem] = out.get(stem, 0) + 1
    return out


def token(user_pk: int, stem: str) -> str:
    """A stem as ``lex_fts`` indexes it for one user."""
    return f"u{user_pk}x{stem}"


def register(conn: sqlite3.Connection) -> None:
    """The function the ``items`` triggers call to index a row's words (every connection that writes)."""
    conn.create_function("navi_stems", 1, stems, deterministic=True)


COLUMNS = ("title", "content", "context")
# A row's length rides in its lex_fts rowid (item id * 2^16 + length): the ranking reads it with each
# match instead of looking it up row by row. Lengths from 65,535 words count as 65,535.
LENGTH_BITS = 16
MAX_LENGTH = (1 << LENGTH_BITS) - 1
_DOC = f"r.item_id * {1 << LENGTH_BITS} + r.length"


# One query word's occurrences, one number each: the lex_fts rowid shifted left 2 bits, the column's
# index in the low bits. One string (group_concat) parsed by numpy: reading 10,000s of occurrences
# as Python rows cost ~3x more than the whole ranking does now (docs/benchmarks.md).
_OCCURRENCES = ("SELECT group_concat((doc << 2) | CASE col " + " ".join(f"WHEN '{c}' THEN {n}" for n, c in enumerate(COLUMNS))
                + " END) FROM lex_instances WHERE term = ?")
_COLUMN_WEIGHT = np.array([COLUMN_WEIGHTS[c] for c in COLUMNS])


def occurrences(conn: sqlite3.Connection, term: str) -> Occurrences:
    """Every occurrence of ``term`` (a ``token``) in ``lex_fts``."""
    listed = conn.execute(_OCCURRENCES, [term]).fetchone()[0]
    codes = np.fromstring(listed, dtype=np.int64, sep=",") if listed else np.zeros(0, dtype=np.int64)
    docs = codes >> 2
    return Occurrences(docs >> LENGTH_BITS, docs & MAX_LENGTH, _COLUMN_WEIGHT[codes & 3])


def _tokens(column: str) -> str:
    """SQL: a ``lex_rows`` column's stems as ``lex_fts`` tokens of its user (``token``)."""
    return f"CASE WHEN r.{column} = '' THEN '' ELSE 'u' || r.user_pk || 'x' || replace(r.{column}, ' ', ' u' || r.user_pk || 'x') END"


def _words_in(column: str) -> str:
    return f"(length({column}) - length(replace({column}, ' ', '')) + ({column} <> ''))"


_TOKENS = ", ".join(_tokens(c) for c in COLUMNS)
_INDEX = f"INSERT INTO lex_fts (rowid, title, content, context) SELECT {_DOC}, {_TOKENS} FROM lex_rows r WHERE {{}}"
_UNINDEX = (f"INSERT INTO lex_fts (lex_fts, rowid, title, content, context) SELECT 'delete', {_DOC}, {_TOKENS}"
            " FROM lex_rows r WHERE {}")
_COUNT = ("INSERT INTO lex_users (user_pk, rows, tokens) SELECT user_pk, count(*), coalesce(sum(length), 0)"
          " FROM lex_rows WHERE {} GROUP BY user_pk ON CONFLICT (user_pk) DO UPDATE"
          " SET rows = rows + excluded.rows, tokens = tokens + excluded.tokens")
_STEMMED = ("SELECT i.id, u.pk, " + ", ".join(f"CASE WHEN i.{c} IS NULL THEN '' ELSE navi_stems(i.{c}) END" for c in COLUMNS) +
            " FROM items i JOIN users u ON u.id = i.user_id WHERE {}")
_LENGTH = f"UPDATE lex_rows SET length = min({MAX_LENGTH}, " + " + ".join(_words_in(c) for c in COLUMNS) + ") WHERE {}"


def _add(row: str) -> list[str]:
    """Statements indexing the item(s) ``row`` (a condition on items ``i``) selects."""
    lex_row = row.replace("i.id", "item_id")
    return [f"INSERT INTO lex_rows (item_id, user_pk, title, content, context) {_STEMMED.format(row)}",
            _LENGTH.format(lex_row), _INDEX.format(lex_row.replace("item_id", "r.item_id")), _COUNT.format(lex_row)]


def _remove(item: str) -> list[str]:
    """Statements taking item ``item`` (an SQL expression of its id) out of the index."""
    return [_UNINDEX.format(f"r.item_id = {item}"),
            f"UPDATE lex_users SET rows = rows - 1, tokens = tokens - (SELECT length FROM lex_rows WHERE item_id = {item})"
            f" WHERE user_pk = (SELECT user_pk FROM lex_rows WHERE item_id = {item})",
            f"DELETE FROM lex_rows WHERE item_id = {item}"]


def _trigger(name: str, event: str, statements: list[str]) -> str:
    return f"CREATE TRIGGER {name} AFTER {event} ON items BEGIN " + "".join(f"{s}; " for s in statements) + "END"


# version 12: the per-user lexical index, built from the rows already stored
LEXICON = [
    """CREATE TABLE lex_rows (
        item_id INTEGER PRIMARY KEY,
        user_pk INTEGER NOT NULL,
        length INTEGER NOT NULL DEFAULT 0,
        title TEXT NOT NULL,
        content TEXT NOT NULL,
        context TEXT NOT NULL
    )""",
    """CREATE TABLE lex_users (
        user_pk INTEGER PRIMARY KEY,
        rows INTEGER NOT NULL,
        tokens INTEGER NOT NULL
    )""",
    # 'ascii': a token is one whole indexed word whatever its letters (they are split already)
    "CREATE VIRTUAL TABLE lex_fts USING fts5(title, content, context, content='', tokenize='ascii')",
    "CREATE VIRTUAL TABLE lex_terms USING fts5vocab(lex_fts, 'row')",
    "CREATE VIRTUAL TABLE lex_instances USING fts5vocab(lex_fts, 'instance')",
    *_add("1 = 1"),
    _trigger("lex_insert", "INSERT", _add("i.id = new.id")),
    _trigger("lex_delete", "DELETE", _remove("old.id")),
    _trigger("lex_update", "UPDATE OF user_id, title, content, context",
             [*_remove("old.id"), *_add("i.id = new.id")]),
    # a forgotten user's counts go with them (their rows' deletes have emptied them)
    "CREATE TRIGGER lex_user_delete AFTER DELETE ON users BEGIN DELETE FROM lex_users WHERE user_pk = old.pk; END",
]
