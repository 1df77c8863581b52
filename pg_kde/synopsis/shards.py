"""A Citus table distributed by hash, read shard by shard (0.14.0; docs/math.md §11, "Citus tables").

The refresh's scan is one pass of aggregates whose states combine (``_kde_cells``, ``_kde_sample``,
``_kde_cells2``). Through Citus's planner each shard computes its state and the coordinator combines them,
but the shards' states are then lost. :class:`ShardedReader` runs the same aggregates on each shard with
``run_command_on_shards``, combines the answers on the coordinator with the aggregates' own combine
functions (``_kde_cells_union`` and its siblings, in shardid order), and keeps each shard's answer with the
shard's identity read before its scan (rows changed, node, storage file, bytes: what staleness compares) in
``kde_parts``. The next refresh that runs the same command (the same plan: :class:`~.build.Pinned1D` for a
column, the stored cells for a pair) sends it only to the shards whose identity moved, and combines the
others' stored answers with theirs: the states are the same bytes a scan of those shards would give, so the
synopsis is the one a scan of every shard gives.

What a worker has not reported of a write (its counters, within about 10 s of the change) is not seen: a
shard written in that window may be reused as it was, and the synopsis then reads as stale once the worker
reports, as for any table (docs/math.md §11).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from .._errors import UserError
from .sql_reader import SqlTableReader

#: A shard's answer: each aggregate's value, '|' between them: a count, or a state in base64 (empty: no
#: state, a shard with no row).
_ANSWER = re.compile(r"^[A-Za-z0-9+/=\n]*(\|[A-Za-z0-9+/=\n]*)*$")


def is_hash_distributed(plpy, relid) -> bool:
    """Whether a relation is a Citus table distributed by hash (listed in pg_dist_partition, method 'h')."""
    if plpy.execute("SELECT pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL AS c")[0]["c"] is not True:
        return False
    return bool(plpy.execute(plpy.prepare(
        "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1::oid::regclass "
        "AND partmethod = 'h') AS d", ["oid"]), [relid])[0]["d"])


@dataclass
class ShardParts:
    """A Citus table's shards for one refresh: each shard's identity read before any scan (None: the shard
    did not answer), the answers kept by the last refresh (``kde_parts``: the md5 of their command, and per
    shard its identity then and its answer), and what this refresh read (``last``: the command's md5 and
    per shard (identity, answer)). ``reused`` and ``scanned`` count the shards' answers taken from the store
    and read, over every pass of the refresh."""

    plpy: Any
    schema: str
    relid: int
    cols: Tuple[str, ...]
    identities: Dict[int, Optional[str]]
    stored_command: Optional[str] = None
    stored: Dict[int, Tuple[Optional[str], str]] = field(default_factory=dict)
    stored_plan: Optional[str] = None
    plan_rows: int = 0
    plan_mod_count: int = 0
    last: Optional[Tuple[str, Dict[int, Tuple[Optional[str], str]]]] = None
    reused: int = 0
    scanned: int = 0

    @staticmethod
    def load(plpy, schema: str, relid, cols, relation: str) -> "ShardParts":
        """The shards' identities now, and the answers (and plan) the current role kept at its last refresh
        of these columns: a role reuses only what it kept itself (kde_parts.written_by), so answers another
        writer planted there are read again."""
        if plpy.execute(plpy.prepare(f"SELECT {schema}._kde_locked_here($1::oid::regclass) AS held", ["oid"]),
                        [relid])[0]["held"]:
            # (the workers' connections would wait for this transaction's own lock until it ends)
            raise UserError(f"pg_kde: the Citus table {relation} was truncated or altered earlier in "
                            "this transaction: its shards cannot be read before it commits",
                            sqlstate="55000", hint="Refresh it after COMMIT.")
        identities = {int(r["shardid"]): r["identity"] for r in plpy.execute(plpy.prepare(
            f"SELECT shardid, identity FROM {schema}._kde_shard_identities($1::oid::regclass)", ["oid"]), [relid])}
        parts = ShardParts(plpy, schema, int(relid), tuple(cols), identities)
        rows = plpy.execute(plpy.prepare(
            f"SELECT plan, plan_rows, plan_mod_count, command, shards, identities, answers FROM {schema}.kde_parts "
            "WHERE relid = $1::oid::regclass AND cols = $2 AND written_by = current_user", ["oid", "text[]"]),
            [relid, list(cols)])
        if rows:
            r = rows[0]
            parts.stored_command, parts.stored_plan = r["command"], r["plan"]
            parts.plan_rows, parts.plan_mod_count = int(r["plan_rows"]), int(r["plan_mod_count"])
            parts.stored = {int(s): (i, a) for s, i, a in zip(r["shards"], r["identities"], r["answers"])}
        return parts

    def plan(self, mod_count: int) -> Optional[str]:
        """The stored plan, while fewer than a quarter of the rows it was planned for have changed since
        (counted by the shards' counters; counters below theirs then, e.g. reset, plan anew)."""
        if self.stored_plan is None or self.plan_rows <= 0:
            return None
        moved = int(mod_count) - self.plan_mod_count
        return self.stored_plan if 0 <= moved and 4 * moved <= self.plan_rows else None

    def run(self, relation: str, select: dict) -> dict:
        """The aggregates of ``select`` (alias -> (aggregate, the aggregate that combines its states, or
        'sum' for a count)) over every shard: each shard's answer from the store where its identity and the
        command are those stored, else from the shard (one ``run_command_on_shards``: the others' commands
        read nothing), combined in shardid order."""
        plpy = self.plpy
        fields = []
        for expr, union in select.values():
            expr = expr.replace("%", "%%")  # (the command is a format string: %1$s is the shard)
            fields.append(f"({expr})::pg_catalog.text" if union == "sum"
                          else f"COALESCE(pg_catalog.encode({expr}, 'base64'), '')")
        command = f"SELECT pg_catalog.concat_ws('|', {', '.join(fields)}) FROM %1$s"
        key = hashlib.md5(command.encode()).hexdigest()
        kept = {s: self.stored[s] for s, identity in self.identities.items()
                if identity is not None and self.stored_command == key and s in self.stored
                and self.stored[s][0] == identity}
        answers: Dict[int, Tuple[Optional[str], str]] = dict(kept)
        wanted = sorted(s for s in self.identities if s not in kept)
        if wanted:
            only = "{" + ",".join(str(s) for s in wanted) + "}"
            # Which shard a command runs on, from its name (the table's name, '_', its shardid).
            where = ("" if len(kept) == 0 else
                     f" WHERE pg_catalog.substring(%1$L, '_([0-9]+)\"?$')::pg_catalog.int8 "
                     f"OPERATOR(pg_catalog.=) ANY ('{only}'::pg_catalog.int8[])")
            results = plpy.execute(plpy.prepare(
                "SELECT r.shardid, r.success, r.result FROM run_command_on_shards($1::oid::regclass, $2) r "
                "ORDER BY r.shardid", ["oid", "text"]), [self.relid, command + where])
            if sorted(int(r["shardid"]) for r in results) != sorted(self.identities):
                raise UserError(f"pg_kde: the shards of {relation} changed during the refresh; run it again",
                                sqlstate="40001")
            for r in results:
                shard = int(r["shardid"])
                if shard in kept:
                    continue
                if not r["success"] or r["result"] is None or not _ANSWER.match(r["result"]) \
                        or r["result"].count("|") != len(fields) - 1:
                    said = (r["result"] or "no answer")[:300]
                    raise UserError(f"pg_kde: shard {shard} of {relation} did not answer the refresh's scan: {said}",
                                    sqlstate="58000")
                answers[shard] = (self.identities.get(shard), r["result"])
        self.reused += len(kept)
        self.scanned += len(answers) - len(kept)
        self.last = (key, answers)
        order = sorted(answers)
        items = []
        for k, (alias, (_, union)) in enumerate(select.items(), start=1):
            part = f"pg_catalog.split_part(u.a, '|', {k})"
            items.append(f"pg_catalog.sum({part}::pg_catalog.int8) AS {alias}" if union == "sum" else
                         f"{union}(pg_catalog.decode(NULLIF({part}, ''), 'base64') ORDER BY u.i) AS {alias}")
        return plpy.execute(plpy.prepare(
            f"SELECT {', '.join(items)} FROM pg_catalog.unnest($1::text[]) WITH ORDINALITY u(a, i)", ["text[]"]),
            [[answers[s][1] for s in order]])[0]

    def save(self, plan: Optional[str], rows: int, mod_count: int) -> bool:
        """Keep this refresh's answers (and the plan they were read with, for ``rows`` non-NULL rows at
        ``mod_count``) in ``kde_parts``, after the synopsis' own rows; False where the role may not write
        it (the next refresh then reads every shard)."""
        plpy, schema = self.plpy, self.schema
        if self.last is None:
            return False
        ok = plpy.execute(f"SELECT pg_catalog.has_table_privilege('{schema}.kde_parts', 'INSERT, UPDATE') AS ok")[0]["ok"]
        if not ok:
            return False
        key, answers = self.last
        order = sorted(answers)
        plpy.execute(plpy.prepare(
            f"INSERT INTO {schema}.kde_parts (relid, cols, plan, plan_rows, plan_mod_count, command, shards, "
            "identities, answers) VALUES ($1::oid::regclass, $2, $3, $4, $5, $6, $7, $8, $9) "
            "ON CONFLICT (relid, cols) DO UPDATE SET plan = EXCLUDED.plan, plan_rows = EXCLUDED.plan_rows, "
            "plan_mod_count = EXCLUDED.plan_mod_count, command = EXCLUDED.command, shards = EXCLUDED.shards, "
            "identities = EXCLUDED.identities, answers = EXCLUDED.answers",
            ["oid", "text[]", "text", "int8", "int8", "text", "int8[]", "text[]", "text[]"]),
            [self.relid, list(self.cols), plan, int(rows), int(mod_count), key, order,
             [answers[s][0] for s in order], [answers[s][1] for s in order]])
        return True


@dataclass(frozen=True)
class ShardedReader(SqlTableReader):
    """A :class:`~.sql_reader.SqlTableReader` of a Citus table distributed by hash whose scans run on its
    shards, reusing the stored answers of those that did not change (:class:`ShardParts`)."""

    parts: Optional[ShardParts] = None

    def _aggregate(self, select: dict) -> dict:
        return self.parts.run(self.relation, select)
