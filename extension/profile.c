/*
 * A time column's periodic profile inside a cut cell (docs/math.md §7): _kde_profile_cut gives the share of
 * the cell's rows between fractions t0 <= t1, their mean position there, and the variance of the share's
 * error from the profile's own sample, under the profile tilted to the cell's exact mean position. The
 * float64 reference is pg_kde.synopsis.cells.profile_cut; this is the same arithmetic, step for step, so
 * that a 1-D query stays within its latency on profiled columns.
 *
 * profile (float4[], 3 (K + 1) + 1 values): cumulative shares C_0 .. C_K of K equal bins of the period,
 * cumulative first and second moments at the bin edges (in periods), then the sampled rows it was made from.
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/array.h"

PG_FUNCTION_INFO_V1(kde_profile_cut);

/* The largest tilt of the profile's density p (1 + beta (t - 1/2)): it stays non-negative. */
#define PROFILE_TILT 2.0

typedef struct Profile
{
	const float4 *v;
	int			bins;
} Profile;

/* Mass, first and second moments (in periods) of the profile unrolled from origin to x >= origin. */
static void
profile_at(const Profile *p, double period, double origin, double x, double *mass, double *first,
		   double *second)
{
	int			bins = p->bins;
	const float4 *v = p->v;
	double		y = (x - origin) / period;
	double		j = floor(y);
	double		r = y - j;
	int			k = r * bins < bins ? (int) floor(r * bins) : bins - 1;	/* r in [0, 1) for finite x */
	double		f,
				e,
				dc,
				c,
				m,
				s2,
				mu1 = v[2 * bins + 1],
				mu2 = v[3 * bins + 2];

	if (k > bins - 1)
		k = bins - 1;
	if (k < 0)
		k = 0;
	f = r * bins - k;
	e = (double) k / bins;
	dc = (double) v[k + 1] - (double) v[k];
	c = (double) v[k] + dc * f;
	m = (double) v[bins + 1 + k] + dc * bins * (r * r - e * e) / 2;
	s2 = (double) v[2 * bins + 2 + k] + dc * bins * (r * r * r - e * e * e) / 3;
	*mass = j + c;
	*first = j * (j - 1) / 2 + j * mu1 + j * c + m;
	*second = (j - 1) * j * (2 * j - 1) / 6 + mu1 * j * (j - 1) + j * mu2 + j * j * c + 2 * j * m + s2;
}

/* The moments int p, int t p, int t^2 p over [x0, x1] (t = a + b y). */
static void
moments(const Profile *p, double period, double origin, double a, double b, double x0, double x1, double *z)
{
	double		p0,
				q0,
				r0,
				p1,
				q1,
				r1,
				dp,
				dq,
				dr;

	profile_at(p, period, origin, x0, &p0, &q0, &r0);
	profile_at(p, period, origin, x1, &p1, &q1, &r1);
	dp = p1 - p0;
	dq = q1 - q0;
	dr = r1 - r0;
	z[0] = dp;
	z[1] = a * dp + b * dq;
	z[2] = a * a * dp + 2 * a * b * dq + b * b * dr;
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
	int			n = ArrayGetNItems(ARR_NDIM(array), ARR_DIMS(array));
	Profile		p;
	double		h,
				origin,
				w,
				a,
				b,
				z[3],
				c[3],
				under,
				beta = 0,
				total,
				part,
				share,
				pos,
				doubt;
	TupleDesc	desc;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};

	if (ARR_ELEMTYPE(array) != FLOAT4OID || ARR_NDIM(array) != 1 || ARR_HASNULL(array) || n < 7 || n % 3 != 1)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("pg_kde: a profile is a float4[] of 3 (K + 1) + 1 values without NULLs")));
	if (!(period > 0) || !isfinite(period) || !(g1 > g0) || !isfinite(g0) || !isfinite(g1) || !isfinite(step)
		|| !isfinite(t0) || !isfinite(t1) || !isfinite(mean))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("pg_kde: a profile's period and cell must be finite and positive")));
	p.v = (const float4 *) ARR_DATA_PTR(array);
	p.bins = n / 3 - 1;
	h = step / 2;
	origin = floor((g0 + h) / period) * period;
	w = g1 - g0;
	a = (origin - h - g0) / w;
	b = period / w;
	moments(&p, period, origin, a, b, g0 + h, g1 + h, z);
	under = mean * (z[1] - z[0] / 2) - (z[2] - z[1] / 2);
	if (under != 0)
		beta = fmin(PROFILE_TILT, fmax(-PROFILE_TILT, (z[1] - mean * z[0]) / under));
	moments(&p, period, origin, a, b, g0 + t0 * w + h, g0 + t1 * w + h, c);
	total = z[0] + beta * (z[1] - z[0] / 2);
	part = c[0] + beta * (c[1] - c[0] / 2);
	share = total > 0 ? fmin(1, fmax(0, part / total)) : t1 - t0;
	pos = part > 0 ? (c[1] + beta * (c[2] - c[1] / 2)) / part : (t0 + t1) / 2;
	pos = fmin(t1, fmax(t0, pos));
	doubt = z[0] > 0 ? 1 / ((double) p.v[n - 1] * z[0] * fmax(z[0], 1)) : 0;

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("pg_kde: a record is expected")));
	desc = BlessTupleDesc(desc);
	values[0] = Float8GetDatum(share);
	values[1] = Float8GetDatum(pos);
	values[2] = Float8GetDatum(doubt);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}
