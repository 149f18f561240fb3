"""Citus: on a coordinator, ``migrate`` distributes the schema by user.

A database is on a Citus coordinator when the ``citus`` extension is installed and
``citus_is_coordinator()`` says so (a worker holds shards and is never migrated directly); tables
are distributed once a node can hold shards (``distributes``). There,
after the numbered steps, every per-user table (``schema.DISTRIBUTED``) becomes a hash-distributed
table on its user column, co-located with ``users``, so one user's rows of every table live in one
shard and a statement carrying ``user_id = $1`` runs on one worker; the version history
(``schema.REFERENCE``) becomes a reference table, copied to every node.

Tables are created as ordinary tables and distributed afterwards, in foreign-key order (a table's
keys point at tables distributed before it). ``pg_dist_partition`` tells which are done, so a second
migrate distributes nothing, and a later version's new table is distributed by the migrate that
creates it; the later versions' ``ALTER TABLE`` and ``CREATE INDEX`` on distributed tables are
propagated to every shard by Citus itself. Rows already in a table (a single-node database moved
onto a coordinator) are copied into its shards, and the coordinator's local copy is then emptied.
"""

from __future__ import annotations

import logging

from ...sansio import Op
from . import schema
from ..shared.dialect import Q, Row

log = logging.getLogger(__name__)

TABLES = [*(table for table, _ in schema.DISTRIBUTED), *schema.REFERENCE]


def distributes(extensions: set[str]) -> Op[bool]:
    """Whether migrate distributes the tables here (``extensions``: those installed): on a Citus
    coordinator with a node to hold shards. A coordinator alone (no worker yet, and itself not set
    to hold shards) keeps ordinary tables, which the first migrate after a node joins distributes."""
    if "citus" not in extensions:
        return False
    rows: list[Row] = yield Q("SELECT citus_is_coordinator() AS coordinator, EXISTS (SELECT 1 FROM pg_dist_node"
                              " WHERE shouldhaveshards AND isactive AND noderole = 'primary') AS nodes")
    if rows[0]["coordinator"] and not rows[0]["nodes"]:
        log.warning("Citus coordinator without a node to hold shards: the tables stay local until one is added"
                    " (citus_add_node) and the store migrates again")
    return bool(rows[0]["coordinator"] and rows[0]["nodes"])


def undistributed() -> Op[set[str]]:
    """The schema's tables that exist and are neither distributed nor reference tables yet."""
    rows: list[Row] = yield Q(
        "SELECT t.name FROM unnest(%s::text[]) AS t(name) WHERE to_regclass(t.name) IS NOT NULL"
        " AND NOT EXISTS (SELECT 1 FROM pg_dist_partition p WHERE p.logicalrelid = to_regclass(t.name))",
        [TABLES])
    return {r["name"] for r in rows}


def distribute(tables: set[str]) -> Op[None]:
    """Distribute ``tables`` (some of ``TABLES``), each co-located with users; the version history as a
    reference table. Then empty the coordinator's local copies of rows the shards now hold."""
    for table, column in schema.DISTRIBUTED:
        if table in tables:
            yield Q("SELECT create_distributed_table(%s::regclass, %s, colocate_with => %s)",
                    [table, column, "default" if table == "users" else "users"])
    for table in schema.REFERENCE:
        if table in tables:
            yield Q("SELECT create_reference_table(%s::regclass)", [table])
    for table in TABLES:
        if table in tables:
            yield Q("SELECT truncate_local_data_after_distributing_table(%s::regclass)", [table])
