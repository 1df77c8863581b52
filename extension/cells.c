/*
 * pg_kde's refresh scan: the aggregate _kde_cells(value, grid, candidates, quantum), one pass over a
 * column that counts what a 1-D synopsis stores (docs/math.md §7):
 *
 *   - per cell of the grid (len(grid) - 1 cells, width_bucket's rule: grid[c] <= v < grid[c + 1], values
 *     below or above the grid in the first or last cell), its rows and the exact sum of its values in whole
 *     quanta (int128 of rint(v / quantum): a lattice's step, or a power of two fine enough that the
 *     rounding is far below float8's own);
 *   - per candidate heavy value (a sorted float8 array), its rows (they stay out of the cells);
 *   - the column's facts: non-NULL and non-finite rows, rows off the quantum's lattice, rows that are not
 *     whole numbers, rows whose quanta do not fit an int64, and the min and max of all values and of the
 *     cells' values.
 *
 * It is written in C because the scan is the refresh's cost: SQL expressions cost ~100 ns per row each,
 * this ~20 ns. The state has combine, serialize and deserialize functions, so PostgreSQL's parallel query
 * runs it on every core, and partial states of parts of a table (partitions, shards) merge with the same
 * combine: integer counts and sums, the same answer in any order.
 *
 * The serialized state (the final value too) is one bytea, read by pg_kde.synopsis.sql_reader:
 *   header (struct CellsHeader) | grid[m] float8 | candidates[k] float8 | cell rows[m-1] int64 |
 *   cell quanta[m-1] (int64 low, int64 high) | candidate rows[k] int64
 * in the server's byte order.
 */
#include "postgres.h"

#include <float.h>
#include <math.h>

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/datetime.h"
#include "utils/float.h"
#include "utils/fmgrprotos.h"
#include "utils/timestamp.h"

PG_MODULE_MAGIC;

#define CELLS_MAGIC 0x4345444bu /* "KDEC" */
#define CELLS_VERSION 1
/* cells.on_lattice's tolerance: LATTICE_ULPS (8) times float8's epsilon, relative to max(|v / q|, 1) */
#define LATTICE_TOLERANCE (8.0 * DBL_EPSILON)
/* rint(v / q) must stay below 2^63 in magnitude to be added as an int64 */
#define QUANTA_LIMIT 9223372036854775808.0

typedef struct CellsHeader
{
	uint32		magic;
	uint32		version;
	int32		m;				/* grid points; m - 1 cells */
	int32		k;				/* candidate values */
	double		quantum;
	int64		non_null;		/* non-NULL values seen, finite or not */
	int64		non_finite;		/* NaN, Infinity, -Infinity */
	int64		off_lattice;	/* cell values off the quantum's lattice */
	int64		non_integral;	/* finite values that are not whole numbers */
	int64		overflow;		/* cell values with |v / q| >= 2^63 (left out of the sums) */
	double		lo;				/* min and max of the cells' values (NaN when none) */
	double		hi;
	double		all_lo;			/* min and max of all finite values (NaN when none) */
	double		all_hi;
} CellsHeader;

typedef struct CellsState
{
	CellsHeader h;
	double	   *grid;
	double	   *candidates;
	int64	   *rows;
	__int128   *quanta;
	int64	   *candidate_rows;
} CellsState;

PG_FUNCTION_INFO_V1(kde_float8);
PG_FUNCTION_INFO_V1(kde_cells_step_float8);
PG_FUNCTION_INFO_V1(kde_cells_step_numeric);
PG_FUNCTION_INFO_V1(kde_cells_step_timestamp);
PG_FUNCTION_INFO_V1(kde_cells_step_date);
PG_FUNCTION_INFO_V1(kde_cells_combine);
PG_FUNCTION_INFO_V1(kde_cells_serialize);
PG_FUNCTION_INFO_V1(kde_cells_deserialize);
PG_FUNCTION_INFO_V1(kde_cells_final);

static void
state_arrays(CellsState *s, MemoryContext context)
{
	int			cells = s->h.m - 1;

	s->grid = MemoryContextAlloc(context, sizeof(double) * s->h.m);
	s->candidates = MemoryContextAlloc(context, sizeof(double) * Max(s->h.k, 1));
	s->rows = MemoryContextAllocZero(context, sizeof(int64) * cells);
	s->quanta = MemoryContextAllocZero(context, sizeof(__int128) * cells);
	s->candidate_rows = MemoryContextAllocZero(context, sizeof(int64) * Max(s->h.k, 1));
}

/* A float8[] argument's values: one dimension, no NULLs, finite, ascending (non-decreasing for the grid,
 * strictly for candidates). */
static double *
sorted_array(ArrayType *a, const char *what, int min_len, bool strict, int *len)
{
	double	   *v;
	int			n;

	if (ARR_ELEMTYPE(a) != FLOAT8OID)
		ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH), errmsg("pg_kde: %s must be float8[]", what)));
	if (ARR_NDIM(a) > 1 || ARR_HASNULL(a))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("pg_kde: %s must be a one-dimensional array without NULLs", what)));
	n = ARR_NDIM(a) == 0 ? 0 : ARR_DIMS(a)[0];
	if (n < min_len)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("pg_kde: %s needs at least %d values", what, min_len)));
	v = (double *) ARR_DATA_PTR(a);
	for (int i = 0; i < n; i++)
	{
		if (!isfinite(v[i]) || (i > 0 && (strict ? v[i] <= v[i - 1] : v[i] < v[i - 1])))
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							errmsg("pg_kde: %s must be finite and ascending", what)));
	}
	*len = n;
	return v;
}

static CellsState *
state_new(FunctionCallInfo fcinfo, MemoryContext context)
{
	CellsState *s;
	double	   *grid,
			   *candidates;
	int			m,
				k;
	double		quantum;

	if (PG_ARGISNULL(2) || PG_ARGISNULL(3) || PG_ARGISNULL(4))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						errmsg("pg_kde: _kde_cells needs a grid, candidates and a quantum")));
	grid = sorted_array(PG_GETARG_ARRAYTYPE_P(2), "the grid", 2, false, &m);
	candidates = sorted_array(PG_GETARG_ARRAYTYPE_P(3), "the candidates", 0, true, &k);
	quantum = PG_GETARG_FLOAT8(4);
	if (!(quantum > 0) || !isfinite(quantum))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("pg_kde: the quantum must be positive and finite")));
	s = MemoryContextAllocZero(context, sizeof(CellsState));
	s->h.magic = CELLS_MAGIC;
	s->h.version = CELLS_VERSION;
	s->h.m = m;
	s->h.k = k;
	s->h.quantum = quantum;
	s->h.lo = s->h.hi = s->h.all_lo = s->h.all_hi = get_float8_nan();
	state_arrays(s, context);
	memcpy(s->grid, grid, sizeof(double) * m);
	if (k > 0)
		memcpy(s->candidates, candidates, sizeof(double) * k);
	return s;
}

static void
widen(double *lo, double *hi, double v)
{
	if (isnan(*lo) || v < *lo)
		*lo = v;
	if (isnan(*hi) || v > *hi)
		*hi = v;
}

/* Count one value (float8 epoch seconds for time types). */
static void
add_value(CellsState *s, double v)
{
	int			lo,
				hi,
				c;
	double		t,
				r;

	s->h.non_null++;
	if (!isfinite(v))
	{
		s->h.non_finite++;
		return;
	}
	widen(&s->h.all_lo, &s->h.all_hi, v);
	if (v != trunc(v))
		s->h.non_integral++;
	/* a candidate: binary search of the sorted candidates */
	lo = 0;
	hi = s->h.k;
	while (lo < hi)
	{
		int			mid = (lo + hi) / 2;

		if (s->candidates[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < s->h.k && s->candidates[lo] == v)
	{
		s->candidate_rows[lo]++;
		return;
	}
	/* its cell: the number of grid points <= v, less one, clamped to the cells */
	lo = 0;
	hi = s->h.m;
	while (lo < hi)
	{
		int			mid = (lo + hi) / 2;

		if (s->grid[mid] <= v)
			lo = mid + 1;
		else
			hi = mid;
	}
	c = Min(Max(lo - 1, 0), s->h.m - 2);
	s->rows[c]++;
	widen(&s->h.lo, &s->h.hi, v);
	t = v / s->h.quantum;
	r = rint(t);
	if (fabs(t - r) > LATTICE_TOLERANCE * Max(fabs(t), 1.0))
		s->h.off_lattice++;
	if (fabs(r) >= QUANTA_LIMIT)
		s->h.overflow++;
	else
		s->quanta[c] += (__int128) (int64) r;
}

/*
 * numeric -> float8, the same value as numeric's own cast (the decimal text read by strtod: the exact value
 * correctly rounded), without the text: the value is N * 10^e with N the base-10000 digits as an integer;
 * where N < 2^53 and |e| <= 22 both are exact float8s and one multiplication or division rounds correctly.
 * Otherwise (long digit strings, huge or tiny exponents) it is numeric's cast itself.
 *
 * The digits are read from numeric's on-disk layout (src/backend/utils/adt/numeric.c, stable across
 * releases because pg_upgrade keeps data files): a uint16 header, in the long form an int16 weight, then
 * int16 base-10000 digits, most significant first, leading and trailing zero digits stripped.
 */
#define NUMERIC_SIGN_MASK 0xC000
#define NUMERIC_NEG 0x4000
#define NUMERIC_SHORT 0x8000
#define NUMERIC_SPECIAL 0xC000
#define NUMERIC_NAN 0xC000
#define NUMERIC_PINF 0xD000
#define NUMERIC_NINF 0xF000
#define NUMERIC_SHORT_SIGN_MASK 0x2000
#define NUMERIC_SHORT_WEIGHT_SIGN_MASK 0x0040
#define NUMERIC_SHORT_WEIGHT_MASK 0x003F
#define EXACT_INTEGER_LIMIT (INT64CONST(1) << 53)

static const double powers_of_ten[] = {
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18,
	1e19, 1e20, 1e21, 1e22
};

static double
numeric_to_double(Datum datum)
{
	struct varlena *num = PG_DETOAST_DATUM_PACKED(datum);
	const char *p = VARDATA_ANY(num);
	Size		size = VARSIZE_ANY_EXHDR(num);
	uint16		header;
	int			weight,
				ndigits,
				e;
	bool		negative;
	int64		n = 0;
	double		v;

	memcpy(&header, p, sizeof(header));
	if ((header & NUMERIC_SIGN_MASK) == NUMERIC_SPECIAL)
		return header == NUMERIC_PINF ? get_float8_infinity() :
			header == NUMERIC_NINF ? -get_float8_infinity() : get_float8_nan();
	if (header & NUMERIC_SHORT)
	{
		negative = (header & NUMERIC_SHORT_SIGN_MASK) != 0;
		weight = (header & NUMERIC_SHORT_WEIGHT_SIGN_MASK) ? (int) (~NUMERIC_SHORT_WEIGHT_MASK | (header & NUMERIC_SHORT_WEIGHT_MASK))
			: (int) (header & NUMERIC_SHORT_WEIGHT_MASK);
		p += sizeof(uint16);
		size -= sizeof(uint16);
	}
	else
	{
		int16		w;

		negative = (header & NUMERIC_SIGN_MASK) == NUMERIC_NEG;
		memcpy(&w, p + sizeof(uint16), sizeof(w));
		weight = w;
		p += sizeof(uint16) + sizeof(int16);
		size -= sizeof(uint16) + sizeof(int16);
	}
	ndigits = size / sizeof(int16);
	if (ndigits == 0)
		return 0.0;
	for (int i = 0; i < ndigits; i++)
	{
		int16		d;

		memcpy(&d, p + i * sizeof(int16), sizeof(d));
		if (n >= (EXACT_INTEGER_LIMIT - 9999) / 10000)
			return DatumGetFloat8(DirectFunctionCall1(numeric_float8, datum));
		n = n * 10000 + d;
	}
	e = 4 * (weight - ndigits + 1);
	if (e > 22 || e < -22)
		return DatumGetFloat8(DirectFunctionCall1(numeric_float8, datum));
	v = e >= 0 ? (double) n * powers_of_ten[e] : (double) n / powers_of_ten[-e];
	return negative ? -v : v;
}

Datum
kde_float8(PG_FUNCTION_ARGS)
{
	PG_RETURN_FLOAT8(numeric_to_double(PG_GETARG_DATUM(0)));
}

static CellsState *
step_state(FunctionCallInfo fcinfo)
{
	MemoryContext context;

	if (!AggCheckCallContext(fcinfo, &context))
		elog(ERROR, "_kde_cells called in a non-aggregate context");
	return PG_ARGISNULL(0) ? state_new(fcinfo, context) : (CellsState *) PG_GETARG_POINTER(0);
}

Datum
kde_cells_step_float8(PG_FUNCTION_ARGS)
{
	CellsState *s = step_state(fcinfo);

	if (!PG_ARGISNULL(1))
		add_value(s, PG_GETARG_FLOAT8(1));
	PG_RETURN_POINTER(s);
}

Datum
kde_cells_step_numeric(PG_FUNCTION_ARGS)
{
	CellsState *s = step_state(fcinfo);

	if (!PG_ARGISNULL(1))
		add_value(s, numeric_to_double(PG_GETARG_DATUM(1)));
	PG_RETURN_POINTER(s);
}

/* Epoch seconds of a timestamp or timestamptz, as extract(epoch from ...)::float8 reads them: the exact
 * decimal microseconds rounded once to float8. */
static double
epoch_seconds(Timestamp ts)
{
	int64		us;

	if (TIMESTAMP_IS_NOBEGIN(ts))
		return -get_float8_infinity();
	if (TIMESTAMP_IS_NOEND(ts))
		return get_float8_infinity();
	us = ts + (int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;
	if (us > -(INT64CONST(1) << 53) && us < (INT64CONST(1) << 53))
		return (double) us / 1000000.0; /* both exact: one correctly rounded division */
	{
		/* beyond 2^53 microseconds: through the decimal text, as the numeric cast reads it */
		char	   *text = psprintf("%s%lld.%06lld", us < 0 ? "-" : "",
									(long long) (us < 0 ? -(us / 1000000) : us / 1000000),
									(long long) (us < 0 ? -(us % 1000000) : us % 1000000));

		return float8in_internal(text, NULL, "double precision", text);
	}
}

Datum
kde_cells_step_timestamp(PG_FUNCTION_ARGS)
{
	CellsState *s = step_state(fcinfo);

	if (!PG_ARGISNULL(1))
		add_value(s, epoch_seconds(PG_GETARG_TIMESTAMP(1)));
	PG_RETURN_POINTER(s);
}

Datum
kde_cells_step_date(PG_FUNCTION_ARGS)
{
	CellsState *s = step_state(fcinfo);

	if (!PG_ARGISNULL(1))
	{
		DateADT		d = PG_GETARG_DATEADT(1);

		if (DATE_IS_NOBEGIN(d))
			add_value(s, -get_float8_infinity());
		else if (DATE_IS_NOEND(d))
			add_value(s, get_float8_infinity());
		else
			add_value(s, ((double) d + (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE)) * SECS_PER_DAY);
	}
	PG_RETURN_POINTER(s);
}

static CellsState *
state_copy(const CellsState *from, MemoryContext context)
{
	CellsState *s = MemoryContextAlloc(context, sizeof(CellsState));
	int			cells = from->h.m - 1,
				k = Max(from->h.k, 1);

	s->h = from->h;
	state_arrays(s, context);
	memcpy(s->grid, from->grid, sizeof(double) * from->h.m);
	memcpy(s->candidates, from->candidates, sizeof(double) * k);
	memcpy(s->rows, from->rows, sizeof(int64) * cells);
	memcpy(s->quanta, from->quanta, sizeof(__int128) * cells);
	memcpy(s->candidate_rows, from->candidate_rows, sizeof(int64) * k);
	return s;
}

Datum
kde_cells_combine(PG_FUNCTION_ARGS)
{
	MemoryContext context;
	CellsState *a,
			   *b;

	if (!AggCheckCallContext(fcinfo, &context))
		elog(ERROR, "_kde_cells combine called in a non-aggregate context");
	if (PG_ARGISNULL(1))
		PG_RETURN_DATUM(PG_ARGISNULL(0) ? (Datum) 0 : PG_GETARG_DATUM(0));
	b = (CellsState *) PG_GETARG_POINTER(1);
	if (PG_ARGISNULL(0))
		PG_RETURN_POINTER(state_copy(b, context));
	a = (CellsState *) PG_GETARG_POINTER(0);
	if (a->h.m != b->h.m || a->h.k != b->h.k || a->h.quantum != b->h.quantum ||
		memcmp(a->grid, b->grid, sizeof(double) * a->h.m) != 0 ||
		(a->h.k > 0 && memcmp(a->candidates, b->candidates, sizeof(double) * a->h.k) != 0))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("pg_kde: _kde_cells states of different grids, candidates or quanta do not combine")));
	a->h.non_null += b->h.non_null;
	a->h.non_finite += b->h.non_finite;
	a->h.off_lattice += b->h.off_lattice;
	a->h.non_integral += b->h.non_integral;
	a->h.overflow += b->h.overflow;
	if (!isnan(b->h.lo))
		widen(&a->h.lo, &a->h.hi, b->h.lo), widen(&a->h.lo, &a->h.hi, b->h.hi);
	if (!isnan(b->h.all_lo))
		widen(&a->h.all_lo, &a->h.all_hi, b->h.all_lo), widen(&a->h.all_lo, &a->h.all_hi, b->h.all_hi);
	for (int c = 0; c < a->h.m - 1; c++)
	{
		a->rows[c] += b->rows[c];
		a->quanta[c] += b->quanta[c];
	}
	for (int i = 0; i < a->h.k; i++)
		a->candidate_rows[i] += b->candidate_rows[i];
	PG_RETURN_POINTER(a);
}

static bytea *
serialize(const CellsState *s)
{
	int64		cells = s->h.m - 1;
	Size		size = sizeof(CellsHeader) + sizeof(double) * (s->h.m + s->h.k) +
		(sizeof(int64) + 2 * sizeof(int64)) * cells + sizeof(int64) * s->h.k;
	bytea	   *out = palloc(VARHDRSZ + size);
	char	   *p = VARDATA(out);

	SET_VARSIZE(out, VARHDRSZ + size);
	memcpy(p, &s->h, sizeof(CellsHeader));
	p += sizeof(CellsHeader);
	memcpy(p, s->grid, sizeof(double) * s->h.m);
	p += sizeof(double) * s->h.m;
	memcpy(p, s->candidates, sizeof(double) * s->h.k);
	p += sizeof(double) * s->h.k;
	memcpy(p, s->rows, sizeof(int64) * cells);
	p += sizeof(int64) * cells;
	for (int64 c = 0; c < cells; c++)
	{
		int64		lo_hi[2];

		lo_hi[0] = (int64) (uint64) s->quanta[c];	/* low 64 bits */
		lo_hi[1] = (int64) (s->quanta[c] >> 64);
		memcpy(p, lo_hi, sizeof(lo_hi));
		p += sizeof(lo_hi);
	}
	memcpy(p, s->candidate_rows, sizeof(int64) * s->h.k);
	return out;
}

Datum
kde_cells_serialize(PG_FUNCTION_ARGS)
{
	if (!AggCheckCallContext(fcinfo, NULL))
		elog(ERROR, "_kde_cells serialize called in a non-aggregate context");
	PG_RETURN_BYTEA_P(serialize((CellsState *) PG_GETARG_POINTER(0)));
}

Datum
kde_cells_deserialize(PG_FUNCTION_ARGS)
{
	bytea	   *in = PG_GETARG_BYTEA_PP(0);
	const char *p = VARDATA_ANY(in);
	Size		size = VARSIZE_ANY_EXHDR(in);
	CellsState *s;
	int64		cells;

	if (!AggCheckCallContext(fcinfo, NULL))
		elog(ERROR, "_kde_cells deserialize called in a non-aggregate context");
	s = palloc(sizeof(CellsState));
	if (size < sizeof(CellsHeader))
		elog(ERROR, "pg_kde: a _kde_cells state is too short");
	memcpy(&s->h, p, sizeof(CellsHeader));
	p += sizeof(CellsHeader);
	if (s->h.magic != CELLS_MAGIC || s->h.version != CELLS_VERSION || s->h.m < 2 || s->h.k < 0)
		elog(ERROR, "pg_kde: not a _kde_cells state of this version");
	cells = s->h.m - 1;
	if (size != sizeof(CellsHeader) + sizeof(double) * (s->h.m + s->h.k) + 3 * sizeof(int64) * cells +
		sizeof(int64) * s->h.k)
		elog(ERROR, "pg_kde: a _kde_cells state has the wrong length");
	state_arrays(s, CurrentMemoryContext);
	memcpy(s->grid, p, sizeof(double) * s->h.m);
	p += sizeof(double) * s->h.m;
	memcpy(s->candidates, p, sizeof(double) * s->h.k);
	p += sizeof(double) * s->h.k;
	memcpy(s->rows, p, sizeof(int64) * cells);
	p += sizeof(int64) * cells;
	for (int64 c = 0; c < cells; c++)
	{
		int64		lo_hi[2];

		memcpy(lo_hi, p, sizeof(lo_hi));
		p += sizeof(lo_hi);
		s->quanta[c] = ((__int128) lo_hi[1] << 64) | (unsigned __int128) (uint64) lo_hi[0];
	}
	memcpy(s->candidate_rows, p, sizeof(int64) * s->h.k);
	PG_RETURN_POINTER(s);
}

Datum
kde_cells_final(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	PG_RETURN_BYTEA_P(serialize((CellsState *) PG_GETARG_POINTER(0)));
}
