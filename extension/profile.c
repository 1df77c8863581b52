/*
 * A time column's periodic profile (docs/math.md §7).
 *
 * The refresh counts it: the aggregate _kde_phases(value, period, bins, shift) counts, in the same scan as
 * _kde_cells, the finite values in each of K equal bins of the period, by the phase ((v + shift) mod period)
 * / period (shift: half the lattice step, so that each value falls in the bin its half-steps fall in, as
 * queries cut it). The build takes the heavy values' rows out and stores the profile of every other row, not
 * of a sample (pg_kde.synopsis.cells.period_counts is the float64 reference, numpy's mod and truncation step
 * for step). Its state is a bytea with a combine function, as _kde_cells's: PostgreSQL's parallel query runs
 * it on every core, Citus on every shard.
 *
 * A query cuts a cell with it: _kde_profile_cut gives the share of the cell's rows between fractions
 * t0 <= t1, their mean position there, and the variance of the share's error from the profile's own sample
 * (none to speak of where the profile counts every row), under the profile tilted to the cell's exact mean
 * position. The float64 reference is pg_kde.synopsis.cells.profile_cut; this is the same arithmetic, step for
 * step, so that a 1-D query stays within its latency on profiled columns.
 *
 * profile (float4[], K + 2 values): cumulative shares C_0 .. C_K of K equal bins of the period (the density
 * is constant in each), then the rows it was made from. Moments are taken about the cell's start (whole
 * periods in closed form, the rest bin by bin), so a narrow cell loses no precision.
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/memutils.h"

#include "pg_kde.h"

PG_FUNCTION_INFO_V1(kde_profile_cut);
PG_FUNCTION_INFO_V1(kde_phases_step_timestamp);
PG_FUNCTION_INFO_V1(kde_phases_step_date);
PG_FUNCTION_INFO_V1(kde_phases_combine);

/*
 * _kde_phases's state, in the server's byte order: 4 bytes of padding | struct PhasesHeader | rows[bins]
 * int64 (pg_kde.synopsis.sql_reader.decode_phases reads it). The transition function updates it in place.
 */
#define PHASES_MAGIC 0x5044454bu	/* "KDEP" */
#define PHASES_VERSION 1
#define PHASES_PAD 4
/* the most bins a profile may have (cells.PROFILE_MAX_BINS) */
#define PHASES_MAX_BINS 100000

typedef struct PhasesHeader
{
	uint32		magic;
	uint32		version;
	int32		bins;
	int32		unused;
	double		period;
	double		shift;
} PhasesHeader;

static Size
phases_size(int bins)
{
	return VARHDRSZ + PHASES_PAD + sizeof(PhasesHeader) + sizeof(int64) * (Size) bins;
}

static PhasesHeader *
phases_header(bytea *b)
{
	return (PhasesHeader *) ((char *) b + VARHDRSZ + PHASES_PAD);
}

static int64 *
phases_rows(bytea *b)
{
	return (int64 *) ((char *) phases_header(b) + sizeof(PhasesHeader));
}

/* Whether b is a whole state of this version, 8-byte aligned, with a period and bins the step would take. */
static bool
phases_ok(const bytea *b)
{
	const PhasesHeader *h;

	if (VARATT_IS_EXTENDED(b) || ((uintptr_t) b) % sizeof(int64) != 0 ||
		VARSIZE(b) < VARHDRSZ + PHASES_PAD + sizeof(PhasesHeader))
		return false;
	h = (const PhasesHeader *) ((const char *) b + VARHDRSZ + PHASES_PAD);
	return h->magic == PHASES_MAGIC && h->version == PHASES_VERSION && h->bins >= 1 &&
		h->bins <= PHASES_MAX_BINS && h->period > 0 && isfinite(h->period) && isfinite(h->shift) &&
		VARSIZE(b) == phases_size(h->bins);
}

/* A state from anywhere (a worker, a shard, a caller), copied to 8-byte-aligned memory of the context and
 * checked. */
static bytea *
phases_copy(bytea *from, MemoryContext context)
{
	Size		size = VARSIZE_ANY_EXHDR(from);
	bytea	   *b = MemoryContextAlloc(context, VARHDRSZ + size);

	memcpy(VARDATA(b), VARDATA_ANY(from), size);
	SET_VARSIZE(b, VARHDRSZ + size);
	if (!phases_ok(b))
		ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED),
						errmsg("pg_kde: not a _kde_phases state of this version")));
	return b;
}

/* The state of a transition call: a new one at the first row, from the period, bins and shift. */
static bytea *
phases_state(FunctionCallInfo fcinfo)
{
	bytea	   *b;
	PhasesHeader *h;
	double		period,
				shift;
	int32		bins;

	if (!AggCheckCallContext(fcinfo, NULL))
		elog(ERROR, "_kde_phases called in a non-aggregate context");
	if (PG_ARGISNULL(2) || PG_ARGISNULL(3) || PG_ARGISNULL(4))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						errmsg("pg_kde: _kde_phases needs a period, bins and a shift")));
	period = PG_GETARG_FLOAT8(2);
	bins = PG_GETARG_INT32(3);
	shift = PG_GETARG_FLOAT8(4);
	if (PG_ARGISNULL(0))
	{
		/* (checked once: every later row's must equal the state's, which were) */
		if (!(period > 0) || !isfinite(period) || !isfinite(shift) || bins < 1 || bins > PHASES_MAX_BINS)
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							errmsg("pg_kde: _kde_phases needs a positive finite period, 1 to %d bins and a finite shift",
								   PHASES_MAX_BINS)));
		/* made in the per-call memory: PostgreSQL copies a transition value that is not the one it passed in
		 * into the aggregate's memory, and keeps only that copy */
		b = palloc0(phases_size(bins));
		SET_VARSIZE(b, phases_size(bins));
		h = phases_header(b);
		h->magic = PHASES_MAGIC;
		h->version = PHASES_VERSION;
		h->bins = bins;
		h->period = period;
		h->shift = shift;
	}
	else
	{
		/* this aggregate's own state; anything else (a crafted initial value) is checked, and copied */
		b = (bytea *) PG_GETARG_POINTER(0);
		if (!phases_ok(b))
			b = phases_copy(PG_GETARG_BYTEA_PP(0), CurrentMemoryContext);
		h = phases_header(b);
		if (h->bins != bins || h->period != period || h->shift != shift)
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							errmsg("pg_kde: a _kde_phases state of another period, bins or shift")));
	}
	return b;
}

/* Count a finite value in its bin: ((v + shift) mod period) / period, times bins, truncated (numpy's mod:
 * fmod, then the period added to a negative remainder). */
static void
phases_add(bytea *b, double v)
{
	PhasesHeader *h = phases_header(b);
	double		r,
				phase;
	int64		j;

	if (!isfinite(v))
		return;
	r = fmod(v + h->shift, h->period);
	if (r < 0)
		r += h->period;
	phase = r / h->period;
	if (!isfinite(phase))		/* v + shift past float8's range */
		return;
	j = Min(Max((int64) (phase * h->bins), 0), h->bins - 1);
	if (phases_rows(b)[j] < 0 || phases_rows(b)[j] == PG_INT64_MAX)	/* (a crafted initial state) */
		ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED),
						errmsg("pg_kde: a _kde_phases state with a negative or overflowing count")));
	phases_rows(b)[j]++;
}

Datum
kde_phases_step_timestamp(PG_FUNCTION_ARGS)
{
	bytea	   *b = phases_state(fcinfo);

	if (!PG_ARGISNULL(1))
		phases_add(b, kde_epoch_seconds(PG_GETARG_TIMESTAMP(1)));
	PG_RETURN_BYTEA_P(b);
}

Datum
kde_phases_step_date(PG_FUNCTION_ARGS)
{
	bytea	   *b = phases_state(fcinfo);

	if (!PG_ARGISNULL(1))
		phases_add(b, kde_date_seconds(PG_GETARG_DATEADT(1)));
	PG_RETURN_BYTEA_P(b);
}

Datum
kde_phases_combine(PG_FUNCTION_ARGS)
{
	bytea	   *a,
			   *b;
	PhasesHeader *ha,
			   *hb;
	int64	   *ra,
			   *rb;

	if (!AggCheckCallContext(fcinfo, NULL))
		elog(ERROR, "_kde_phases combine called in a non-aggregate context");
	if (PG_ARGISNULL(1))
	{
		if (PG_ARGISNULL(0))	/* both empty (a worker or shard that read no row): still empty */
			PG_RETURN_NULL();
		PG_RETURN_DATUM(PG_GETARG_DATUM(0));
	}
	b = phases_copy(PG_GETARG_BYTEA_PP(1), CurrentMemoryContext);
	if (PG_ARGISNULL(0))
		PG_RETURN_BYTEA_P(b);
	/* normally this function's own value; a state another planner handed over is copied once */
	a = (bytea *) PG_GETARG_POINTER(0);
	if (!phases_ok(a))
		a = phases_copy(PG_GETARG_BYTEA_PP(0), CurrentMemoryContext);
	ha = phases_header(a);
	hb = phases_header(b);
	if (ha->bins != hb->bins || ha->period != hb->period || ha->shift != hb->shift)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("pg_kde: _kde_phases states of different periods, bins or shifts do not combine")));
	ra = phases_rows(a);
	rb = phases_rows(b);
	for (int j = 0; j < ha->bins; j++)
		if (ra[j] < 0 || rb[j] < 0 || pg_add_s64_overflow(ra[j], rb[j], &ra[j]))
			ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED),
							errmsg("pg_kde: a _kde_phases state with a negative or overflowing count")));
	PG_RETURN_BYTEA_P(a);
}


typedef struct Profile
{
	const float4 *v;			/* C_0 .. C_K, then the sampled rows */
	int			bins;
	double		period;
	double		h;				/* half the lattice step: the profile is of x + h */
	double		g0;				/* moments are taken about the cell's start, in periods */
} Profile;

/* Add the mass and first three moments over [a, b] (a <= b), bin by bin, to m. */
static void
piece(const Profile *p, double a, double b, double *m)
{
	double		x = a;

	while (x < b)
	{
		double		y = (x + p->h) / p->period;
		double		j = floor(y);
		double		r = (y - j) * p->bins;
		int			k = r < p->bins ? (int) floor(r) : p->bins - 1;
		double		edge,
					e,
					dens,
					ds,
					de;

		if (k > p->bins - 1)
			k = p->bins - 1;
		edge = (j + (double) (k + 1) / p->bins) * p->period - p->h;
		if (edge <= x)			/* x on the edge itself, rounded into the bin before */
		{
			k = k + 1;
			edge = edge + p->period / p->bins;
		}
		e = fmin(b, edge);
		if (!(e > x))
			/* a bin narrower than float8's spacing near the cell (a hand-built period): no step forward */
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							errmsg("pg_kde: a profile's bins (period / K) are narrower than float8's spacing of "
								   "the cell's values")));
		CHECK_FOR_INTERRUPTS();
		dens = ((double) p->v[k % p->bins + 1] - (double) p->v[k % p->bins]) * p->bins;
		ds = (x - p->g0) / p->period;
		de = (e - p->g0) / p->period;
		m[0] += dens * (de - ds);
		m[1] += dens * (de * de - ds * ds) / 2;
		m[2] += dens * (de * de * de - ds * ds * ds) / 3;
		m[3] += dens * (de * de * de * de - ds * ds * ds * ds) / 4;
		x = e;
	}
}

/* [int p, int d p, int d^2 p, int d^3 p] over [a, b], d = (x - g0)/T: whole periods in closed form, the rest
 * bin by bin. */
static void
moments(const Profile *p, double a, double b, double *m)
{
	double		T = p->period;
	double		first = ceil((a + p->h) / T) * T - p->h;
	double		last = floor((b + p->h) / T) * T - p->h;
	double		whole = last > first ? round((last - first) / T) : 0;
	double		mu1 = 0,
				mu2 = 0,
				mu3 = 0,
				c,
				n,
				s1,
				s2;

	m[0] = m[1] = m[2] = m[3] = 0;
	if (whole < 2)
	{
		piece(p, a, b, m);
		return;
	}
	piece(p, a, first, m);
	piece(p, last, b, m);
	for (int k = 0; k < p->bins; k++)
	{
		double		share = (double) p->v[k + 1] - (double) p->v[k],
					e0 = (double) k / p->bins,
					e1 = (double) (k + 1) / p->bins;

		mu1 += share * (e0 + e1) / 2;
		mu2 += share * (e0 * e0 + e0 * e1 + e1 * e1) / 3;
		mu3 += share * (e0 * e0 * e0 + e0 * e0 * e1 + e0 * e1 * e1 + e1 * e1 * e1) / 4;
	}
	c = (first - p->g0) / T;
	n = whole;
	s1 = n * (n - 1) / 2;		/* the sums of i and i^2 over the n periods */
	s2 = (n - 1) * n * (2 * n - 1) / 6;
	m[0] += n;
	m[1] += n * c + s1 + n * mu1;
	m[2] += n * c * c + c * n * (n - 1) + s2 + 2 * mu1 * (n * c + s1) + n * mu2;
	m[3] += (n * c * c * c + 3 * c * c * s1 + 3 * c * s2 + s1 * s1 + 3 * mu1 * (n * c * c + 2 * c * s1 + s2)
			 + 3 * mu2 * (n * c + s1) + n * mu3);
}

/* How many times [a, b] (seconds, of x + h) covers the period's bins: *whole + (the rest of bin j, in [-1, 1]:
 * rest(ra, rb, j)), *whole the period starts it passes; base (whole periods near a) keeps the fractions exact
 * (cells._bin_cover). */
static void
bin_cover(const Profile *p, double base, double a, double b, double *whole, double *ra, double *rb)
{
	double		ua = a / p->period - base,
				ub = b / p->period - base,
				fa = floor(ua),
				fb = floor(ub);

	*whole = fb - fa;
	*ra = p->bins * (ua - fa);
	*rb = p->bins * (ub - fb);
}

static inline double
rest(double ra, double rb, int j)
{
	return fmin(1.0, fmax(0.0, rb - j)) - fmin(1.0, fmax(0.0, ra - j));
}

/* The variance of the cell's share of [t0, t1] that the profile's own sample of k rows leaves, by the delta
 * method: sum_j p_j (c_j - f C_j)² / (k M²) (cells.profile_share_variance, step for step). */
static double
share_variance(const Profile *p, double g1, double t0, double t1)
{
	double		k = (double) p->v[p->bins + 1],
				w = g1 - p->g0,
				base,
				big_c,
				big_r,
				ca,
				cb,
				ra,
				rb,
				part_c = 0,
				part_r = 0,
				mass,
				f,
				lead,
				total = 0;

	if (!(k > 0) || !(g1 > p->g0))
		return 0;
	base = floor((p->g0 + p->h) / p->period);
	bin_cover(p, base, p->g0 + p->h, g1 + p->h, &big_c, &ca, &cb);
	bin_cover(p, base, p->g0 + t0 * w + p->h, p->g0 + t1 * w + p->h, &big_r, &ra, &rb);
	for (int j = 0; j < p->bins; j++)
	{
		double		pj = (double) p->v[j + 1] - (double) p->v[j];

		part_c += pj * rest(ca, cb, j);
		part_r += pj * rest(ra, rb, j);
	}
	mass = big_c + part_c;
	if (!(mass > 0))
		return 0;
	f = (big_r + part_r) / mass;
	/* c_j - f C_j = (L_r - f L_c) + (r_j - f C_j's rest), the first without a difference of large numbers */
	lead = (big_r * part_c - part_r * big_c) / mass;
	for (int j = 0; j < p->bins; j++)
	{
		double		pj = (double) p->v[j + 1] - (double) p->v[j],
					d = lead + rest(ra, rb, j) - f * rest(ca, cb, j);

		total += pj * d * d;
	}
	total = total / k / mass / mass;
	/* (0 where the arithmetic left float8's range: a period far below the cell's values, which no build
	 * stores) */
	return isfinite(total) ? total : 0;
}

/* The values of a periodic profile and their number, or 0 where the array is not one (pg_kde.h). */
int
kde_profile_values(ArrayType *array, const float4 **values)
{
	int			n;
	const float4 *v;

	if (ARR_ELEMTYPE(array) != FLOAT4OID || ARR_NDIM(array) != 1 || ARR_HASNULL(array))
		return 0;
	n = ArrayGetNItems(ARR_NDIM(array), ARR_DIMS(array));
	v = (const float4 *) ARR_DATA_PTR(array);
	if (n < 3 || v[0] != 0 || v[n - 2] != 1 || !(v[n - 1] >= 1) || !isfinite(v[n - 1]))
		return 0;
	for (int j = 0; j < n - 2; j++)
		if (!(v[j + 1] >= v[j]))
			return 0;
	*values = v;
	return n;
}

/* A profile of n float4 values, its period, lattice step and cell start, as moments() and share_variance()
 * read it. */
static Profile
profile_of(const float4 *profile, int n, double period, double step, double g0)
{
	Profile		p;

	p.v = profile;
	p.bins = n - 2;
	p.period = period;
	p.h = step / 2;
	p.g0 = g0;
	return p;
}

/* cells.profile_piece_moments (pg_kde.h): [int p, int t p, int t^2 p, int t^3 p] over [t0, t1] of cell [g0, g1],
 * of the whole cell [g0, g1] with whole. */
void
kde_profile_piece_moments(const float4 *profile, int n, double period, double step, double g0, double g1,
						  double t0, double t1, bool whole, double *c)
{
	Profile		p = profile_of(profile, n, period, step, g0);
	double		w = g1 - g0,
				b = period / w,	/* t = b d */
				m[4];

	if (whole)
		moments(&p, g0, g1, m);
	else
		moments(&p, g0 + t0 * w, g0 + t1 * w, m);
	c[0] = m[0];
	c[1] = b * m[1];
	c[2] = b * b * m[2];
	c[3] = b * b * b * m[3];
}

/* cells.profile_spread (pg_kde.h): the mean and variance of a row's position in the cell under the profile tilted
 * by beta, from the cell's moments z; on a lattice of slots (2 or more) slots in the cell, of the slots' centres. */
void
kde_profile_spread(const double *z, double beta, double slots, double *mean_out, double *var_out)
{
	double		total = z[0] + beta * (z[1] - z[0] / 2),
				mean,
				var;

	if (!(total > 0))
	{
		*mean_out = 0.5;
		*var_out = 0.0;
		return;
	}
	mean = (z[1] + beta * (z[2] - z[1] / 2)) / total;
	var = (z[2] + beta * (z[3] - z[2] / 2)) / total - mean * mean;
	if (slots >= 2)
		var -= 1 / (12 * slots * slots);
	*mean_out = mean;
	*var_out = fmax(0.0, var);
}

/* cells.profile_tilt (pg_kde.h): the tilt beta to the cell's mean position, from its moments z. */
double
kde_profile_tilt(const double *z, double mean)
{
	double		under = mean * (z[1] - z[0] / 2) - (z[2] - z[1] / 2);

	return under != 0 ? fmin(PROFILE_TILT, fmax(-PROFILE_TILT, (z[1] - mean * z[0]) / under)) : 0.0;
}

/* cells.profile_tilted (pg_kde.h): share and position of the piece [t0, t1] with moments c under the profile
 * tilted by beta (the cell's moments z). */
void
kde_profile_tilted(const double *z, const double *c, double beta, double t0, double t1, double *share_out,
				   double *pos_out)
{
	double		total = z[0] + beta * (z[1] - z[0] / 2),
				part = c[0] + beta * (c[1] - c[0] / 2),
				share = total > 0 ? fmin(1, fmax(0, part / total)) : t1 - t0,
				pos = part > 0 ? (c[1] + beta * (c[2] - c[1] / 2)) / part : (t0 + t1) / 2;

	*share_out = share;
	*pos_out = fmin(t1, fmax(t0, pos));
}

/* The profile cut of a cell (pg_kde.h): what _kde_profile_cut returns, given the cell's moments z
 * (kde_profile_piece_moments over [0, 1], whole periods closed), which _kde_range (range.c) has taken already. */
void
kde_profile_share_of(const float4 *profile, int n, double period, double step, double g0, double g1,
					 const double *z, double t0, double t1, double mean, double *share_out, double *pos_out,
					 double *doubt_out)
{
	Profile		p = profile_of(profile, n, period, step, g0);
	double		c[4];

	kde_profile_piece_moments(profile, n, period, step, g0, g1, t0, t1, false, c);
	kde_profile_tilted(z, c, kde_profile_tilt(z, mean), t0, t1, share_out, pos_out);
	*doubt_out = share_variance(&p, g1, t0, t1);
}

/* The profile cut of a cell (pg_kde.h): what _kde_profile_cut returns. */
void
kde_profile_share(const float4 *profile, int n, double period, double step, double g0, double g1, double t0,
				  double t1, double mean, double *share_out, double *pos_out, double *doubt_out)
{
	double		z[4];

	kde_profile_piece_moments(profile, n, period, step, g0, g1, 0.0, 1.0, true, z);
	kde_profile_share_of(profile, n, period, step, g0, g1, z, t0, t1, mean, share_out, pos_out, doubt_out);
}

/* _kde_profile_cut(profile, period, step, g0, g1, t0, t1, mean, OUT share, OUT pos, OUT doubt) */
Datum
kde_profile_cut(PG_FUNCTION_ARGS)
{
	ArrayType  *array = PG_GETARG_ARRAYTYPE_P(0);
	double		period = PG_GETARG_FLOAT8(1);
	double		step = PG_GETARG_FLOAT8(2);
	double		g0 = PG_GETARG_FLOAT8(3);
	double		g1 = PG_GETARG_FLOAT8(4);
	double		t0 = PG_GETARG_FLOAT8(5);
	double		t1 = PG_GETARG_FLOAT8(6);
	double		mean = PG_GETARG_FLOAT8(7);
	const float4 *shares = NULL;
	int			n = kde_profile_values(array, &shares);
	double		share,
				pos,
				doubt;
	TupleDesc	desc;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};

	if (n == 0)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("pg_kde: a profile is a float4[] of K + 2 values (K >= 1) without NULLs: cumulative shares from 0 up to 1, then its rows (>= 1)")));
	if (!(period > 0) || !isfinite(period) || !(g1 > g0) || !isfinite(g0) || !isfinite(g1) || !isfinite(step)
		|| !isfinite(t0) || !isfinite(t1) || !isfinite(mean) || !(0 <= t0 && t0 <= t1 && t1 <= 1))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("pg_kde: a profile's period and cell must be finite and positive, 0 <= t0 <= t1 <= 1")));
	kde_profile_share(shares, n, period, step, g0, g1, t0, t1, mean, &share, &pos, &doubt);
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("pg_kde: a record is expected")));
	desc = BlessTupleDesc(desc);
	values[0] = Float8GetDatum(share);
	values[1] = Float8GetDatum(pos);
	values[2] = Float8GetDatum(doubt);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}
