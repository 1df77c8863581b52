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

``kde_synopsis``, one row per (table, column), a synopsis of two parts that add up:

- identity and build facts: ``relid``, ``cols`` (the column's name, kept in step with renames),
  ``attnums``, ``coltypes``, ``built_relid`` (the relation's oid at the build); ``mod_count``,
  ``storage_id``, ``pages`` (the table's state at the start of the build, for staleness); ``method``
  (the selector run: a bandwidth method, ``grid`` when too few rows were left to choose one, ``exact``
  when every row is a heavy value), ``bandwidth`` ([h], data units), ``sample_size`` (the rows h was
  chosen on), ``backend``, ``build_seconds``, ``built_at``; ``requested`` (kde_refresh's arguments as
  jsonb, as given, which kde_refresh_stale repeats; what was built, e.g. ``grid_size``, is apart);
  ``n_rows`` (non-NULL rows), ``n_null``, ``integer_valued``;
- heavy values ("atoms"), values holding at least 0.1% of the rows (:data:`ATOM_SHARE`), kept exactly:
  ``atom_values`` sorted, ``atom_cum_count`` and ``atom_cum_sum`` their cumulative counts and sums over
  the whole table; a column with at most 1024 distinct values (:data:`EXACT_DISTINCT`) is all atoms;
- the smooth part, the other ``kde_rows`` rows, on ``grid_size`` points ``grid`` (equal-depth for
  continuous columns, one cell per value for integer ones; ``lattice``: a discretised column's distinct
  values, the grid then at midpoints between them): per cell, exact cumulative row counts
  (``cell_cum_count``), sums (``cell_cum_sum``) and sums of offsets within the cell
  (``cell_cum_offset``), each of length grid_size starting at 0; ``kde_mass``, the reflection KDE's
  density at each grid point, which says where rows sit inside the cells a query range cuts;
  ``cell_discrete``, whether rows inside a cell sit on few values (intervals are then the hard bounds).
  With no smooth part the arrays are empty and grid_size is 0.

``kde_synopsis_2d``, one row per (table, pair of columns), over the rows with both non-NULL: ``grid1``,
``grid2`` each axis's grid points (at the data's quantiles), ``lattice1``/``lattice2`` a discretised
axis's distinct values (empty otherwise), ``grid_size`` the two point counts; ``sat_count`` and
``kde_sat`` summed-area tables at the grid points (row-major, grid_size[1] x grid_size[2]) of the cells'
exact row counts and of the KDE's cell masses; ``sat_sum`` the two columns' exact summed-area tables of
values, one after the other; ``bandwidth`` H (row-major) in grid-index units; ``integer_valued`` one
flag per column. Identity, staleness and build facts as in ``kde_synopsis``.

Where the query maths run
-------------------------

Queries read a row in SQL and PL/pgSQL, with no Python: the smooth part of a 1-D range in ``_kde_smooth``
(cut cells' shares under the linear density with the cell's mean offset, the KDE's allowance), a 1-D
range's estimate, hard bounds and variance in ``_kde_range`` (atoms by ``_kde_atoms_upto``), intervals in
``_kde_interval``, a 2-D box in ``_kde_box`` (exact inner block plus the KDE's strip, clipped to the
outer block), in sql/src/30_query_1d.sql and 40_query_2d.sql; the formulas are in docs/math.md §7 (1-D) and §8 (2-D).
"""

from .build import build_1d, build_2d, select_bandwidth
from .catalog import CATALOG_TYPES, Built1D, Built2D, Requested
from .maths import (
    ATOM_SHARE,
    DISCRETE_POSITIONS,
    EXACT_DISTINCT,
    FFT_SLICE_VALUES,
    GRID_SLICE_TERMS,
    INTEGER_CELLS,
    LATTICE_VALUES,
    Atoms,
    atom_candidates,
    bilinear_weights,
    cap_bandwidth_matrix,
    cell_masses,
    cell_prefix,
    grid_density,
    grid_layout,
    grid_positions,
    is_discrete,
    point_weights,
    quantile_grid,
    scale_bandwidth,
    smooth_masses_2d,
    summed_area,
)
from .reader import ArrayTableReader, TableReader, TableStats

__all__ = [
    "ATOM_SHARE", "DISCRETE_POSITIONS", "EXACT_DISTINCT", "FFT_SLICE_VALUES", "GRID_SLICE_TERMS", "INTEGER_CELLS",
    "LATTICE_VALUES", "Atoms", "atom_candidates", "bilinear_weights", "cap_bandwidth_matrix", "cell_masses",
    "cell_prefix", "grid_density", "grid_layout", "grid_positions", "is_discrete", "point_weights", "quantile_grid",
    "scale_bandwidth", "smooth_masses_2d", "summed_area",
    "ArrayTableReader", "TableReader", "TableStats", "build_1d", "build_2d", "select_bandwidth",
    "CATALOG_TYPES", "Built1D", "Built2D", "Requested",
]
