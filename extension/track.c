/*
 * pg_kde's incremental maintenance: _kde_track_delta applies the values one statement wrote (added) and
 * deleted (removed) to one 1-D synopsis' arrays (docs/math.md §12), called by kde_track's triggers.
 *
 * Each value falls in a heavy value (binary search of the sorted atom values) or a cell (width_bucket's
 * rule, as _kde_cells counts them), whose count and sum change by ±1 and ±v; the prefix arrays are rebuilt
 * in one pass. Added values below the first or above the last boundary move it out to them (half a step
 * out on a lattice), and the densities, relative to the grid's mean density, are rescaled to the new
 * range. A write the synopsis cannot take exactly is reported as `problem` (and nothing else is computed):
 * NaN or ±Infinity, a value off the lattice (cells.on_lattice's test), a value an exact frequency table
 * (no cells) does not hold.
 */
#include "postgres.h"

#include <float.h>
#include <math.h>

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/float.h"

#include "pg_kde.h"

PG_FUNCTION_INFO_V1(kde_track_delta);

/* A float8[] (or float4[] when float4) argument as doubles; NULL elements flagged in nulls (may be NULL). */
static double *
doubles(ArrayType *a, bool float4, int *n, bool **nulls)
{
	Datum	   *items;
	bool	   *isnull;
	double	   *out;

	if (float4)
		deconstruct_array(a, FLOAT4OID, 4, true, TYPALIGN_INT, &items, &isnull, n);
	else
		deconstruct_array(a, FLOAT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &items, &isnull, n);
	out = palloc(sizeof(double) * Max(*n, 1));
	for (int i = 0; i < *n; i++)
		out[i] = isnull[i] ? 0.0 : (float4 ? (double) DatumGetFloat4(items[i]) : DatumGetFloat8(items[i]));
	if (nulls)
		*nulls = isnull;
	return out;
}


static ArrayType *
float4_array(const double *v, int n)
{
	Datum	   *items = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		items[i] = Float4GetDatum((float4) v[i]);
	return construct_array(items, n, FLOAT4OID, 4, true, TYPALIGN_INT);
}

static int
find(const double *sorted, int n, double v)
{
	int			lo = 0,
				hi = n;

	while (lo < hi)
	{
		int			mid = (lo + hi) / 2;

		if (sorted[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && sorted[lo] == v ? lo : -1;
}


Datum
kde_track_delta(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Datum		values[11];
	bool		isnull[11] = {false};
	int			m,
				k,
				n,
				n_add,
				n_rem;
	double	   *grid,
			   *atoms,
			   *atom_count,
			   *atom_sum,
			   *cell_count,
			   *cell_sum,
			   *density,
			   *added,
			   *removed;
	bool	   *added_null,
			   *removed_null;
	double		step = PG_GETARG_FLOAT8(1);
	double	   *dn_cell,
			   *ds_cell,
			   *dn_atom,
			   *ds_atom;
	double		vmin = get_float8_nan(),
				vmax = get_float8_nan(),
				acc_n,
				acc_s;
	int64		nulls = 0,
				non_null = 0,
				kde_rows = 0;
	const char *problem = NULL;

	for (int i = 0; i < 10; i++)
		if (PG_ARGISNULL(i))
			ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("pg_kde: _kde_track_delta takes no NULL argument")));
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "_kde_track_delta must return a record");
	grid = doubles(PG_GETARG_ARRAYTYPE_P(0), false, &m, NULL);
	atoms = doubles(PG_GETARG_ARRAYTYPE_P(2), false, &k, NULL);
	atom_count = doubles(PG_GETARG_ARRAYTYPE_P(3), false, &n, NULL);
	if (n != k)
		elog(ERROR, "pg_kde: atom arrays of different lengths");
	atom_sum = doubles(PG_GETARG_ARRAYTYPE_P(4), false, &n, NULL);
	if (n != k)
		elog(ERROR, "pg_kde: atom arrays of different lengths");
	cell_count = doubles(PG_GETARG_ARRAYTYPE_P(5), false, &n, NULL);
	if (n != m)
		elog(ERROR, "pg_kde: cell arrays and the grid of different lengths");
	cell_sum = doubles(PG_GETARG_ARRAYTYPE_P(6), false, &n, NULL);
	if (n != m)
		elog(ERROR, "pg_kde: cell arrays and the grid of different lengths");
	density = doubles(PG_GETARG_ARRAYTYPE_P(7), true, &n, NULL);
	if (n != m)
		elog(ERROR, "pg_kde: the densities and the grid of different lengths");
	added = doubles(PG_GETARG_ARRAYTYPE_P(8), false, &n_add, &added_null);
	removed = doubles(PG_GETARG_ARRAYTYPE_P(9), false, &n_rem, &removed_null);

	dn_cell = palloc0(sizeof(double) * Max(m, 1));
	ds_cell = palloc0(sizeof(double) * Max(m, 1));
	dn_atom = palloc0(sizeof(double) * Max(k, 1));
	ds_atom = palloc0(sizeof(double) * Max(k, 1));

	/* Written values: checked, and the grid's ends moved out to them. */
	for (int i = 0; i < n_add && problem == NULL; i++)
	{
		double		v = added[i];

		if (added_null[i])
			continue;
		if (!isfinite(v))
			problem = "NaN or infinite values written";
		else if (step > 0 && !kde_on_lattice(v, step))
			problem = psprintf("values off the lattice (step %g) written", step);
		else if (find(atoms, k, v) < 0)
		{
			if (m < 2)
				problem = "values the exact frequency table does not hold written";
			if (isnan(vmin) || v < vmin)
				vmin = v;
			if (isnan(vmax) || v > vmax)
				vmax = v;
		}
	}
	if (problem == NULL && m >= 2 && !isnan(vmin))
	{
		double		range = grid[m - 1] - grid[0],
					lo = step > 0 ? (rint(vmin / step) - 0.5) * step : vmin,
					hi = step > 0 ? (rint(vmax / step) + 0.5) * step : vmax;

		if (lo < grid[0])
			grid[0] = lo;
		if (hi > grid[m - 1])
			grid[m - 1] = hi;
		if (grid[m - 1] - grid[0] != range)
			for (int c = 0; c < m; c++)
				density[c] *= (grid[m - 1] - grid[0]) / range;
		for (int c = 0; c < m && problem == NULL; c++)
			if (!isfinite(grid[c]) || !isfinite(density[c]) || fabs(density[c]) > FLT_MAX)
				problem = "values too far beyond the synopsis' range written";
	}
	for (int pass = 0; pass < 2 && problem == NULL; pass++)
	{
		double	   *v = pass == 0 ? added : removed;
		bool	   *isnull_v = pass == 0 ? added_null : removed_null;
		int			count = pass == 0 ? n_add : n_rem;
		double		sign = pass == 0 ? 1.0 : -1.0;

		for (int i = 0; i < count; i++)
		{
			int			a;

			if (isnull_v[i])
			{
				nulls += (int64) sign;
				continue;
			}
			if (!isfinite(v[i]))
				continue;		/* a removed non-finite value was never in the synopsis */
			non_null += (int64) sign;
			a = find(atoms, k, v[i]);
			if (a >= 0)
			{
				dn_atom[a] += sign;
				ds_atom[a] += sign * v[i];
			}
			else if (m >= 2)
			{
				int			c = kde_cell_of(grid, m, v[i]);

				dn_cell[c] += sign;
				ds_cell[c] += sign * v[i];
				kde_rows += (int64) sign;
			}
		}
	}
	if (problem != NULL)
	{
		for (int i = 1; i < 11; i++)
			isnull[i] = true;
		values[0] = CStringGetTextDatum(problem);
		PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, isnull)));
	}
	acc_n = acc_s = 0.0;
	for (int i = 0; i < k; i++)
	{
		acc_n += dn_atom[i];
		acc_s += ds_atom[i];
		atom_count[i] += acc_n;
		atom_sum[i] += acc_s;
	}
	acc_n = acc_s = 0.0;
	for (int c = 1; c < m; c++)
	{
		acc_n += dn_cell[c - 1];
		acc_s += ds_cell[c - 1];
		cell_count[c] += acc_n;
		cell_sum[c] += acc_s;
	}
	isnull[0] = true;
	values[1] = Int64GetDatum(nulls);
	values[2] = Int64GetDatum(non_null);
	values[3] = Int64GetDatum(kde_rows);
	values[4] = Int64GetDatum((int64) n_add + n_rem);
	values[5] = PointerGetDatum(kde_float8_array(grid, m));
	values[6] = PointerGetDatum(kde_float8_array(atom_count, k));
	values[7] = PointerGetDatum(kde_float8_array(atom_sum, k));
	values[8] = PointerGetDatum(kde_float8_array(cell_count, m));
	values[9] = PointerGetDatum(kde_float8_array(cell_sum, m));
	values[10] = PointerGetDatum(float4_array(density, m));
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, isnull)));
}

PG_FUNCTION_INFO_V1(kde_track_slack);

/* The largest magnitude of a float8[]'s elements (NULLs left out; a NaN: infinite), and their magnitudes' sum. */
static double
largest_abs(ArrayType *a, double *sum)
{
	int			n;
	double	   *v = doubles(a, false, &n, NULL);
	double		most = 0.0;

	*sum = 0.0;
	for (int i = 0; i < n; i++)
	{
		/* (a NaN running sum, inf - inf, bounds nothing: the slack is infinite) */
		most = isnan(v[i]) ? INFINITY : fmax(most, fabs(v[i]));
		*sum += fabs(v[i]);
	}
	return most;
}

/*
 * _kde_track_slack(slack, added, removed, old_sums, new_sums, boundaries, quantum): kde_synopsis.sum_slack
 * after a tracked write (docs/math.md §7): each written value's addition, each prefix's and each cell's rounds
 * within one ulp of the largest magnitude added (2^-51 of it: twice that), and a removed row takes its exact
 * value out of a sum that holds it rounded to the build's quantum (half of it, twice):
 *     slack + (added + removed + 2 boundaries + 2) 2^-51 max(max|old sums|, max|new sums|, Σ|added| + Σ|removed|)
 *           + removed · quantum
 * in IEEE arithmetic: +Infinity past float8's range, where PostgreSQL's float8 operators raise "value out of
 * range: overflow" (a red team: the trigger's SQL rejected the user's INSERT of -1.5e308 and -1.6e308 into a
 * tracked table of values near ±1.7e308). An infinite slack leaves the cut cells' bounds none to all of their
 * rows, as they hold.
 */
Datum
kde_track_slack(PG_FUNCTION_ARGS)
{
	double		slack = PG_GETARG_FLOAT8(0);
	ArrayType  *added = PG_GETARG_ARRAYTYPE_P(1);
	ArrayType  *removed = PG_GETARG_ARRAYTYPE_P(2);
	int			boundaries = PG_GETARG_INT32(5);
	double		quantum = PG_GETARG_FLOAT8(6);
	int			n_added = ArrayGetNItems(ARR_NDIM(added), ARR_DIMS(added)),
				n_removed = ArrayGetNItems(ARR_NDIM(removed), ARR_DIMS(removed));
	double		unused,
				added_sum,
				removed_sum,
				most;

	most = fmax(largest_abs(PG_GETARG_ARRAYTYPE_P(3), &unused), largest_abs(PG_GETARG_ARRAYTYPE_P(4), &unused));
	most = fmax(most, fmax(largest_abs(added, &added_sum), largest_abs(removed, &removed_sum)));
	/* (a NaN written or removed makes its sum NaN, which fmax would pass over: infinite, as for the sums) */
	most = isnan(added_sum + removed_sum) ? INFINITY : fmax(most, added_sum + removed_sum);
	PG_RETURN_FLOAT8(slack + ((double) n_added + n_removed + 2.0 * boundaries + 2.0) * 4.440892098500626e-16 * most
					 + (double) n_removed * quantum);
}
