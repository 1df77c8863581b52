"""The catalog rows of a synopsis: what the user asked for (:class:`Requested`, the header's ``requested``
column) apart from what a build made (:class:`Built1D`, payload table ``kde_synopsis``; :class:`Built2D`,
``kde_synopsis_2d``), the header row (``kde_catalog``) and payload row each build becomes, and its
summary. The columns are described in :mod:`pg_kde.synopsis` and in sql/src/10_catalog.sql."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Optional

from .cells import DEFAULT_BUDGET_1D, DEFAULT_BUDGET_2D
from .packing import pack_atoms, unpack_atoms

#: Parameter types of the catalog columns (kde_catalog, kde_synopsis and kde_synopsis_2d).
CATALOG_TYPES = {
    "relid": "oid", "cols": "text[]", "method": "text", "bandwidth": "float8[]", "sample_size": "int4",
    "n_rows": "int8", "n_null": "int8", "atom_values": "float8[]", "atom_cum_count": "float8[]",
    "atom_cum_sum": "float8[]", "kde_rows": "int8", "grid": "float8[]", "step": "float8",
    "cell_cum_count": "float8[]", "cell_cum_sum": "float8[]", "density": "float4[]", "shape_var": "float8",
    "period": "float8", "profile": "float4[]", "sum_slack": "float8", "sum_quantum": "float8",
    "build_seconds": "float8", "backend": "text", "mod_count": "int8", "requested": "jsonb",
    "grid1": "float8[]", "grid2": "float8[]", "lattice1": "float8[]", "lattice2": "float8[]", "sat_count": "float8[]",
    "sat_sum": "float8[]", "kde_sat": "float8[]", "attnums": "int2[]", "coltypes": "text[]", "built_relid": "oid",
    "storage_id": "text", "pages": "int8", "kind": "text", "atom_pack": "bytea", "heavy_whole": "bool",
    "doubt_weight": "float8", "doubt_weights": "float4[]", "coarse": "bool",
}

#: Columns of the header table, kde_catalog, in the order written; the rest of a row is its kind's payload
#: (which also carries relid and cols, its key and its link to the header).
HEADER_COLUMNS = ("relid", "cols", "kind", "attnums", "coltypes", "built_relid", "requested", "method", "backend",
                  "bandwidth", "sample_size", "n_rows", "n_null", "build_seconds", "mod_count", "storage_id", "pages")


def split_row(row: dict) -> tuple:
    """(header, payload): a built row's kde_catalog columns, and its payload table's columns."""
    header = {c: row[c] for c in HEADER_COLUMNS}
    payload = {c: v for c, v in row.items() if c not in HEADER_COLUMNS or c in ("relid", "cols")}
    return header, payload
# integer_valued and grid_size are scalars in 1-D and arrays in 2-D: typed by each row type.


@dataclass(frozen=True)
class Requested:
    """kde_refresh's arguments as the user gave them (the header's ``requested``: kde_refresh_stale repeats
    them; what was built, e.g. the grid's size, is kept in the payload). ``grid_size`` and ``budget`` are
    None when not given: the budget's default then sizes the grid."""

    method: str
    sample_size: int
    grid_size: Optional[int]
    backend: str
    budget: Optional[int] = None

    @property
    def budget_1d(self) -> int:
        return self.budget if self.budget is not None else DEFAULT_BUDGET_1D

    @property
    def budget_2d(self) -> int:
        return self.budget if self.budget is not None else DEFAULT_BUDGET_2D

    def json(self) -> str:
        """The ``requested`` jsonb (arguments not given are left out)."""
        given = {"method": self.method, "sample_size": self.sample_size, "grid_size": self.grid_size,
                 "backend": self.backend, "budget": self.budget}
        return json.dumps({k: v for k, v in given.items() if v is not None})


@dataclass
class Built1D:
    """A 1-D synopsis as built, in the column's units: the build facts and the payload arrays (lists, as
    stored). ``grid_size`` is the built grid's point count (0 with no cells); ``step`` the value lattice's
    step (0: continuous); ``scale`` the plug-in scale the selector used (None when no plug-in selector
    ran); ``budget`` the bytes it was built within; ``period`` > 0 when the rows inside a cut cell follow
    the periodic ``profile`` instead of the KDE's shape (a time column, :func:`.cells.make_profile`)."""

    TABLE = "kde_synopsis"
    KIND = "1d"

    method: str
    bandwidth: float
    sample_size: int
    backend: str
    scale: Optional[str]
    n_rows: int
    n_null: int
    step: float
    atom_values: list
    atom_cum_count: list
    atom_cum_sum: list
    heavy_rows: int
    kde_rows: int
    grid: list
    grid_size: int
    cell_cum_count: list
    cell_cum_sum: list
    density: list
    shape_var: float
    budget: int
    seconds: float
    period: float = 0.0
    profile: list = field(default_factory=list)
    #: How far each stored prefix sum of cell_cum_sum may lie from the sum of its rows' values rounded to
    #: ``sum_quantum``, the quantum the scan summed them in (0: each value a whole number of it, a lattice); None:
    #: not known, a synopsis stored before 0.13.0 (docs/math.md §7).
    sum_slack: Optional[float] = None
    sum_quantum: Optional[float] = None
    #: Whether each heavy value holds every row of its value, none of them in a cell (a build's; a merge's
    #: where every part's are and no part has the value in a cell): the queries then take the heavy values'
    #: slots out of a cut cell's shape (docs/math.md §7). None: not known, a synopsis stored before 0.17.0.
    heavy_whole: Optional[bool] = None
    #: The weight of the shape's doubt in a cut cell's interval, calibrated by the build on exact counts
    #: between the cuts of its scan (:mod:`.calibration`; in a profiled cell, 0.25.0, the weight of its own
    #: spread); None: not calibrated (a continuous column, no cells, a synopsis stored before 0.20.0 and a
    #: time column's whose build tries a periodic profile before 0.25.0), weighed
    #: :data:`pg_kde.synopsis.query.SHAPE_DOUBT`.
    doubt_weight: Optional[float] = None
    #: The weights of groups of neighbouring cells (cell c of m in group c · len div m), calibrated likewise,
    #: where they differ from one synopsis to the next part of the column (:func:`.calibration.group_weights`);
    #: None: every cell weighs ``doubt_weight`` (a synopsis stored before 0.21.0, a merge).
    doubt_weights: Optional[tuple] = None
    #: Whether the column may hold values whose float8 also stands for other values of its type (a bigint from
    #: 2^53, a numeric of more than 15 significant digits, a timestamp from 2^33 epoch seconds): rows on a
    #: bound's float8 then count on both sides of it in the hard bounds (docs/math.md §7). None: not known (a
    #: synopsis stored before 0.30.0, a merge with such a part), read as True.
    coarse: Optional[bool] = None
    #: The plan of the build's last scan (:class:`.build.Pinned1D`; None for a merge or a stored synopsis):
    #: a Citus table's next refresh scans its shards with it (:mod:`.shards`). Not stored with the synopsis.
    pinned: Optional[object] = field(default=None, compare=False, repr=False)

    def payload(self) -> dict:
        """The payload columns the query maths read (:func:`pg_kde.synopsis.query.range_1d`). Heavy values on
        the column's lattice are stored packed (:mod:`.packing`) when the pack gives back these very arrays;
        the three arrays are then empty."""
        atoms = {"atom_values": self.atom_values, "atom_cum_count": self.atom_cum_count,
                 "atom_cum_sum": self.atom_cum_sum, "atom_pack": b""}
        pack = pack_atoms(self.atom_values, self.atom_cum_count, self.step)
        if pack is not None and unpack_atoms(pack, self.step) == tuple(
                [float(v) for v in a] for a in (self.atom_values, self.atom_cum_count, self.atom_cum_sum)):
            atoms = {"atom_values": [], "atom_cum_count": [], "atom_cum_sum": [], "atom_pack": pack}
        return {"step": self.step, **atoms, "kde_rows": self.kde_rows, "grid": self.grid,
                "cell_cum_count": self.cell_cum_count, "cell_cum_sum": self.cell_cum_sum, "density": self.density,
                "shape_var": self.shape_var, "period": self.period, "profile": self.profile,
                "sum_slack": self.sum_slack, "sum_quantum": self.sum_quantum, "heavy_whole": self.heavy_whole,
                "doubt_weight": self.doubt_weight,
                "doubt_weights": None if self.doubt_weights is None else list(self.doubt_weights),
                "coarse": self.coarse}

    def catalog_row(self, relid, cols, identity: dict, requested: Requested) -> dict:
        """The row of this synopsis, header and payload columns together (column -> value); split it with
        :func:`split_row`. ``requested`` holds the request as given."""
        return {
            "relid": relid, "cols": cols, "method": self.method, "bandwidth": [self.bandwidth],
            "sample_size": self.sample_size, "n_rows": self.n_rows, "n_null": self.n_null,
            **self.payload(), "grid_size": self.grid_size,
            "build_seconds": self.seconds, "backend": self.backend, **identity,
            "requested": requested.json(), "kind": self.KIND,
        }

    @staticmethod
    def catalog_types() -> dict:
        """Column -> SQL type of its parameter, for the upsert."""
        return {**CATALOG_TYPES, "grid_size": "int4"}

    def summary(self, relation: str, column: str) -> dict:
        """kde_refresh's summary of a 1-D synopsis."""
        return {"relation": relation, "column": column, "rows": self.n_rows, "nulls": self.n_null,
                "heavy_values": len(self.atom_values), "heavy_rows": self.heavy_rows, "kde_rows": self.kde_rows,
                "step": self.step, "method": self.method, "bandwidth": self.bandwidth,
                "sample_size": self.sample_size, "backend": self.backend,
                **({"scale": self.scale} if self.scale else {}),
                "grid_size": self.grid_size, **({"period": self.period} if self.period else {}),
                **({"doubt_weight": self.doubt_weight} if self.doubt_weight is not None else {}),
                **({"doubt_weights": [round(w, 4) for w in self.doubt_weights]}
                   if self.doubt_weights is not None else {}),
                "budget": self.budget, "seconds": round(self.seconds, 4)}


@dataclass
class Built2D:
    """A 2-D synopsis as built, in the columns' units: ``bandwidth`` is H (row-major, grid-index units),
    ``grid_size`` the two grids' point counts, the summed-area tables row-major (grid_size[0] x
    grid_size[1]; ``sat_sum`` the two columns' tables one after the other)."""

    TABLE = "kde_synopsis_2d"
    KIND = "2d"

    method: str
    bandwidth: list
    sample_size: int
    backend: str
    n_rows: int
    n_null: int
    integer_valued: list
    grid1: list
    grid2: list
    lattice1: list
    lattice2: list
    grid_size: list
    sat_count: list
    sat_sum: list
    kde_sat: list
    seconds: float
    #: The pair's exact frequency table (:func:`.packing.pack_pairs`), where it fits the budget: the grid is
    #: then one cell over the pair's range, and queries read the table (docs/math.md §8).
    pair_pack: bytes = b""
    #: The build's last scan (:class:`.build.Pinned2D`; None for a merge, a stored synopsis or an exact
    #: frequency table): a Citus table's next refresh scans its shards with it (:mod:`.shards`). Not stored
    #: with the synopsis.
    pinned: Optional[object] = field(default=None, compare=False, repr=False)

    def catalog_row(self, relid, cols, identity: dict, requested: Requested) -> dict:
        """The row of this synopsis, header and payload columns together (see :meth:`Built1D.catalog_row`)."""
        return {
            "relid": relid, "cols": cols, "method": self.method, "bandwidth": self.bandwidth,
            "sample_size": self.sample_size, "n_rows": self.n_rows, "n_null": self.n_null,
            "integer_valued": self.integer_valued, "grid1": self.grid1, "grid2": self.grid2,
            "lattice1": self.lattice1, "lattice2": self.lattice2, "grid_size": self.grid_size,
            "sat_count": self.sat_count, "sat_sum": self.sat_sum, "kde_sat": self.kde_sat,
            "pair_pack": bytes(self.pair_pack), "build_seconds": self.seconds, "backend": self.backend,
            **identity, "requested": requested.json(), "kind": self.KIND,
        }

    @staticmethod
    def catalog_types() -> dict:
        """Column -> SQL type of its parameter, for the upsert."""
        return {**CATALOG_TYPES, "integer_valued": "bool[]", "grid_size": "int4[]", "pair_pack": "bytea"}

    def summary(self, relation: str, columns) -> dict:
        """kde_refresh's summary of a 2-D synopsis."""
        return {"relation": relation, "columns": list(columns), "rows": self.n_rows, "nulls": self.n_null,
                "method": self.method, "bandwidth": self.bandwidth, "sample_size": self.sample_size,
                "backend": self.backend, "grid_size": self.grid_size, "seconds": round(self.seconds, 4)}


def format1(row: dict) -> dict:
    """A format-2 1-D catalog row (header and payload columns, as read from kde_catalog JOIN kde_synopsis)
    with the payload columns 0.1.0 to 0.3.0 stored added: ``integer_valued`` (a lattice step of 1), no value
    ``lattice``, each cell's ``cell_cum_offset`` (sums of (x − g₀)/w, from its exact sum), the KDE's
    ``kde_mass`` at the grid points (density · kde_rows / range · h √(2π): a sum of kernels exp(−u²/2)), no
    ``cell_discrete``. What the 0.3.0 → 0.4.0 update reads back: the update tests and the load benchmark
    give an old install the same synopsis this way (an old refresh needs its own package)."""
    import numpy as np

    grid = np.asarray(row["grid"], dtype=np.float64)
    out = dict(row, integer_valued=row["step"] == 1, lattice=[], cell_discrete=False, cell_cum_offset=[], kde_mass=[])
    if len(grid):
        counts, sums = np.diff(row["cell_cum_count"]), np.diff(row["cell_cum_sum"])
        offsets = (sums - counts * grid[:-1]) / np.diff(grid)
        out["cell_cum_offset"] = np.concatenate([[0.0], np.cumsum(offsets)]).tolist()
        out["kde_mass"] = (np.asarray(row["density"], dtype=np.float64) * row["kde_rows"]
                           / (2 * (grid[-1] / 2 - grid[0] / 2)) * row["bandwidth"][0] * np.sqrt(2 * np.pi)).tolist()
    return out
