/*
 * pg_kde's refresh scan: the aggregate _kde_cells(value, grid, candidates, quantum, tail), one pass over a
 * column that counts what a 1-D synopsis stores (docs/math.md §7):
 *
 *   - per cell of the grid (len(grid) - 1 cells, width_bucket's rule: grid[c] <= v < grid[c + 1], values
 *     below or above the grid in the first or last cell), its rows and the exact sum of its values in whole
 *     quanta (int128 of rint(v / quantum): a lattice's step, or a power of two fine enough that the
 *     rounding is far below float8's own);
 *   - per candidate heavy value (a sorted float8 array), its rows (they stay out of the cells);
 *   - the column's facts: non-NULL and non-finite rows, rows off the quantum's lattice, rows that are not
 *     whole numbers, rows whose quanta do not fit an int64, and the min and max of all values and of the
 *     cells' values;
 *   - the `tail` smallest and largest of the cells' values (two heaps, with repeats; 1 to TAIL_MOST, the
 *     build asks TAIL_VALUES unless it expects the cells to hold more rows and would keep their values
 *     exactly): where the grid was placed from a sample of the table's blocks, rows beyond the sampled range
 *     fall in the outer cells, and these values let the build cut those cells exactly; where the heaps hold
 *     every cell value, a frequency table takes them all (docs/math.md §7).
 *
 * It is written in C because the scan is the refresh's cost: SQL expressions cost ~100 ns per row each,
 * this ~20 ns. The state is a bytea with a combine function: PostgreSQL's parallel query runs the aggregate
 * on every core, and Citus runs it on every shard (it distributes aggregates whose state has a real type
 * and a combine function, not `internal`); partial states of parts of a table merge with the same combine:
 * integer counts and sums, the same answer in any order.
 *
 * The state (and the aggregate's value), read by pg_kde.synopsis.sql_reader, in the server's byte order:
 *   4 bytes of padding | header (struct CellsHeader) | grid[m] float8 | candidates[k] float8 |
 *   cell rows[m-1] int64 | cell quanta[m-1] (int64 low, int64 high) | candidate rows[k] int64 |
 *   smallest[cap] float8 (a max-heap, `n_low` used) | largest[cap] float8 (a min-heap)
 * (the padding puts the arrays on 8-byte boundaries after the 4-byte varlena header); the transition
 * functions update it in place. The heaps' room `cap` starts at min(tail, CAP_FIRST) and doubles (up to the
 * tail) when they fill: a state, a parallel worker's or a Citus shard's answer, takes the bytes of the values it
 * holds, not of its tail (16,384 values at each end would be 256 KB a state, most of it empty).
 */
#include "postgres.h"

#include <float.h>
#include <math.h>

#include "catalog/pg_type.h"
#include "common/int.h"
#include "fmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/datetime.h"
#include "utils/float.h"
#include "utils/fmgrprotos.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "pg_kde.h"

PG_MODULE_MAGIC;

#define CELLS_MAGIC 0x4345444bu /* "KDEC" */
#define CELLS_VERSION 3
/* the most cell values a state keeps at each end (the smallest and the largest): 256 KB of heaps */
#define TAIL_MOST 16384
/* the tail of a call without one: a database whose SQL is older than this library (0.30.0's four-argument
 * aggregate, between installing the files and ALTER EXTENSION pg_kde UPDATE) reads its argument array only
 * as far as it goes */
#define TAIL_DEFAULT 256
/* the heaps' first room */
#define CAP_FIRST 256
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
	int32		n_low;			/* values in the heaps (at most tail each) */
	int32		n_high;
	int32		tail;			/* cell values kept at each end, at most */
	int32		cap;			/* the heaps' room now: CAP_FIRST doubled as they fill, at most tail */
} CellsHeader;

/* Pointers into a state's bytea. */
typedef struct CellsState
{
	CellsHeader *h;
	double	   *grid;
	double	   *candidates;
	int64	   *rows;
	int64	   *quanta;			/* (low, high) pairs of int128 sums */
	int64	   *candidate_rows;
	double	   *low;			/* max-heap of the smallest cell values */
	double	   *high;			/* min-heap of the largest */
} CellsState;

#define STATE_PAD 4

PG_FUNCTION_INFO_V1(kde_float8);
PG_FUNCTION_INFO_V1(kde_numeric_coarse_sql);
PG_FUNCTION_INFO_V1(kde_next_float8);
PG_FUNCTION_INFO_V1(kde_ieee_add);
PG_FUNCTION_INFO_V1(kde_numeric_bound);
PG_FUNCTION_INFO_V1(kde_float8_timestamp);
PG_FUNCTION_INFO_V1(kde_float8_date);
PG_FUNCTION_INFO_V1(kde_cells_step_float8);
PG_FUNCTION_INFO_V1(kde_cells_step_numeric);
PG_FUNCTION_INFO_V1(kde_cells_step_timestamp);
PG_FUNCTION_INFO_V1(kde_cells_step_date);
PG_FUNCTION_INFO_V1(kde_cells_combine);

/* Grid points and candidates a state may hold: its size stays far below MaxAllocSize. */
#define STATE_LIMIT (MaxAllocSize / 64)

static Size
state_size(int m, int k, int cap)
{
	return VARHDRSZ + STATE_PAD + sizeof(CellsHeader) + sizeof(double) * ((Size) m + (Size) k) +
		3 * sizeof(int64) * ((Size) m - 1) + sizeof(int64) * (Size) k + 2 * sizeof(double) * (Size) cap;
}

/* Whether b is a whole, well-formed state of this version, 8-byte aligned (so view() may read it). */
static bool
state_ok(const bytea *b)
{
	const CellsHeader *h;

	if (VARATT_IS_EXTENDED(b) || ((uintptr_t) b) % sizeof(int64) != 0 ||
		VARSIZE(b) < VARHDRSZ + STATE_PAD + sizeof(CellsHeader))
		return false;
	h = (const CellsHeader *) ((const char *) b + VARHDRSZ + STATE_PAD);
	return h->magic == CELLS_MAGIC && h->version == CELLS_VERSION && h->m >= 2 && h->m <= STATE_LIMIT &&
		h->k >= 0 && h->k <= STATE_LIMIT && h->tail >= 1 && h->tail <= TAIL_MOST && h->cap >= 1 &&
		h->cap <= h->tail && h->n_low >= 0 && h->n_low <= h->cap && h->n_high >= 0 && h->n_high <= h->cap &&
		VARSIZE(b) == state_size(h->m, h->k, h->cap);
}

/* The header of a state's bytea (its size and arrays need not be set yet: view() reads them from it). */
static inline CellsHeader *
header_of(bytea *b)
{
	return (CellsHeader *) ((char *) b + VARHDRSZ + STATE_PAD);
}

static bytea *state_copy(bytea *from, MemoryContext context);

/* The pointers into a state whose bytes start 8-byte aligned (palloc'd by this file). */
static void
view(bytea *b, CellsState *s)
{
	char	   *p = (char *) b + VARHDRSZ + STATE_PAD;

	s->h = (CellsHeader *) p;
	p += sizeof(CellsHeader);
	s->grid = (double *) p;
	p += sizeof(double) * s->h->m;
	s->candidates = (double *) p;
	p += sizeof(double) * s->h->k;
	s->rows = (int64 *) p;
	p += sizeof(int64) * (s->h->m - 1);
	s->quanta = (int64 *) p;
	p += 2 * sizeof(int64) * (s->h->m - 1);
	s->candidate_rows = (int64 *) p;
	p += sizeof(int64) * s->h->k;
	s->low = (double *) p;
	p += sizeof(double) * s->h->cap;
	s->high = (double *) p;
}

/*
 * The state with room for twice the heaps' values (at most the tail), where they are full and the tail allows
 * more: a copy in the current memory (the transition and combine functions return it; PostgreSQL keeps a copy
 * of a value that is not the one it passed in, and frees that one), else b itself. *s views the result.
 */
static bytea *
room_for_one_more(bytea *b, CellsState *s)
{
	bytea	   *bigger;
	CellsState	t;
	int			cap;
	Size		head;

	if ((s->h->n_low < s->h->cap && s->h->n_high < s->h->cap) || s->h->cap >= s->h->tail)
		return b;
	cap = Min(s->h->tail, 2 * s->h->cap);
	bigger = palloc0(state_size(s->h->m, s->h->k, cap));
	SET_VARSIZE(bigger, state_size(s->h->m, s->h->k, cap));
	head = (const char *) s->low - (const char *) b;	/* everything before the heaps */
	memcpy((char *) bigger + VARHDRSZ, (const char *) b + VARHDRSZ, head - VARHDRSZ);
	header_of(bigger)->cap = cap;
	view(bigger, &t);
	memcpy(t.low, s->low, sizeof(double) * s->h->n_low);
	memcpy(t.high, s->high, sizeof(double) * s->h->n_high);
	*s = t;
	return bigger;
}

/*
 * Keep v among the `room` smallest (small: a max-heap, its root the largest kept) or largest (a min-heap)
 * values seen: pushed while the heap has room, else put in the root's place when it beats the root. *n is
 * the heap's size.
 */
static void
keep_extreme(double *heap, int32 *n, int32 room, double v, bool small)
{
	int			i;

#define WORSE(a, b) (small ? (a) > (b) : (a) < (b))	/* a is farther from the end kept than b */
	if (*n < room)
	{
		i = (*n)++;
		while (i > 0 && WORSE(v, heap[(i - 1) / 2]))
		{
			heap[i] = heap[(i - 1) / 2];
			i = (i - 1) / 2;
		}
		heap[i] = v;
		return;
	}
	if (!WORSE(heap[0], v))
		return;
	i = 0;
	for (;;)
	{
		int			child = 2 * i + 1;

		if (child >= *n)
			break;
		if (child + 1 < *n && WORSE(heap[child + 1], heap[child]))
			child++;
		if (!WORSE(heap[child], v))
			break;
		heap[i] = heap[child];
		i = child;
	}
	heap[i] = v;
#undef WORSE
}

void
kde_add_quanta(int64 *pair, __int128 x)
{
	__int128	v = ((__int128) pair[1] << 64) | (unsigned __int128) (uint64) pair[0];

	v += x;
	pair[0] = (int64) (uint64) v;
	pair[1] = (int64) (v >> 64);
}

/* A float8[] argument's values: one dimension, no NULLs, finite, ascending (non-decreasing for the grid,
 * strictly for candidates). */
double *
kde_sorted_array(ArrayType *a, const char *what, int min_len, bool strict, int *len)
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

static bytea *
state_new(FunctionCallInfo fcinfo, MemoryContext context)
{
	bytea	   *b;
	CellsState	s;
	double	   *grid,
			   *candidates;
	int			m,
				k,
				tail,
				cap;
	double		quantum;

	if (PG_ARGISNULL(2) || PG_ARGISNULL(3) || PG_ARGISNULL(4) || (PG_NARGS() > 5 && PG_ARGISNULL(5)))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						errmsg("pg_kde: _kde_cells needs a grid, candidates, a quantum and a tail")));
	grid = kde_sorted_array(PG_GETARG_ARRAYTYPE_P(2), "the grid", 2, false, &m);
	candidates = kde_sorted_array(PG_GETARG_ARRAYTYPE_P(3), "the candidates", 0, true, &k);
	quantum = PG_GETARG_FLOAT8(4);
	tail = PG_NARGS() > 5 ? PG_GETARG_INT32(5) : TAIL_DEFAULT;
	if (tail < 1 || tail > TAIL_MOST)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("pg_kde: the tail must be from 1 to %d cell values, not %d", TAIL_MOST, tail)));
	if (m > STATE_LIMIT || k > STATE_LIMIT)
		ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						errmsg("pg_kde: at most %d grid points and candidates", (int) STATE_LIMIT)));
	if (!(quantum > 0) || !isfinite(quantum))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("pg_kde: the quantum must be positive and finite")));
	cap = Min(tail, CAP_FIRST);
	b = MemoryContextAllocZero(context, state_size(m, k, cap));
	SET_VARSIZE(b, state_size(m, k, cap));
	header_of(b)->m = m;
	header_of(b)->k = k;
	header_of(b)->tail = tail;
	header_of(b)->cap = cap;
	view(b, &s);
	s.h->magic = CELLS_MAGIC;
	s.h->version = CELLS_VERSION;
	s.h->quantum = quantum;
	s.h->lo = s.h->hi = s.h->all_lo = s.h->all_hi = get_float8_nan();
	memcpy(s.grid, grid, sizeof(double) * m);
	if (k > 0)
		memcpy(s.candidates, candidates, sizeof(double) * k);
	return b;
}

void
kde_widen(double *lo, double *hi, double v)
{
	if (isnan(*lo) || v < *lo)
		*lo = v;
	if (isnan(*hi) || v > *hi)
		*hi = v;
}

int
kde_cell_of(const double *grid, int m, double v)
{
	int			lo = 0,
				hi = m;

	while (lo < hi)
	{
		int			mid = (lo + hi) / 2;

		if (grid[mid] <= v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return Min(Max(lo - 1, 0), m - 2);
}

/* Count one value (float8 epoch seconds for time types); the state, b or a copy with more room (*s views it). */
static bytea *
add_value(bytea *b, CellsState *s, double v)
{
	int			lo,
				hi,
				c;
	double		t,
				r;

	s->h->non_null++;
	if (!isfinite(v))
	{
		s->h->non_finite++;
		return b;
	}
	kde_widen(&s->h->all_lo, &s->h->all_hi, v);
	if (v != trunc(v))
		s->h->non_integral++;
	/* a candidate: binary search of the sorted candidates */
	lo = 0;
	hi = s->h->k;
	while (lo < hi)
	{
		int			mid = (lo + hi) / 2;

		if (s->candidates[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < s->h->k && s->candidates[lo] == v)
	{
		s->candidate_rows[lo]++;
		return b;
	}
	/* its cell: the number of grid points <= v, less one, clamped to the cells */
	c = kde_cell_of(s->grid, s->h->m, v);
	s->rows[c]++;
	kde_widen(&s->h->lo, &s->h->hi, v);
	b = room_for_one_more(b, s);
	keep_extreme(s->low, &s->h->n_low, s->h->cap, v, true);
	keep_extreme(s->high, &s->h->n_high, s->h->cap, v, false);
	t = v / s->h->quantum;
	r = rint(t);
	if (!kde_on_lattice(v, s->h->quantum))
		s->h->off_lattice++;
	if (fabs(r) >= QUANTA_LIMIT)
		s->h->overflow++;
	else
		kde_add_quanta(&s->quanta[2 * c], (__int128) (int64) r);
	return b;
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

/* A numeric's layout: special (NaN, +-Infinity: its header), else its sign, weight and base-10000 digits. */
typedef struct NumericDigits
{
	uint16		header;
	bool		special;
	bool		negative;
	int			weight;
	int			ndigits;
	const char *digits;			/* ndigits int16s, unaligned */
} NumericDigits;

static NumericDigits
numeric_digits(Datum datum)
{
	struct varlena *num = PG_DETOAST_DATUM_PACKED(datum);
	const char *p = VARDATA_ANY(num);
	Size		size = VARSIZE_ANY_EXHDR(num);
	NumericDigits d;

	memcpy(&d.header, p, sizeof(d.header));
	d.special = (d.header & NUMERIC_SIGN_MASK) == NUMERIC_SPECIAL;
	d.negative = false;
	d.weight = 0;
	d.ndigits = 0;
	d.digits = NULL;
	if (d.special)
		return d;
	if (d.header & NUMERIC_SHORT)
	{
		d.negative = (d.header & NUMERIC_SHORT_SIGN_MASK) != 0;
		d.weight = (d.header & NUMERIC_SHORT_WEIGHT_SIGN_MASK) ? (int) (~NUMERIC_SHORT_WEIGHT_MASK | (d.header & NUMERIC_SHORT_WEIGHT_MASK))
			: (int) (d.header & NUMERIC_SHORT_WEIGHT_MASK);
		p += sizeof(uint16);
		size -= sizeof(uint16);
	}
	else
	{
		int16		w;

		d.negative = (d.header & NUMERIC_SIGN_MASK) == NUMERIC_NEG;
		memcpy(&w, p + sizeof(uint16), sizeof(w));
		d.weight = w;
		p += sizeof(uint16) + sizeof(int16);
		size -= sizeof(uint16) + sizeof(int16);
	}
	d.ndigits = size / sizeof(int16);
	d.digits = p;
	return d;
}

static int16
digit_at(const NumericDigits *d, int i)
{
	int16		v;

	memcpy(&v, d->digits + i * sizeof(int16), sizeof(v));
	return v;
}

static int	decimal_digits(int v);

/* The decimal exponent of a numeric's leading digit: 10^e <= |value| < 10^(e + 1) (not for zero). */
static int
leading_exponent(const NumericDigits *d)
{
	return 4 * d->weight + decimal_digits(digit_at(d, 0)) - 1;
}

/*
 * numeric -> float8 as numeric's own cast: the value is N * 10^e with N the base-10000 digits as an integer;
 * where N < 2^53 and |e| <= 22 both are exact float8s and one multiplication or division rounds correctly;
 * otherwise the decimal text as float8 input reads it. Beyond float8's range: with out_of_range, that is set
 * (and the result is 0); without, an error that says so (the cast's own message prints every digit: 1e400's 401).
 */
static double
numeric_to_double(Datum datum, bool *out_of_range)
{
	NumericDigits d = numeric_digits(datum);
	int64		n = 0;
	int			i,
				e;
	double		v;
	char	   *text;
	bool		bad = false;

	if (d.special)
		return d.header == NUMERIC_PINF ? get_float8_infinity() :
			d.header == NUMERIC_NINF ? -get_float8_infinity() : get_float8_nan();
	if (d.ndigits == 0)
		return 0.0;
	for (i = 0; i < d.ndigits && n < (EXACT_INTEGER_LIMIT - 9999) / 10000; i++)
		n = n * 10000 + digit_at(&d, i);
	e = 4 * (d.weight - d.ndigits + 1);
	if (i == d.ndigits && e <= 22 && e >= -22)
	{
		v = e >= 0 ? (double) n * powers_of_ten[e] : (double) n / powers_of_ten[-e];
		return d.negative ? -v : v;
	}
	text = DatumGetCString(DirectFunctionCall1(numeric_out, datum));
	v = float8in_internal_opt_error(text, NULL, "double precision", text, &bad);
	if (bad && out_of_range != NULL)
		*out_of_range = true;
	else if (bad)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("pg_kde: a numeric value of magnitude about 1e%d is beyond float8's range",
						leading_exponent(&d)),
				 errdetail("Synopses keep values as float8s: from about 4.9e-324 to 1.8e308 in magnitude."),
				 errhint("Leave such rows out, e.g. refresh a view that filters them, or scale the column.")));
	return bad ? 0.0 : v;
}

double
kde_numeric_to_double(Datum datum)
{
	return numeric_to_double(datum, NULL);
}

/*
 * _kde_numeric_coarse(numeric): whether the float8 a synopsis keeps of this value may also stand for another
 * numeric (docs/math.md §7, "Values float8 cannot tell apart"). A decimal of at most 15 significant digits
 * (DBL_DIG) whose magnitude float8 holds as a normal number reads back from its float8, so no two of them share
 * one; a longer one, or one of magnitude below 1e-307 or from 1e308, may. Zero, NaN and +-Infinity are their
 * float8s. The refresh's scan of a numeric column counts the rows it is true of: about 10 ns a row with its
 * call (2 million rows).
 */
#define FAITHFUL_DIGITS 15

static int
decimal_digits(int v)
{
	return v >= 1000 ? 4 : v >= 100 ? 3 : v >= 10 ? 2 : 1;
}

static bool
kde_numeric_coarse(Datum datum)
{
	NumericDigits d = numeric_digits(datum);
	int			first,
				last,
				digits,
				exponent;

	if (d.special || d.ndigits == 0)
		return false;
	first = digit_at(&d, 0);
	last = digit_at(&d, d.ndigits - 1);
	digits = decimal_digits(first) + 4 * (d.ndigits - 1);
	for (int v = last; v % 10 == 0 && v > 0; v /= 10)
		digits--;				/* trailing zeros of the last group */
	exponent = leading_exponent(&d);
	return digits > FAITHFUL_DIGITS || exponent <= -308 || exponent >= 308;
}

Datum
kde_numeric_coarse_sql(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(kde_numeric_coarse(PG_GETARG_DATUM(0)));
}

/*
 * _kde_numeric_bound(numeric): a numeric bound as a synopsis reads it (0.30.0): its float8 (as the cast), and
 * where float8 input refuses it, beyond its range (from float8's largest plus half an ulp, which rounds past
 * it), +-Infinity, or below half its smallest subnormal, +-0: past every value a synopsis holds (its refresh
 * refuses such values), or on the zero side of every nonzero one.
 */
Datum
kde_numeric_bound(PG_FUNCTION_ARGS)
{
	Datum		datum = PG_GETARG_DATUM(0);
	bool		out_of_range = false;
	double		v = numeric_to_double(datum, &out_of_range);
	NumericDigits d;

	if (!out_of_range)
		PG_RETURN_FLOAT8(v);
	d = numeric_digits(datum);
	v = leading_exponent(&d) > 0 ? get_float8_infinity() : 0.0;
	PG_RETURN_FLOAT8(d.negative ? -v : v);
}

/* _kde_ieee_add(x, y): x + y as IEEE 754 adds them (PostgreSQL's float8 + raises an error on overflow). */
Datum
kde_ieee_add(PG_FUNCTION_ARGS)
{
	PG_RETURN_FLOAT8(PG_GETARG_FLOAT8(0) + PG_GETARG_FLOAT8(1));
}

/* _kde_next_float8(x, up): the float8 next to x, above it where up, below it otherwise (C's nextafter). */
Datum
kde_next_float8(PG_FUNCTION_ARGS)
{
	float8		x = PG_GETARG_FLOAT8(0);

	PG_RETURN_FLOAT8(nextafter(x, PG_GETARG_BOOL(1) ? get_float8_infinity() : -get_float8_infinity()));
}

Datum
kde_float8(PG_FUNCTION_ARGS)
{
	PG_RETURN_FLOAT8(kde_numeric_to_double(PG_GETARG_DATUM(0)));
}

/* _kde_value of the time types: epoch seconds, as the scan reads them (a date's midnight, UTC). */
Datum
kde_float8_timestamp(PG_FUNCTION_ARGS)
{
	PG_RETURN_FLOAT8(kde_epoch_seconds(PG_GETARG_TIMESTAMP(0)));
}

Datum
kde_float8_date(PG_FUNCTION_ARGS)
{
	PG_RETURN_FLOAT8(kde_date_seconds(PG_GETARG_DATEADT(0)));
}

/* The state of a transition call, created at the first row. */
static bytea *
step_state(FunctionCallInfo fcinfo, CellsState *s)
{
	MemoryContext context;
	bytea	   *b;

	if (!AggCheckCallContext(fcinfo, &context))
		elog(ERROR, "_kde_cells called in a non-aggregate context");
	/* A new state (or a copy) is made in the per-call memory: PostgreSQL copies a transition value that is
	 * not the one it passed in into the aggregate's memory, and keeps only that copy. */
	if (PG_ARGISNULL(0))
		b = state_new(fcinfo, CurrentMemoryContext);
	else
	{
		/* This aggregate's own state; anything else (a crafted initial value) is checked, and copied. */
		b = (bytea *) PG_GETARG_POINTER(0);
		if (!state_ok(b))
			b = state_copy(PG_GETARG_BYTEA_PP(0), CurrentMemoryContext);
	}
	view(b, s);
	return b;
}

Datum
kde_cells_step_float8(PG_FUNCTION_ARGS)
{
	CellsState	s;
	bytea	   *b = step_state(fcinfo, &s);

	if (!PG_ARGISNULL(1))
		b = add_value(b, &s, PG_GETARG_FLOAT8(1));
	PG_RETURN_BYTEA_P(b);
}

Datum
kde_cells_step_numeric(PG_FUNCTION_ARGS)
{
	CellsState	s;
	bytea	   *b = step_state(fcinfo, &s);

	if (!PG_ARGISNULL(1))
		b = add_value(b, &s, kde_numeric_to_double(PG_GETARG_DATUM(1)));
	PG_RETURN_BYTEA_P(b);
}

/* Epoch seconds of a timestamp or timestamptz, as extract(epoch from ...)::float8 reads them: the exact
 * decimal microseconds rounded once to float8. */
double
kde_epoch_seconds(Timestamp ts)
{
	int64		us;

	if (TIMESTAMP_IS_NOBEGIN(ts))
		return -get_float8_infinity();
	if (TIMESTAMP_IS_NOEND(ts))
		return get_float8_infinity();
	if (pg_add_s64_overflow(ts, (int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY, &us))
	{
		/* past int64 microseconds since 1970 (about year 294247): whole seconds and the fraction apart */
		char	   *text = psprintf("%lld.%06lld", (long long) (ts / 1000000 + (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY),
									(long long) (ts % 1000000));

		return float8in_internal(text, NULL, "double precision", text);
	}
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
	CellsState	s;
	bytea	   *b = step_state(fcinfo, &s);

	if (!PG_ARGISNULL(1))
		b = add_value(b, &s, kde_epoch_seconds(PG_GETARG_TIMESTAMP(1)));
	PG_RETURN_BYTEA_P(b);
}

Datum
kde_cells_step_date(PG_FUNCTION_ARGS)
{
	CellsState	s;
	bytea	   *b = step_state(fcinfo, &s);

	if (!PG_ARGISNULL(1))
		b = add_value(b, &s, kde_date_seconds(PG_GETARG_DATEADT(1)));
	PG_RETURN_BYTEA_P(b);
}

/* Epoch seconds of a date's midnight, UTC (its infinities as float8's). */
double
kde_date_seconds(DateADT d)
{
	if (DATE_IS_NOBEGIN(d))
		return -get_float8_infinity();
	if (DATE_IS_NOEND(d))
		return get_float8_infinity();
	return ((double) d + (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE)) * SECS_PER_DAY;
}

/* A state from anywhere (a worker, a shard), copied to 8-byte-aligned memory of the context and checked. */
static bytea *
state_copy(bytea *from, MemoryContext context)
{
	Size		size = VARSIZE_ANY_EXHDR(from);
	bytea	   *b = MemoryContextAlloc(context, VARHDRSZ + size);

	memcpy(VARDATA(b), VARDATA_ANY(from), size);
	SET_VARSIZE(b, VARHDRSZ + size);
	if (!state_ok(b))
		ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED),
						errmsg("pg_kde: not a _kde_cells state of this version")));
	return b;
}

Datum
kde_cells_combine(PG_FUNCTION_ARGS)
{
	MemoryContext context;
	bytea	   *a;
	CellsState	sa,
				sb;

	if (!AggCheckCallContext(fcinfo, &context))
		elog(ERROR, "_kde_cells combine called in a non-aggregate context");
	if (PG_ARGISNULL(1))
	{
		if (PG_ARGISNULL(0))	/* both empty (a worker or shard that read no row): still empty */
			PG_RETURN_NULL();
		PG_RETURN_DATUM(PG_GETARG_DATUM(0));
	}
	if (PG_ARGISNULL(0))
		PG_RETURN_BYTEA_P(state_copy(PG_GETARG_BYTEA_PP(1), CurrentMemoryContext));
	/* Normally this function's own value (a state_copy); a state another planner handed over (Citus's
	 * combine starts from a copy of the first partial state) is copied once into the aggregate's memory. */
	a = (bytea *) PG_GETARG_POINTER(0);
	if (!state_ok(a))
		a = state_copy(PG_GETARG_BYTEA_PP(0), CurrentMemoryContext);
	view(a, &sa);
	view(state_copy(PG_GETARG_BYTEA_PP(1), CurrentMemoryContext), &sb);
	if (sa.h->m != sb.h->m || sa.h->k != sb.h->k || sa.h->quantum != sb.h->quantum || sa.h->tail != sb.h->tail ||
		memcmp(sa.grid, sb.grid, sizeof(double) * sa.h->m) != 0 ||
		(sa.h->k > 0 && memcmp(sa.candidates, sb.candidates, sizeof(double) * sa.h->k) != 0))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("pg_kde: _kde_cells states of different grids, candidates, quanta or tails do not combine")));
	sa.h->non_null += sb.h->non_null;
	sa.h->non_finite += sb.h->non_finite;
	sa.h->off_lattice += sb.h->off_lattice;
	sa.h->non_integral += sb.h->non_integral;
	sa.h->overflow += sb.h->overflow;
	if (!isnan(sb.h->lo))
		kde_widen(&sa.h->lo, &sa.h->hi, sb.h->lo), kde_widen(&sa.h->lo, &sa.h->hi, sb.h->hi);
	if (!isnan(sb.h->all_lo))
		kde_widen(&sa.h->all_lo, &sa.h->all_hi, sb.h->all_lo), kde_widen(&sa.h->all_lo, &sa.h->all_hi, sb.h->all_hi);
	for (int c = 0; c < sa.h->m - 1; c++)
	{
		sa.rows[c] += sb.rows[c];
		kde_add_quanta(&sa.quanta[2 * c], ((__int128) sb.quanta[2 * c + 1] << 64) | (unsigned __int128) (uint64) sb.quanta[2 * c]);
	}
	for (int i = 0; i < sa.h->k; i++)
		sa.candidate_rows[i] += sb.candidate_rows[i];
	for (int i = 0; i < Max(sb.h->n_low, sb.h->n_high); i++)
	{
		a = room_for_one_more(a, &sa);
		if (i < sb.h->n_low)
			keep_extreme(sa.low, &sa.h->n_low, sa.h->cap, sb.low[i], true);
		if (i < sb.h->n_high)
			keep_extreme(sa.high, &sa.h->n_high, sa.h->cap, sb.high[i], false);
	}
	PG_RETURN_BYTEA_P(a);
}
