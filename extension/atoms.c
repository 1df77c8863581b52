/*
 * Packed heavy values (the 1-D payload's atom_pack): a column's exact frequency table on its value lattice,
 * as lattice indices and counts, in adaptive Rice codes (format 2, written since 0.31.0) or varints (format 1,
 * still read). pg_kde.synopsis.packing is the reference and documents the
 * layout; this file reads and writes the same bytes:
 *   kde_unpack_atoms: the three arrays (values, cumulative counts, exact cumulative sums) of a pack;
 *     kde_unpack_atoms_kept, the same with the last pack's arrays kept for the next call, for _kde_range
 *     (range.c);
 *   _kde_atoms(s kde_synopsis): a payload row's heavy values as arrays, packed or not (the tracking triggers
 *     and the kde_synopses view read them so);
 *   _kde_atoms_pack(values, cum_count, step): the pack of heavy values, NULL where they do not pack (the
 *     tracking triggers store their new counts so);
 *   _kde_atom_count(pack): how many values a pack says it holds, NULL where its header is malformed (the
 *     kde_synopses view: one corrupt row does not hide the others);
 *   _kde_pair_box(pack, lattice1, lattice2, a1, b1, a2, b2, moment): what a box holds of a pair's exact
 *     frequency table (the 2-D payload's pair_pack, format 2: packing.pack_pairs), for _kde_box.
 * A malformed pack is an error (data_corrupted), never a read past its end.
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/typcache.h"

#include "pg_kde.h"

PG_FUNCTION_INFO_V1(kde_atoms);
PG_FUNCTION_INFO_V1(kde_atoms_pack);
PG_FUNCTION_INFO_V1(kde_atom_count);
PG_FUNCTION_INFO_V1(kde_pair_box);

#define PACK_VARINTS 1			/* written up to 0.30.0, still read */
#define PACK_RICE 2				/* written since 0.31.0 */
#define PAIR_FORMAT 2
#define RICE_RESET 8			/* packing.RICE_RESET */
#define RICE_ESCAPE 16			/* packing.RICE_ESCAPE */
#define PACK_LIMIT 9007199254740992.0	/* 2^53 */

/* A malformed pack: column is the payload's column that holds it (atom_pack, pair_pack). */
static void
corrupted(const char *column, const char *what)
{
	ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED),
					errmsg("pg_kde: the synopsis row's %s %s", column, what)));
}

/* The varint at *pos into *x, *pos moved past it; false where the bytes end first, it passes 64 bits, or it
 * is longer than its value needs (a last byte of 0 after others: the encoders never write one). */
static bool
read_varint(const unsigned char *data, int len, int *pos, uint64 *x)
{
	int			shift = 0;

	*x = 0;
	for (;;)
	{
		unsigned char b;

		if (*pos >= len || shift > 63)
			return false;
		b = data[(*pos)++];
		if (shift == 63 && (b & 0x7E))	/* (the tenth byte has room for one bit) */
			return false;
		*x |= (uint64) (b & 0x7F) << shift;
		if (!(b & 0x80))
			return !(b == 0 && shift > 0);
		shift += 7;
	}
}

static uint64
get_varint(const unsigned char *data, int len, int *pos, const char *column)
{
	uint64		x;

	if (!read_varint(data, len, pos, &x))
		corrupted(column, "is cut short or holds a varint past 64 bits or longer than its value");
	return x;
}

/* One stream's adaptive Rice parameter (packing._Rice): k = floor(log2(a / n)) in whole numbers, a the sum
 * of the stream's values and n their count plus one, both halved when n reaches RICE_RESET. a stays below
 * 2^57 (at most RICE_RESET values below 2^54 each). */
typedef struct RiceState
{
	uint64		a;
	uint64		n;
} RiceState;

static int
rice_k(const RiceState *state)
{
	int			k;

	/* floor(log2(floor(a / n))) is the largest k with n * 2^k <= a (0 where a < 2n): no division */
	if (state->a < 2 * state->n)
		return 0;
	k = __builtin_clzll(state->n) - __builtin_clzll(state->a);
	return (state->n << k) > state->a ? k - 1 : k;
}

static void
rice_update(RiceState *state, uint64 x)
{
	state->a += x;
	state->n += 1;
	if (state->n == RICE_RESET)
	{
		state->a >>= 1;
		state->n >>= 1;
	}
}

/* A bit stream read high bit first: up to 64 of its bits wait in buf, high first (avail of them; the bits
 * below are zero), the bytes from next on not yet loaded. */
typedef struct BitReader
{
	const unsigned char *data;
	int64		next;
	int64		bytes;
	uint64		buf;
	int			avail;
} BitReader;

static inline void
refill(BitReader *in)
{
	while (in->avail <= 56 && in->next < in->bytes)
	{
		in->buf |= (uint64) in->data[in->next++] << (56 - in->avail);
		in->avail += 8;
	}
}

/* The next width bits (0 to 63) as a number. */
static uint64
take_bits(BitReader *in, int width)
{
	uint64		x = 0;

	if (width > 56)				/* (an escape's bits: the high part first) */
	{
		x = take_bits(in, width - 32) << 32;
		width = 32;
	}
	refill(in);
	if (width > in->avail)
		corrupted("atom_pack", "is cut short");
	if (width > 0)
	{
		x |= in->buf >> (64 - width);
		in->buf <<= width;
		in->avail -= width;
	}
	return x;
}

/* The next Rice code of a stream, as packing._rice_entries reads it (only the encoder's own codes). */
static uint64
take_rice(BitReader *in, RiceState *state)
{
	int			k = rice_k(state),
				q;
	uint64		x;

	refill(in);
	q = ~in->buf ? __builtin_clzll(~in->buf) : 64;	/* the leading ones (the zero after them may lie past avail) */
	if (q < RICE_ESCAPE)
	{
		if (q >= in->avail)
			corrupted("atom_pack", "is cut short");
		in->buf <<= q + 1;
		in->avail -= q + 1;
		x = ((uint64) q << k) | take_bits(in, k);
	}
	else
	{
		int			b;

		(void) take_bits(in, RICE_ESCAPE);	/* (its ones) */
		b = (int) take_bits(in, 6);
		x = take_bits(in, b);
		if (b == 0 || (x >> (b - 1)) != 1 || (x >> k) < RICE_ESCAPE)
			corrupted("atom_pack", "holds a code the pack does not write");
	}
	if (x >= (uint64) 2 * (uint64) PACK_LIMIT)
		corrupted("atom_pack", "holds values past 2^53");
	rice_update(state, x);
	return x;
}

/* The most values a pack of format form holds in the left bytes after its count (packing._most_values). */
static uint64
most_values(int form, int left)
{
	if (left < 1)
		return 0;
	return form == PACK_VARINTS ? (uint64) left / 2 : (uint64) (8 * (int64) (left - 1) + 1) / 2;
}

int
kde_unpack_atoms(const char *bytes, int len, double step, double **values, double **counts, double **sums,
				 double **index_sums)
{
	const unsigned char *data = (const unsigned char *) bytes;
	int			pos = 1;
	uint64		n;
	int64		k = 0;
	__int128	total = 0,
				running = 0;
	BitReader	in = {0};
	RiceState	gaps = {0, 1},
				rows = {0, 1};

	if (len < 4 || (data[0] != PACK_VARINTS && data[0] != PACK_RICE))
		corrupted("atom_pack", "is not a pack of format 1 or 2");
	if (!(step > 0 && isfinite(step) && isfinite(1 / step)))
		corrupted("atom_pack", "needs a value lattice (step > 0)");
	n = get_varint(data, len, &pos, "atom_pack");
	if (n < 1 || n > most_values(data[0], len - pos))
		corrupted("atom_pack", "holds a wrong number of values");
	*values = palloc(sizeof(double) * n);
	*counts = palloc(sizeof(double) * n);
	*sums = palloc(sizeof(double) * n);
	if (index_sums)
		*index_sums = palloc(sizeof(double) * n);
	for (uint64 i = 0; i < n; i++)
	{
		uint64		d,
					c;

		if (i == 0 || data[0] == PACK_VARINTS)
			d = get_varint(data, len, &pos, "atom_pack");
		else
			d = take_rice(&in, &gaps) + 1;	/* (below 2^54 + 1) */
		if (i == 0)
		{
			if (d >= (uint64) 2 * (uint64) PACK_LIMIT)
				corrupted("atom_pack", "holds values past 2^53");
			k = (d % 2 == 0) ? (int64) (d / 2) : -(int64) ((d + 1) / 2);
			if (data[0] == PACK_RICE)
			{
				in.data = data + pos;
				in.bytes = len - pos;
			}
		}
		else if (d < 1 || d >= (uint64) 2 * (uint64) PACK_LIMIT)
			corrupted("atom_pack", d < 1 ? "holds values out of order" : "holds values past 2^53");
		else
			k += (int64) d;
		c = data[0] == PACK_VARINTS ? get_varint(data, len, &pos, "atom_pack") : take_rice(&in, &rows);
		if (c >= (uint64) PACK_LIMIT)
			corrupted("atom_pack", "holds values past 2^53");
		total += c;
		running += (__int128) c * k;
		if (fabs((double) k) >= PACK_LIMIT || total >= (__int128) PACK_LIMIT
			|| running >= (__int128) PACK_LIMIT || running <= -(__int128) PACK_LIMIT)
			corrupted("atom_pack", "holds values past 2^53");
		(*values)[i] = kde_lattice_value((double) k, step);
		/* (a step so small that lattice values coincide) */
		if (i > 0 && !((*values)[i] > (*values)[i - 1]))
			corrupted("atom_pack", "holds values out of order");
		(*counts)[i] = (double) total;
		(*sums)[i] = kde_lattice_value((double) running, step);
		if (index_sums)
			(*index_sums)[i] = (double) running;	/* (exact: |K| < 2^53) */
	}
	if (data[0] == PACK_RICE)
	{
		/* the padding: fewer than 8 bits, all zero */
		if (in.avail + 8 * (in.bytes - in.next) >= 8 || in.buf != 0)
			corrupted("atom_pack", "has bytes past its values");
	}
	else if (pos != len)
		corrupted("atom_pack", "has bytes past its values");
	return (int) n;
}

/* The last pack _kde_range decoded in this backend, with its arrays: a statement's calls, and a session's,
 * mostly read the same synopsis again, and the same bytes decode to the same arrays. Kept in a memory context
 * of its own for packs of at most CACHE_BYTES bytes and CACHE_VALUES values (a 16 KB synopsis' table; the
 * arrays take 512 KB at most, for the backend's life); the arrays are read, never written, by the callers.
 * Only the role that decoded them is answered from them (another role's call with the same bytes decodes
 * again: no timing tells it what the first role read). */
#define CACHE_BYTES 16384
#define CACHE_VALUES 16384
static MemoryContext cache_context = NULL;
static Oid	cache_user = InvalidOid;
static int	cache_len = -1;		/* -1: nothing kept */
static int	cache_n;
static double cache_step;
static char *cache_bytes;
static double *cache_values,
		   *cache_counts,
		   *cache_sums,
		   *cache_index_sums;

static double *
copied(const double *v, int n)
{
	double	   *out = palloc(sizeof(double) * n);

	memcpy(out, v, sizeof(double) * n);
	return out;
}

int
kde_unpack_atoms_kept(const char *bytes, int len, double step, double **values, double **counts, double **sums,
					  double **index_sums)
{
	int			n;
	MemoryContext old;

	if (len == cache_len && step == cache_step && GetUserId() == cache_user && memcmp(bytes, cache_bytes, len) == 0)
	{
		*values = cache_values;
		*counts = cache_counts;
		*sums = cache_sums;
		*index_sums = cache_index_sums;
		return cache_n;
	}
	n = kde_unpack_atoms(bytes, len, step, values, counts, sums, index_sums);
	if (len > CACHE_BYTES || n > CACHE_VALUES)
		return n;
	if (cache_context == NULL)
		cache_context = AllocSetContextCreate(TopMemoryContext, "pg_kde heavy values", ALLOCSET_SMALL_SIZES);
	cache_len = -1;				/* (until every copy is made) */
	MemoryContextReset(cache_context);
	old = MemoryContextSwitchTo(cache_context);
	cache_bytes = palloc(Max(len, 1));
	memcpy(cache_bytes, bytes, len);
	cache_values = copied(*values, n);
	cache_counts = copied(*counts, n);
	cache_sums = copied(*sums, n);
	cache_index_sums = copied(*index_sums, n);
	MemoryContextSwitchTo(old);
	cache_n = n;
	cache_step = step;
	cache_user = GetUserId();
	cache_len = len;
	return n;
}

Datum
kde_row_field(HeapTupleHeader row, const char *name)
{
	bool		isnull;
	Datum		d = GetAttributeByName(row, name, &isnull);

	if (isnull)
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						errmsg("pg_kde: the synopsis row's %s is NULL", name)));
	return d;
}

Datum
kde_row_field_optional(HeapTupleHeader row, const char *name, bool *isnull)
{
	TupleDesc	desc = lookup_rowtype_tupdesc(HeapTupleHeaderGetTypeId(row), HeapTupleHeaderGetTypMod(row));
	AttrNumber	attno = InvalidAttrNumber;

	for (int i = 0; i < desc->natts; i++)
		if (!TupleDescAttr(desc, i)->attisdropped && namestrcmp(&TupleDescAttr(desc, i)->attname, name) == 0)
			attno = TupleDescAttr(desc, i)->attnum;
	ReleaseTupleDesc(desc);
	*isnull = true;
	return attno != InvalidAttrNumber ? GetAttributeByNum(row, attno, isnull) : (Datum) 0;
}

ArrayType *
kde_float8_array(const double *v, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		d[i] = Float8GetDatum(v[i]);
	return construct_array(d, n, FLOAT8OID, sizeof(float8), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
}

/* _kde_atoms(s kde_synopsis, OUT atom_values float8[], OUT atom_cum_count float8[], OUT atom_cum_sum
 * float8[]): query.heavy_values. */
Datum
kde_atoms(PG_FUNCTION_ARGS)
{
	HeapTupleHeader row = PG_GETARG_HEAPTUPLEHEADER(0);
	ArrayType  *stored = DatumGetArrayTypeP(kde_row_field(row, "atom_values"));
	bytea	   *pack = DatumGetByteaPP(kde_row_field(row, "atom_pack"));
	TupleDesc	desc;
	Datum		out[3];
	bool		nulls[3] = {false, false, false};

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("pg_kde: a record is expected")));
	if (ArrayGetNItems(ARR_NDIM(stored), ARR_DIMS(stored)) == 0 && VARSIZE_ANY_EXHDR(pack) > 0)
	{
		double	   *values,
				   *counts,
				   *sums;
		int			n = kde_unpack_atoms(VARDATA_ANY(pack), VARSIZE_ANY_EXHDR(pack),
										 DatumGetFloat8(kde_row_field(row, "step")), &values, &counts, &sums, NULL);

		out[0] = PointerGetDatum(kde_float8_array(values, n));
		out[1] = PointerGetDatum(kde_float8_array(counts, n));
		out[2] = PointerGetDatum(kde_float8_array(sums, n));
	}
	else
	{
		out[0] = PointerGetDatum(stored);
		out[1] = kde_row_field(row, "atom_cum_count");
		out[2] = kde_row_field(row, "atom_cum_sum");
	}
	desc = BlessTupleDesc(desc);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, out, nulls)));
}

static void
put_varint(StringInfo out, uint64 x)
{
	for (;;)
	{
		unsigned char low = x & 0x7F;

		x >>= 7;
		if (x)
			appendStringInfoChar(out, (char) (low | 0x80));
		else
		{
			appendStringInfoChar(out, (char) low);
			return;
		}
	}
}

/* A bit stream written high bit first into out (bits that do not yet make a byte wait in acc). */
typedef struct BitWriter
{
	StringInfo	out;
	uint64		acc;
	int			used;
} BitWriter;

static void
put_bits(BitWriter *w, uint64 value, int bits)
{
	for (int i = bits - 1; i >= 0; i--)
	{
		w->acc = (w->acc << 1) | ((value >> i) & 1);
		if (++w->used == 8)
		{
			appendStringInfoChar(w->out, (char) (w->acc & 0xFF));
			w->acc = 0;
			w->used = 0;
		}
	}
}

/* packing._Bits.rice */
static void
put_rice(BitWriter *w, uint64 x, RiceState *state)
{
	int			k = rice_k(state);
	uint64		q = x >> k;

	if (q < RICE_ESCAPE)
	{
		put_bits(w, ((UINT64CONST(1) << q) - 1) << 1, (int) q + 1);
		put_bits(w, x & ((UINT64CONST(1) << k) - 1), k);
	}
	else
	{
		int			b = 0;

		while (b < 64 && (x >> b))
			b++;
		put_bits(w, (UINT64CONST(1) << RICE_ESCAPE) - 1, RICE_ESCAPE);
		put_bits(w, (uint64) b, 6);
		put_bits(w, x, b);
	}
	rice_update(state, x);
}

/* _kde_atoms_pack(atom_values float8[], atom_cum_count float8[], step float8) RETURNS bytea:
 * packing.pack_atoms (format 2; NULL where they do not pack). */
Datum
kde_atoms_pack(PG_FUNCTION_ARGS)
{
	ArrayType  *va = PG_GETARG_ARRAYTYPE_P(0),
			   *ca = PG_GETARG_ARRAYTYPE_P(1);
	double		step = PG_GETARG_FLOAT8(2);
	int			n,
				nc;
	const double *values,
			   *cum;
	StringInfoData out;
	BitWriter	bits;
	RiceState	gaps = {0, 1},
				rows = {0, 1};
	int64		prev = 0,
				before = 0;
	__int128	running = 0;
	bytea	   *result;

	if (ARR_NDIM(va) > 1 || ARR_NDIM(ca) > 1 || ARR_HASNULL(va) || ARR_HASNULL(ca)
		|| ARR_ELEMTYPE(va) != FLOAT8OID || ARR_ELEMTYPE(ca) != FLOAT8OID)
		PG_RETURN_NULL();
	n = ArrayGetNItems(ARR_NDIM(va), ARR_DIMS(va));
	nc = ArrayGetNItems(ARR_NDIM(ca), ARR_DIMS(ca));
	if (n == 0 || n != nc || !(step > 0 && isfinite(step) && isfinite(1 / step)))
		PG_RETURN_NULL();
	values = (const double *) ARR_DATA_PTR(va);
	cum = (const double *) ARR_DATA_PTR(ca);
	initStringInfo(&out);
	appendStringInfoChar(&out, PACK_RICE);
	put_varint(&out, (uint64) n);
	bits.out = &out;
	bits.acc = 0;
	bits.used = 0;
	for (int i = 0; i < n; i++)
	{
		double		v = values[i],
					r,
					c_cum = cum[i];
		int64		k,
					c;

		if (!isfinite(v) || !isfinite(c_cum) || c_cum != floor(c_cum) || fabs(c_cum) >= PACK_LIMIT)
			PG_RETURN_NULL();
		r = rint(v / step);
		/* (the pack's own lattice value, as kde_unpack_atoms reads it back) */
		if (!(fabs(r) < PACK_LIMIT) || kde_lattice_value(r, step) != v)
			PG_RETURN_NULL();
		k = (int64) r;
		c = (int64) c_cum - before;
		before = (int64) c_cum;
		running += (__int128) c * k;
		if (c < 0 || running >= (__int128) PACK_LIMIT || running <= -(__int128) PACK_LIMIT)
			PG_RETURN_NULL();
		if (i == 0)
			put_varint(&out, k >= 0 ? (uint64) k * 2 : (uint64) (-k) * 2 - 1);
		else if (k <= prev)
			PG_RETURN_NULL();
		else
			put_rice(&bits, (uint64) (k - prev - 1), &gaps);
		put_rice(&bits, (uint64) c, &rows);
		prev = k;
	}
	if (bits.used)
		put_bits(&bits, 0, 8 - bits.used);
	result = (bytea *) palloc(VARHDRSZ + out.len);
	SET_VARSIZE(result, VARHDRSZ + out.len);
	memcpy(VARDATA(result), out.data, out.len);
	PG_RETURN_BYTEA_P(result);
}

/* _kde_atom_count(pack bytea) RETURNS integer: the pack's value count from its header; NULL where the header
 * is malformed (never an error). */
Datum
kde_atom_count(PG_FUNCTION_ARGS)
{
	bytea	   *pack = PG_GETARG_BYTEA_PP(0);
	const unsigned char *data = (const unsigned char *) VARDATA_ANY(pack);
	int			len = VARSIZE_ANY_EXHDR(pack);
	int			pos = 1;
	uint64		n;

	if (len < 4 || (data[0] != PACK_VARINTS && data[0] != PACK_RICE) || !read_varint(data, len, &pos, &n)
		|| n < 1 || n > most_values(data[0], len - pos))
		PG_RETURN_NULL();
	PG_RETURN_INT32((int32) n);
}

/* Python's bisect on n ascending values: the first that is not below x (bisect_left; a NaN x gives 0), or with
 * right the first that is above x (bisect_right; a NaN x gives n). */
int
kde_bisect(const double *v, int n, double x, bool right)
{
	int			lo = 0,
				hi = n;

	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (right ? !(x < v[mid]) : v[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Neumaier's compensated sum: *sum + *comp holds the terms' sum to about one rounding */
static void
add_compensated(double *sum, double *comp, double x)
{
	double		t = *sum + x;

	*comp += fabs(*sum) >= fabs(x) ? (*sum - t) + x : (x - t) + *sum;
	*sum = t;
}

/* _kde_pair_box(pack bytea, lattice1 float8[], lattice2 float8[], a1, b1, a2, b2 float8, moment integer)
 * RETURNS float8: query.pairs_box. The rows of the pair's exact frequency table whose values lie in
 * [a1, b1] x [a2, b2], counted (moment 0) or their values of column 1 or 2 summed, entry by entry in the
 * pack's order. The whole pack is checked as it is read, whatever the box. */
Datum
kde_pair_box(PG_FUNCTION_ARGS)
{
	bytea	   *pack = PG_GETARG_BYTEA_PP(0);
	const unsigned char *data = (const unsigned char *) VARDATA_ANY(pack);
	int			len = VARSIZE_ANY_EXHDR(pack);
	int			m1,
				m2,
				pos = 1;
	const double *lattice1 = kde_sorted_array(PG_GETARG_ARRAYTYPE_P(1), "lattice1", 1, true, &m1);
	const double *lattice2 = kde_sorted_array(PG_GETARG_ARRAYTYPE_P(2), "lattice2", 1, true, &m2);
	double		a1 = PG_GETARG_FLOAT8(3),
				b1 = PG_GETARG_FLOAT8(4),
				a2 = PG_GETARG_FLOAT8(5),
				b2 = PG_GETARG_FLOAT8(6);
	int32		moment = PG_GETARG_INT32(7);
	int			lo1,
				hi1,
				lo2,
				hi2;
	uint64		n,
				a = 0,
				b = 0;
	__int128	rows = 0;
	uint64		count = 0;
	double		total = 0.0,
				comp = 0.0,
				total_s = 0.0,	/* the sum at 2^-FAR_SCALE */
				comp_s = 0.0,
				total_t = 0.0,	/* ... of the values too small for it */
				comp_t = 0.0;
	bool		far_up = false,
				far_down = false;

	/* a NaN bound lies above every value, as PostgreSQL orders float8 (a NaN lower bound holds no row) */
	lo1 = kde_bisect(lattice1, m1, isnan(a1) ? INFINITY : a1, false);
	hi1 = kde_bisect(lattice1, m1, isnan(b1) ? INFINITY : b1, true);
	lo2 = kde_bisect(lattice2, m2, isnan(a2) ? INFINITY : a2, false);
	hi2 = kde_bisect(lattice2, m2, isnan(b2) ? INFINITY : b2, true);
	if (moment < 0 || moment > 2)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("pg_kde: moment must be 0, 1 or 2, got %d", moment)));
	if (len < 5 || data[0] != PAIR_FORMAT)
		corrupted("pair_pack", "is not a pack of format 2");
	n = get_varint(data, len, &pos, "pair_pack");
	if (n < 1 || n > (uint64) (len - pos) / 3)
		corrupted("pair_pack", "holds a wrong number of pairs");
	for (uint64 k = 0; k < n; k++)
	{
		uint64		d = get_varint(data, len, &pos, "pair_pack"),
					e = get_varint(data, len, &pos, "pair_pack"),
					c;

		if (k == 0 || d > 0)
		{
			if (d >= (uint64) m1 || e >= (uint64) m2)
				corrupted("pair_pack", "holds a value off its axes' lattices");
			a = k == 0 ? d : a + d;
			b = e;
		}
		else
		{
			if (e >= (uint64) m2)
				corrupted("pair_pack", "holds a value off its axes' lattices");
			b = b + e + 1;
		}
		c = get_varint(data, len, &pos, "pair_pack");
		rows += c;
		if (a >= (uint64) m1 || b >= (uint64) m2)
			corrupted("pair_pack", "holds a value off its axes' lattices");
		if (c < 1 || rows >= (__int128) PACK_LIMIT)
			corrupted("pair_pack", "holds a count of 0 or rows past 2^53");
		if ((int) a >= lo1 && (int) a < hi1 && (int) b >= lo2 && (int) b < hi2)
		{
			if (moment == 0)
				count += c;
			else
			{
				/* c v and its rounding error (exact by fma), both into the compensated sum */
				double		v = moment == 1 ? lattice1[a] : lattice2[b],
							p = (double) c * v;

				double		vs = ldexp(v, -FAR_SCALE),
							ps = (double) c * vs;

				if (isinf(p))
				{
					far_up |= p > 0;
					far_down |= p < 0;
				}
				else
				{
					add_compensated(&total, &comp, p);
					add_compensated(&total, &comp, fma((double) c, v, -p));
				}
				/* the same at 2^-FAR_SCALE, where a product or the sum runs past float8's range (0.28.0); values
				 * that would round there (below 2^(FAR_SCALE - 1022)) summed as they are beside it */
				if (fabs(v) < ldexp(1.0, FAR_SCALE - 1022))
				{
					add_compensated(&total_t, &comp_t, p);
					add_compensated(&total_t, &comp_t, fma((double) c, v, -p));
				}
				else
				{
					add_compensated(&total_s, &comp_s, ps);
					add_compensated(&total_s, &comp_s, fma((double) c, vs, -ps));
				}
			}
		}
	}
	if (pos != len)
		corrupted("pair_pack", "has bytes past its pairs");
	if (moment == 0)
		PG_RETURN_FLOAT8((double) count);
	if (far_up || far_down || !isfinite(total + comp))
		PG_RETURN_FLOAT8(ldexp(total_s + comp_s, FAR_SCALE) + (total_t + comp_t));	/* (+-inf past float8's range) */
	PG_RETURN_FLOAT8(total + comp);
}
