/*
 * pg_kde's 2-D refresh scan: the aggregate _kde_cells2(v1, v2, grid1, grid2, quantum1, quantum2), one pass
 * over a pair of float8 values (_kde_value of each column, times its scan's power of two) that counts what a
 * 2-D synopsis stores (docs/math.md §8), per cell (i, j) of the grids' product (width_bucket's rule on each
 * axis, values beyond a grid's ends in its outer cells):
 *
 *   - its rows with both values finite;
 *   - the exact sums of its values in whole quanta of each axis (int128 of rint(v / quantum));
 *   - the sums of t1, t2 and t1 t2, t being a value's offset in its cell on that axis (clamped to [0, 1]),
 *     each rounded to whole units of 2^-60 first (int128 sums): the same sums in any scan order;
 *
 * per cell of each axis (a row or column of cells), the min and max of its values on that axis: the
 * build checks a discretised axis's lattice against them and moves the grids' outer lines to the table's
 * min and max (a grid placed from a sample of blocks); and the pair's facts: rows, rows with both values
 * non-NULL, those with a non-finite value, values that are not whole numbers (per axis), and values whose
 * quanta do not fit an int64 (left out of the sums). With a row's ctid and table, a share and a seed, it also
 * keeps a repeatable row sample of the pairs, as _kde_sample keeps values (sample.c: the same hash).
 *
 * It replaces a GROUP BY of SQL expressions (5.7 s on 10^7 rows with parallel workers, more as the prepared
 * plan the refresh ran it as, which never runs in parallel) by ~20 ns a row. The state is a bytea with a
 * combine function, as _kde_cells' (cells.c): parallel query runs it on every core, Citus on every shard.
 * Layout, in the server's byte order (C = (m1 - 1)(m2 - 1) cells, row-major):
 *   4 bytes of padding | header (struct Cells2Header) | grid1[m1] float8 | grid2[m2] float8 |
 *   min1[m1 - 1] max1[m1 - 1] min2[m2 - 1] max2[m2 - 1] float8 (NaN: no value) |
 *   rows[C] int64 | then five int128 sums per cell as (int64 low, int64 high): s1[C] s2[C] t1[C] t2[C] t12[C] |
 *   the kept pairs (v1, v2) float8 (room: cap; in no particular order)
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "storage/itemptr.h"
#include "utils/array.h"
#include "utils/float.h"
#include "utils/memutils.h"

#include "pg_kde.h"

#define CELLS2_MAGIC 0x3245444bu	/* "KDE2" */
#define CELLS2_VERSION 1
#define STATE_PAD 4
/* rint(v / q) must stay below 2^63 in magnitude to be added as an int64 */
#define QUANTA_LIMIT 9223372036854775808.0
/* offsets are summed in whole units of 2^-60 */
#define OFFSET_UNIT 1152921504606846976.0
/* cells a state may hold (about 90 MB of state); larger grids are scanned by a GROUP BY */
#define CELLS2_LIMIT (1 << 20)
/* pairs the row sample may keep (the caller asks for ~1.25 x its sample size) */
#define KEPT_LIMIT (1 << 22)
#define SUMS 5

typedef struct Cells2Header
{
	uint32		magic;
	uint32		version;
	int32		m1;				/* grid points on each axis */
	int32		m2;
	double		quantum1;
	double		quantum2;
	int64		rows;			/* rows seen, NULLs included */
	int64		pairs;			/* rows with both values non-NULL */
	int64		non_finite;		/* rows with a NaN or an infinity (not counted in cells) */
	int64		non_integral1;	/* counted values that are not whole numbers */
	int64		non_integral2;
	int64		overflow;		/* counted values with |v / q| >= 2^63 (left out of the sums) */
	double		lo1;			/* min and max of each axis's counted values (NaN when none) */
	double		hi1;
	double		lo2;
	double		hi2;
	int32		kept;			/* pairs of the row sample kept */
	int32		cap;			/* room for pairs */
} Cells2Header;

typedef struct Cells2State
{
	Cells2Header *h;
	double	   *grid1;
	double	   *grid2;
	double	   *min1;			/* per cell of axis 1, the min and max of its values on that axis */
	double	   *max1;
	double	   *min2;
	double	   *max2;
	int64	   *rows;
	int64	   *sums;			/* SUMS blocks of C (low, high) pairs */
	double	   *kept;			/* the row sample's pairs (v1, v2), as the scan reads them */
	int64		cells;
} Cells2State;

PG_FUNCTION_INFO_V1(kde_cells2_step);
PG_FUNCTION_INFO_V1(kde_cells2_combine);
PG_FUNCTION_INFO_V1(kde_float8_float8);

/* _kde_value(float8): the value itself, so that a scan reads _kde_value(column) of any type it takes. */
Datum
kde_float8_float8(PG_FUNCTION_ARGS)
{
	PG_RETURN_FLOAT8(PG_GETARG_FLOAT8(0));
}

static Size
state_size(int m1, int m2, int cap)
{
	Size		cells = (Size) (m1 - 1) * (Size) (m2 - 1);

	return VARHDRSZ + STATE_PAD + sizeof(Cells2Header) + sizeof(double) * (3 * ((Size) m1 + (Size) m2) - 4) +
		sizeof(int64) * cells * (1 + 2 * SUMS) + 2 * sizeof(double) * (Size) cap;
}

static bool
state_ok(const bytea *b)
{
	const Cells2Header *h;

	if (VARATT_IS_EXTENDED(b) || ((uintptr_t) b) % sizeof(int64) != 0 ||
		VARSIZE(b) < VARHDRSZ + STATE_PAD + sizeof(Cells2Header))
		return false;
	h = (const Cells2Header *) ((const char *) b + VARHDRSZ + STATE_PAD);
	return h->magic == CELLS2_MAGIC && h->version == CELLS2_VERSION && h->m1 >= 2 && h->m2 >= 2 &&
		(int64) (h->m1 - 1) * (h->m2 - 1) <= CELLS2_LIMIT && h->kept >= 0 && h->cap >= h->kept &&
		h->cap <= KEPT_LIMIT && VARSIZE(b) == state_size(h->m1, h->m2, h->cap);
}

static void
view(bytea *b, Cells2State *s)
{
	char	   *p = (char *) b + VARHDRSZ + STATE_PAD;

	s->h = (Cells2Header *) p;
	s->cells = (int64) (s->h->m1 - 1) * (s->h->m2 - 1);
	p += sizeof(Cells2Header);
	s->grid1 = (double *) p;
	p += sizeof(double) * s->h->m1;
	s->grid2 = (double *) p;
	p += sizeof(double) * s->h->m2;
	s->min1 = (double *) p;
	p += sizeof(double) * (s->h->m1 - 1);
	s->max1 = (double *) p;
	p += sizeof(double) * (s->h->m1 - 1);
	s->min2 = (double *) p;
	p += sizeof(double) * (s->h->m2 - 1);
	s->max2 = (double *) p;
	p += sizeof(double) * (s->h->m2 - 1);
	s->rows = (int64 *) p;
	p += sizeof(int64) * s->cells;
	s->sums = (int64 *) p;
	p += 2 * sizeof(int64) * SUMS * s->cells;
	s->kept = (double *) p;
}

/* The state with room for `more` kept pairs: itself, or a copy with twice the room in the context. */
static bytea *
with_room(bytea *b, int more, MemoryContext context)
{
	Cells2Header *h = (Cells2Header *) ((char *) b + VARHDRSZ + STATE_PAD);
	int			cap;
	bytea	   *bigger;
	Size		used;

	if (h->kept + more <= h->cap)
		return b;
	if (h->kept + more > KEPT_LIMIT)
		ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						errmsg("pg_kde: a row sample of more than %d pairs", KEPT_LIMIT)));
	cap = Min(Max(2 * h->cap, Max(h->kept + more, 1024)), KEPT_LIMIT);
	used = state_size(h->m1, h->m2, h->kept);
	bigger = MemoryContextAlloc(context, state_size(h->m1, h->m2, cap));
	memcpy(bigger, b, used);
	SET_VARSIZE(bigger, state_size(h->m1, h->m2, cap));
	((Cells2Header *) ((char *) bigger + VARHDRSZ + STATE_PAD))->cap = cap;
	return bigger;
}

static bytea *
state_copy(bytea *from, MemoryContext context)
{
	Size		size = VARSIZE_ANY_EXHDR(from);
	bytea	   *b = MemoryContextAlloc(context, VARHDRSZ + size);

	memcpy(VARDATA(b), VARDATA_ANY(from), size);
	SET_VARSIZE(b, VARHDRSZ + size);
	if (!state_ok(b))
		ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED),
						errmsg("pg_kde: not a _kde_cells2 state of this version")));
	return b;
}

static bytea *
state_new(FunctionCallInfo fcinfo, MemoryContext context)
{
	bytea	   *b;
	Cells2State s;
	double	   *grid1,
			   *grid2,
				q1,
				q2;
	int			m1,
				m2;

	if (PG_ARGISNULL(3) || PG_ARGISNULL(4) || PG_ARGISNULL(5) || PG_ARGISNULL(6))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						errmsg("pg_kde: _kde_cells2 needs two grids and two quanta")));
	grid1 = kde_sorted_array(PG_GETARG_ARRAYTYPE_P(3), "the first grid", 2, false, &m1);
	grid2 = kde_sorted_array(PG_GETARG_ARRAYTYPE_P(4), "the second grid", 2, false, &m2);
	q1 = PG_GETARG_FLOAT8(5);
	q2 = PG_GETARG_FLOAT8(6);
	if ((int64) (m1 - 1) * (m2 - 1) > CELLS2_LIMIT)
		ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						errmsg("pg_kde: at most %d cells in a _kde_cells2 scan", CELLS2_LIMIT)));
	if (!(q1 > 0) || !isfinite(q1) || !(q2 > 0) || !isfinite(q2))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("pg_kde: the quanta must be positive and finite")));
	b = MemoryContextAllocZero(context, state_size(m1, m2, 0));
	SET_VARSIZE(b, state_size(m1, m2, 0));
	((Cells2Header *) ((char *) b + VARHDRSZ + STATE_PAD))->m1 = m1;
	((Cells2Header *) ((char *) b + VARHDRSZ + STATE_PAD))->m2 = m2;
	view(b, &s);
	s.h->magic = CELLS2_MAGIC;
	s.h->version = CELLS2_VERSION;
	s.h->quantum1 = q1;
	s.h->quantum2 = q2;
	s.h->lo1 = s.h->hi1 = s.h->lo2 = s.h->hi2 = get_float8_nan();
	memcpy(s.grid1, grid1, sizeof(double) * m1);
	memcpy(s.grid2, grid2, sizeof(double) * m2);
	for (int i = 0; i < m1 - 1; i++)
		s.min1[i] = s.max1[i] = get_float8_nan();
	for (int j = 0; j < m2 - 1; j++)
		s.min2[j] = s.max2[j] = get_float8_nan();
	return b;
}

/* The cell of v on a grid of m points (width_bucket(v, grid) - 1, clamped) and v's offset in it. */
static int
cell_of(const double *grid, int m, double v, double *t)
{
	int			c = kde_cell_of(grid, m, v);
	double		u = (v - grid[c]) / (grid[c + 1] - grid[c]);

	*t = u > 0 ? (u < 1 ? u : 1.0) : 0.0;
	return c;
}

Datum
kde_cells2_step(PG_FUNCTION_ARGS)
{
	MemoryContext context;
	bytea	   *b;
	Cells2State s;
	double		v1,
				v2,
				t1,
				t2,
				r1,
				r2;
	int			i,
				j;
	int64		c;

	if (!AggCheckCallContext(fcinfo, &context))
		elog(ERROR, "_kde_cells2 called in a non-aggregate context");
	if (PG_ARGISNULL(0))
		b = state_new(fcinfo, CurrentMemoryContext);
	else
	{
		b = (bytea *) PG_GETARG_POINTER(0);
		if (!state_ok(b))
			b = state_copy(PG_GETARG_BYTEA_PP(0), CurrentMemoryContext);
	}
	view(b, &s);
	s.h->rows++;
	v1 = PG_ARGISNULL(1) ? 0.0 : PG_GETARG_FLOAT8(1);
	v2 = PG_ARGISNULL(2) ? 0.0 : PG_GETARG_FLOAT8(2);
	if (!PG_ARGISNULL(1) && !PG_ARGISNULL(2))
		s.h->pairs++;
	if (!isfinite(v1) || !isfinite(v2))
	{
		s.h->non_finite++;		/* a row with a NaN or an infinity, its other value NULL or not */
		PG_RETURN_BYTEA_P(b);
	}
	if (PG_ARGISNULL(1) || PG_ARGISNULL(2))
		PG_RETURN_BYTEA_P(b);
	kde_widen(&s.h->lo1, &s.h->hi1, v1);
	kde_widen(&s.h->lo2, &s.h->hi2, v2);
	if (v1 != trunc(v1))
		s.h->non_integral1++;
	if (v2 != trunc(v2))
		s.h->non_integral2++;
	i = cell_of(s.grid1, s.h->m1, v1, &t1);
	j = cell_of(s.grid2, s.h->m2, v2, &t2);
	kde_widen(&s.min1[i], &s.max1[i], v1);
	kde_widen(&s.min2[j], &s.max2[j], v2);
	c = (int64) i * (s.h->m2 - 1) + j;
	s.rows[c]++;
	if (!PG_ARGISNULL(7) && !PG_ARGISNULL(8) && !PG_ARGISNULL(9) && !PG_ARGISNULL(10) &&
		kde_keep_row((ItemPointer) PG_GETARG_POINTER(7), PG_GETARG_OID(8), PG_GETARG_FLOAT8(9), PG_GETARG_INT64(10)))
	{
		b = with_room(b, 1, CurrentMemoryContext);
		view(b, &s);
		s.kept[2 * s.h->kept] = PG_GETARG_FLOAT8(1);
		s.kept[2 * s.h->kept + 1] = PG_GETARG_FLOAT8(2);
		s.h->kept++;
	}
	r1 = rint(v1 / s.h->quantum1);
	r2 = rint(v2 / s.h->quantum2);
	if (fabs(r1) >= QUANTA_LIMIT || fabs(r2) >= QUANTA_LIMIT)
		s.h->overflow++;
	else
	{
		kde_add_quanta(&s.sums[2 * c], (__int128) (int64) r1);
		kde_add_quanta(&s.sums[2 * (s.cells + c)], (__int128) (int64) r2);
	}
	kde_add_quanta(&s.sums[2 * (2 * s.cells + c)], (__int128) (int64) rint(t1 * OFFSET_UNIT));
	kde_add_quanta(&s.sums[2 * (3 * s.cells + c)], (__int128) (int64) rint(t2 * OFFSET_UNIT));
	kde_add_quanta(&s.sums[2 * (4 * s.cells + c)], (__int128) (int64) rint(t1 * t2 * OFFSET_UNIT));
	PG_RETURN_BYTEA_P(b);
}

Datum
kde_cells2_combine(PG_FUNCTION_ARGS)
{
	MemoryContext context;
	bytea	   *a;
	Cells2State sa,
				sb;

	if (!AggCheckCallContext(fcinfo, &context))
		elog(ERROR, "_kde_cells2 combine called in a non-aggregate context");
	if (PG_ARGISNULL(1))
	{
		if (PG_ARGISNULL(0))
			PG_RETURN_NULL();
		PG_RETURN_DATUM(PG_GETARG_DATUM(0));
	}
	if (PG_ARGISNULL(0))
		PG_RETURN_BYTEA_P(state_copy(PG_GETARG_BYTEA_PP(1), CurrentMemoryContext));
	a = (bytea *) PG_GETARG_POINTER(0);
	if (!state_ok(a))
		a = state_copy(PG_GETARG_BYTEA_PP(0), CurrentMemoryContext);
	view(state_copy(PG_GETARG_BYTEA_PP(1), CurrentMemoryContext), &sb);
	a = with_room(a, sb.h->kept, CurrentMemoryContext);
	view(a, &sa);
	if (sa.h->m1 != sb.h->m1 || sa.h->m2 != sb.h->m2 || sa.h->quantum1 != sb.h->quantum1 ||
		sa.h->quantum2 != sb.h->quantum2 || memcmp(sa.grid1, sb.grid1, sizeof(double) * sa.h->m1) != 0 ||
		memcmp(sa.grid2, sb.grid2, sizeof(double) * sa.h->m2) != 0)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("pg_kde: _kde_cells2 states of different grids or quanta do not combine")));
	sa.h->rows += sb.h->rows;
	sa.h->pairs += sb.h->pairs;
	sa.h->non_finite += sb.h->non_finite;
	sa.h->non_integral1 += sb.h->non_integral1;
	sa.h->non_integral2 += sb.h->non_integral2;
	sa.h->overflow += sb.h->overflow;
	if (!isnan(sb.h->lo1))
		kde_widen(&sa.h->lo1, &sa.h->hi1, sb.h->lo1), kde_widen(&sa.h->lo1, &sa.h->hi1, sb.h->hi1);
	if (!isnan(sb.h->lo2))
		kde_widen(&sa.h->lo2, &sa.h->hi2, sb.h->lo2), kde_widen(&sa.h->lo2, &sa.h->hi2, sb.h->hi2);
	for (int i = 0; i < sa.h->m1 - 1; i++)
		if (!isnan(sb.min1[i]))
			kde_widen(&sa.min1[i], &sa.max1[i], sb.min1[i]), kde_widen(&sa.min1[i], &sa.max1[i], sb.max1[i]);
	for (int j = 0; j < sa.h->m2 - 1; j++)
		if (!isnan(sb.min2[j]))
			kde_widen(&sa.min2[j], &sa.max2[j], sb.min2[j]), kde_widen(&sa.min2[j], &sa.max2[j], sb.max2[j]);
	for (int64 c = 0; c < sa.cells; c++)
		sa.rows[c] += sb.rows[c];
	for (int64 i = 0; i < SUMS * sa.cells; i++)
		kde_add_quanta(&sa.sums[2 * i], ((__int128) sb.sums[2 * i + 1] << 64) | (unsigned __int128) (uint64) sb.sums[2 * i]);
	if (sb.h->kept > 0)
		memcpy(&sa.kept[2 * sa.h->kept], sb.kept, 2 * sizeof(double) * sb.h->kept);
	sa.h->kept += sb.h->kept;
	PG_RETURN_BYTEA_P(a);
}
