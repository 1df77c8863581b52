/*
 * pg_kde's refresh sample: the aggregate _kde_sample(value, row, table, share, seed), one parallel pass that keeps
 * each row with probability `share` by a hash of its ctid and the seed (splitmix64's finalizer) (the same rows for unchanged data,
 * whatever order the scan reads them in), and counts the column's facts over every row: non-NULL and
 * non-finite values, the min and max of the finite ones. The grid of a 1-D synopsis is then placed over
 * the column's true range (docs/math.md §7), and errors (no values, NaN) are found before the scan.
 *
 * The state is a bytea with a combine function, as _kde_cells' (cells.c): parallel query and Citus run it
 * on every core and shard. Layout, in the server's byte order:
 *   4 bytes of padding | header (struct SampleHeader) | sampled values[n] float8 (capacity: cap)
 * The sampled values are in no particular order; pg_kde.synopsis.reader.thin sorts them.
 */
#include "postgres.h"

#include <math.h>

#include "fmgr.h"
#include "storage/itemptr.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/datetime.h"
#include "utils/float.h"
#include "utils/timestamp.h"

#include "pg_kde.h"

#define SAMPLE_MAGIC 0x5345444bu	/* "KDES" */
#define SAMPLE_VERSION 1
#define SAMPLE_PAD 4
/* Samples larger than this many values are refused (the caller asks for ~1.25 x its sample size). */
#define SAMPLE_LIMIT (64 * 1024 * 1024 / (int) sizeof(double))

typedef struct SampleHeader
{
	uint32		magic;
	uint32		version;
	int32		n;				/* values kept */
	int32		cap;			/* room for values */
	int64		non_null;
	int64		non_finite;
	double		lo;				/* min and max of the finite values (NaN when none) */
	double		hi;
} SampleHeader;


PG_FUNCTION_INFO_V1(kde_sample_step_float8);
PG_FUNCTION_INFO_V1(kde_sample_step_numeric);
PG_FUNCTION_INFO_V1(kde_sample_step_timestamp);
PG_FUNCTION_INFO_V1(kde_sample_step_date);
PG_FUNCTION_INFO_V1(kde_sample_combine);

static Size
sample_size(int cap)
{
	return VARHDRSZ + SAMPLE_PAD + sizeof(SampleHeader) + sizeof(double) * (Size) cap;
}

static SampleHeader *
header_of(bytea *b)
{
	return (SampleHeader *) ((char *) b + VARHDRSZ + SAMPLE_PAD);
}

static double *
values_of(bytea *b)
{
	return (double *) ((char *) b + VARHDRSZ + SAMPLE_PAD + sizeof(SampleHeader));
}

static bytea *
sample_new(MemoryContext context, int cap)
{
	bytea	   *b = MemoryContextAllocZero(context, sample_size(cap));
	SampleHeader *h = header_of(b);

	SET_VARSIZE(b, sample_size(cap));
	h->magic = SAMPLE_MAGIC;
	h->version = SAMPLE_VERSION;
	h->cap = cap;
	h->lo = h->hi = get_float8_nan();
	return b;
}

/* The state with room for `more` values: itself, or a copy twice as large in the aggregate's memory. */
static bytea *
with_room(bytea *b, int more, MemoryContext context)
{
	SampleHeader *h = header_of(b);
	bytea	   *bigger;
	int			cap;

	if (h->n + more <= h->cap)
		return b;
	if (h->n + more > SAMPLE_LIMIT)
		ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						errmsg("pg_kde: a sample of more than %d values", SAMPLE_LIMIT)));
	cap = Min(Max(2 * h->cap, h->n + more), SAMPLE_LIMIT);
	bigger = sample_new(context, cap);
	memcpy(header_of(bigger), h, sizeof(SampleHeader));
	header_of(bigger)->cap = cap;
	memcpy(values_of(bigger), values_of(b), sizeof(double) * h->n);
	return bigger;
}

static void
widen(SampleHeader *h, double lo, double hi)
{
	if (isnan(h->lo) || lo < h->lo)
		h->lo = lo;
	if (isnan(h->hi) || hi > h->hi)
		h->hi = hi;
}

/* Whether b is a whole state of this version, 8-byte aligned, whose values fit in it. */
static bool
sample_ok(const bytea *b)
{
	const SampleHeader *h;

	if (VARATT_IS_EXTENDED(b) || ((uintptr_t) b) % sizeof(int64) != 0 ||
		VARSIZE(b) < VARHDRSZ + SAMPLE_PAD + sizeof(SampleHeader))
		return false;
	h = (const SampleHeader *) ((const char *) b + VARHDRSZ + SAMPLE_PAD);
	return h->magic == SAMPLE_MAGIC && h->version == SAMPLE_VERSION && h->n >= 0 && h->cap >= h->n &&
		h->cap <= SAMPLE_LIMIT && VARSIZE(b) == sample_size(h->cap);
}

static bytea *sample_copy(bytea *from, int more, MemoryContext context);

/* Whether the sample keeps a row: splitmix64's finalizer of its table, position and the seed, a well-mixed
 * 64-bit number (the table too: a partitioned or distributed table's parts hold the same positions), as a
 * uniform 53-bit number under share. */
bool
kde_keep_row(ItemPointer tid, Oid table, double share, int64 seed)
{
	uint64		hash;

	hash = (((uint64) ItemPointerGetBlockNumberNoCheck(tid) << 16) | ItemPointerGetOffsetNumberNoCheck(tid))
		+ ((uint64) table << 48) + (uint64) seed * UINT64CONST(0x9E3779B97F4A7C15);
	hash = (hash ^ (hash >> 30)) * UINT64CONST(0xBF58476D1CE4E5B9);
	hash = (hash ^ (hash >> 27)) * UINT64CONST(0x94D049BB133111EB);
	hash ^= hash >> 31;
	return (double) (hash >> 11) < share * 9007199254740992.0;
}

/* One row: its value (NULL: absent), counted; kept when its ctid's hash falls under share. */
static Datum
sample_step(FunctionCallInfo fcinfo, bool isnull, double v)
{
	MemoryContext context;
	bytea	   *b;
	SampleHeader *h;

	if (!AggCheckCallContext(fcinfo, &context))
		elog(ERROR, "_kde_sample called in a non-aggregate context");
	/* New and grown states are made in the per-call memory: PostgreSQL copies a transition value that is not
	 * the one it passed in into the aggregate's memory, and keeps only that copy. */
	if (PG_ARGISNULL(0))
		b = sample_new(CurrentMemoryContext, 1024);
	else
	{
		/* This aggregate's own state; anything else (a crafted initial value) is checked, and copied. */
		b = (bytea *) PG_GETARG_POINTER(0);
		if (!sample_ok(b))
			b = sample_copy(PG_GETARG_BYTEA_PP(0), 0, CurrentMemoryContext);
	}
	if (isnull)
		PG_RETURN_BYTEA_P(b);
	h = header_of(b);
	h->non_null++;
	if (!isfinite(v))
	{
		h->non_finite++;
		PG_RETURN_BYTEA_P(b);
	}
	widen(h, v, v);
	if (!PG_ARGISNULL(2) && !PG_ARGISNULL(3) && !PG_ARGISNULL(4) && !PG_ARGISNULL(5))
	{
		if (kde_keep_row((ItemPointer) PG_GETARG_POINTER(2), PG_GETARG_OID(3), PG_GETARG_FLOAT8(4),
						 PG_GETARG_INT64(5)))
		{
			b = with_room(b, 1, CurrentMemoryContext);
			h = header_of(b);
			values_of(b)[h->n++] = v;
		}
	}
	PG_RETURN_BYTEA_P(b);
}

Datum
kde_sample_step_float8(PG_FUNCTION_ARGS)
{
	return sample_step(fcinfo, PG_ARGISNULL(1), PG_ARGISNULL(1) ? 0.0 : PG_GETARG_FLOAT8(1));
}

Datum
kde_sample_step_numeric(PG_FUNCTION_ARGS)
{
	return sample_step(fcinfo, PG_ARGISNULL(1), PG_ARGISNULL(1) ? 0.0 : kde_numeric_to_double(PG_GETARG_DATUM(1)));
}

Datum
kde_sample_step_timestamp(PG_FUNCTION_ARGS)
{
	return sample_step(fcinfo, PG_ARGISNULL(1), PG_ARGISNULL(1) ? 0.0 : kde_epoch_seconds(PG_GETARG_TIMESTAMP(1)));
}

Datum
kde_sample_step_date(PG_FUNCTION_ARGS)
{
	double		v = 0.0;

	if (!PG_ARGISNULL(1))
	{
		DateADT		d = PG_GETARG_DATEADT(1);

		v = DATE_IS_NOBEGIN(d) ? -get_float8_infinity() : DATE_IS_NOEND(d) ? get_float8_infinity()
			: ((double) d + (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE)) * SECS_PER_DAY;
	}
	return sample_step(fcinfo, PG_ARGISNULL(1), v);
}

/* A state from anywhere, checked and copied into aligned memory of the context with room for `more`. */
static bytea *
sample_copy(bytea *from, int more, MemoryContext context)
{
	Size		size = VARSIZE_ANY_EXHDR(from);
	SampleHeader h;
	bytea	   *b;

	if (size < SAMPLE_PAD + sizeof(SampleHeader))
		ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED), errmsg("pg_kde: not a _kde_sample state")));
	memcpy(&h, VARDATA_ANY(from) + SAMPLE_PAD, sizeof(SampleHeader));
	if (h.magic != SAMPLE_MAGIC || h.version != SAMPLE_VERSION || h.n < 0 || h.cap < h.n || h.n > SAMPLE_LIMIT ||
		size < SAMPLE_PAD + sizeof(SampleHeader) + sizeof(double) * (Size) h.n)
		ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED), errmsg("pg_kde: not a _kde_sample state of this version")));
	if (h.n + more > SAMPLE_LIMIT)
		ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						errmsg("pg_kde: a sample of more than %d values", SAMPLE_LIMIT)));
	b = sample_new(context, Max(h.n + more, 1));
	h.cap = Max(h.n + more, 1);
	memcpy(header_of(b), &h, sizeof(SampleHeader));
	memcpy(values_of(b), VARDATA_ANY(from) + SAMPLE_PAD + sizeof(SampleHeader), sizeof(double) * h.n);
	return b;
}

Datum
kde_sample_combine(PG_FUNCTION_ARGS)
{
	MemoryContext context;
	bytea	   *a,
			   *b;
	SampleHeader *ha,
			   *hb;

	if (!AggCheckCallContext(fcinfo, &context))
		elog(ERROR, "_kde_sample combine called in a non-aggregate context");
	if (PG_ARGISNULL(1))
	{
		if (PG_ARGISNULL(0))	/* both empty (a worker or shard that read no row): still empty */
			PG_RETURN_NULL();
		PG_RETURN_DATUM(PG_GETARG_DATUM(0));
	}
	b = sample_copy(PG_GETARG_BYTEA_PP(1), 0, CurrentMemoryContext);
	hb = header_of(b);
	if (PG_ARGISNULL(0))
		PG_RETURN_BYTEA_P(b);
	/* this function's own state, grown in place when it has room; anything else checked and copied */
	a = (bytea *) PG_GETARG_POINTER(0);
	a = sample_ok(a) ? with_room(a, hb->n, CurrentMemoryContext)
		: sample_copy(PG_GETARG_BYTEA_PP(0), hb->n, CurrentMemoryContext);
	ha = header_of(a);
	memcpy(values_of(a) + ha->n, values_of(b), sizeof(double) * hb->n);
	ha->n += hb->n;
	ha->non_null += hb->non_null;
	ha->non_finite += hb->non_finite;
	if (!isnan(hb->lo))
		widen(ha, hb->lo, hb->hi);
	PG_RETURN_BYTEA_P(a);
}
