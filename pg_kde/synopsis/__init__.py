"""Synopses, the format's one owner: how they are built and what the catalog rows hold.

- :mod:`~pg_kde.synopsis.maths`: the numerics (heavy values, grids, the KDE on a grid, summed areas);
- :mod:`~pg_kde.synopsis.reader`: :class:`TableReader`, the reads a build makes, in data terms, and
  :class:`ArrayTableReader`, which answers them from NumPy arrays (builds run without PostgreSQL);
  :mod:`~pg_kde.synopsis.sql_reader`: :class:`~pg_kde.synopsis.sql_reader.SqlTableReader`, the same reads
  as the refresh's SQL queries through ``plpy``;
- :mod:`~pg_kde.synopsis.build`: :func:`build_1d` and :func:`build_2d`, pure functions of a reader;
- :mod:`~pg_kde.synopsis.catalog`: :class:`Requested` (what kde_refresh was asked) apart from
  :class:`Built1D` / :class:`Built2D` (what was built), and the catalog row and summary of each.

:mod:`pg_kde.sql_entry` is the PL/Python face: argument and privilege checks, locking, the upsert.

The format (the catalog tables are in sql/src/10_catalog.sql, with these comments at their top)
-----------------------------------------------------------------------------------------------

One header row per synopsis in ``kde_catalog`` (relation, columns by identity, ``kind`` '1d' or '2d',
``requested``, build and staleness facts: the columns listed as identity and build facts below), and one
payload row in the kind's table, ``kde_synopsis`` or ``kde_synopsis_2d`` (the rest), keyed by (relid, cols).

``kde_synopsis``, one row per (table, column), format 2 (0.4.0), a synopsis of two parts that add up within
a byte budget (``requested.budget``, default 8192: header and payload rows as ``pg_column_size`` counts them):

- identity and build facts: ``relid``, ``cols`` (the column's name, kept in step with renames),
  ``attnums``, ``coltypes``, ``built_relid`` (the relation's oid at the build); ``mod_count``,
  ``storage_id``, ``pages`` (the table's state at the start of the build, for staleness); ``method``
  (the selector run: a bandwidth method, ``grid`` when too few rows were left to choose one, ``exact``
  when every row is a heavy value), ``bandwidth`` ([h], data units, three significant digits), ``sample_size``
  (the rows h was chosen on), ``backend``, ``build_seconds``, ``built_at``; ``requested`` (kde_refresh's
  arguments as jsonb, as given, which kde_refresh_stale repeats; what was built is apart); ``n_rows``
  (non-NULL rows), ``n_null``; time columns are read as epoch seconds;
- heavy values ("atoms") of a continuous column (values holding a cell's share of rows or more, at most a
  quarter of the budget), or every value of a column with few (when they fit in the budget), kept exactly:
  ``atom_values`` sorted, ``atom_cum_count`` and ``atom_cum_sum`` their cumulative counts and sums; or,
  where they lie on the column's lattice, ``atom_pack`` (0.9.0; since 0.31.0 lattice steps and counts in adaptive
  Rice codes, about a byte a value, :mod:`.packing`), the three arrays then empty (:func:`.query.heavy_values` reads either);
- cells, the other ``kde_rows`` rows, on ``grid_size`` boundaries ``grid`` (a quarter at equal widths over
  the range, the rest at the sample's quantiles on a tail-weighted scale; on the column's value lattice of
  ``step`` > 0 every boundary is a half-step and each heavy value gets a cell of its own): exact cumulative
  row counts (``cell_cum_count``) and sums (``cell_cum_sum``) starting at 0; ``density``, the KDE's density
  at each boundary relative to the grid's mean density (float4); ``shape_var``, the variance of the cell
  shape's error the sample showed; ``doubt_weight`` (0.20.0), the weight of the shape's doubt in a range's
  interval that the build calibrated on exact counts between its scan's cuts (:mod:`.calibration`; in a cell
  that follows a periodic profile, 0.25.0, the weight of its own spread; NULL where it does not, weighed 1), and ``doubt_weights`` (0.21.0), a weight calibrated likewise for each group
  of neighbouring cells (cell c of m in group c · n div m), which a cut cell's doubt is weighed by where it is
  not NULL. With no cells the arrays are empty and grid_size is 0.

``kde_synopsis_2d``, one row per (table, pair of columns), over the rows with both non-NULL: ``grid1``,
``grid2`` each axis's grid points (at the data's quantiles), ``lattice1``/``lattice2`` a discretised
axis's distinct values (empty otherwise), ``grid_size`` the two point counts; ``sat_count`` and
``kde_sat`` summed-area tables at the grid points (row-major, grid_size[1] x grid_size[2]) of the cells'
exact row counts and of the KDE's cell masses; ``sat_sum`` the two columns' exact summed-area tables of
values, one after the other; ``bandwidth`` H (row-major) in grid-index units; ``integer_valued`` one
flag per column. Identity, staleness and build facts as in ``kde_synopsis``.

Where the query maths run
-------------------------

Queries read a row in SQL, PL/pgSQL and C, with no Python: a 1-D range's estimate, hard bounds and variance in
``_kde_range`` (extension/range.c: heavy values, the lattice's bounds, whole cells, and the cut cells' shares;
:mod:`pg_kde.synopsis.query` is its float64 reference, step for step), intervals in ``_kde_interval``, a
2-D box in ``_kde_box`` (exact inner block plus the KDE's strip, clipped to the outer block), in
sql/src/30_query_1d.sql and 40_query_2d.sql; the formulas are in docs/math.md §7 (1-D) and §8 (2-D).
"""

from .build import build_1d, build_2d, select_bandwidth
from .catalog import CATALOG_TYPES, Built1D, Built2D, Requested
from .cells import (
    DEFAULT_BUDGET_1D,
    DEFAULT_BUDGET_2D,
    KDE_SLICE_TERMS,
    MAX_BUDGET,
    MIN_BUDGET,
    binned_kde_at,
    cell_shape,
    depth_grid,
    lattice_grid,
    lattice_step,
)
from .maths import (
    ATOM_SHARE,
    FFT_SLICE_VALUES,
    LATTICE_VALUES,
    Atoms,
    atom_candidates,
    bilinear_weights,
    cap_bandwidth_matrix,
    cell_masses,
    cell_prefix,
    grid_positions,
    quantile_grid,
    scale_bandwidth,
    smooth_masses_2d,
    summed_area,
)
from .query import Range, range_1d
from .reader import ArrayTableReader, TableReader, TableStats

__all__ = [
    "ATOM_SHARE", "FFT_SLICE_VALUES", "LATTICE_VALUES", "Atoms", "atom_candidates", "bilinear_weights",
    "cap_bandwidth_matrix", "cell_masses", "cell_prefix", "grid_positions", "quantile_grid", "scale_bandwidth",
    "smooth_masses_2d", "summed_area",
    "DEFAULT_BUDGET_1D", "DEFAULT_BUDGET_2D", "KDE_SLICE_TERMS", "MAX_BUDGET", "MIN_BUDGET", "binned_kde_at",
    "cell_shape", "depth_grid", "lattice_grid", "lattice_step", "Range", "range_1d",
    "ArrayTableReader", "TableReader", "TableStats", "build_1d", "build_2d", "select_bandwidth",
    "CATALOG_TYPES", "Built1D", "Built2D", "Requested",
]
