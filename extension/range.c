/*
 * A moment over a range of a 1-D synopsis (docs/math.md §7): _kde_range(s, lo, hi, moment) gives the count
 * (moment 0) or sum (moment 1) of the rows with lo <= x <= hi (NULL bounds open), its variance and hard
 * bounds, from the payload row s. The float64 reference is pg_kde.synopsis.query.range_1d; this is the same
 * arithmetic, step for step and in the same order, so that the server and the reference agree to the last
 * bits:
 *   heavy values exactly;
 *   on a value lattice (step q > 0; the lattice value k is k q for q >= 1 and k / (1/q) below, the correctly
 *     rounded decimal, as numeric and float8 input give it), the bounds move out to the half-steps around
 *     the values they include;
 *   cells: whole ones exactly from the cumulative arrays; the (at most two) a range cuts by the share of
 *     their rows their shape puts inside (the cubic with the KDE's densities at the ends, total 1 and the
 *     cell's exact mean; an exponential or straight line where that cubic goes negative; the straight line
 *     where heavy values hold most of the cell's slots; a time column's periodic profile, profile.c), with
 *     its variance and hard bounds (none to all of a cut cell's rows).
 *
 * In C, not PL/pgSQL: float8 arithmetic here follows IEEE 754 (a sum of values near 1e300 has an infinite
 * variance, the squares of values near 1e-300 vanish), where PL/pgSQL raises "value out of range" on the
 * first product that overflows or underflows; and a query takes a fraction of the time.
 */
#include "postgres.h"

#include <float.h>
#include <math.h>

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/float.h"

#include "pg_kde.h"

PG_FUNCTION_INFO_V1(kde_range);
PG_FUNCTION_INFO_V1(kde_coarse_widen);

/* The offsets a bound strictly inside a cell keeps from its ends (query.INSIDE_HIGH, INSIDE_LOW). */
#define INSIDE_HIGH 0.9999999999999999
#define INSIDE_LOW 1e-300
/* The bounds of a cut cell's exact count and sum apply where its mean is known within this share of the
 * cell (query.MEAN_BOUNDS_SLACK, MEAN_BOUNDS_FLOOR). */
#define MEAN_BOUNDS_SLACK 0.05
#define MEAN_BOUNDS_FLOOR 1e-9
/* What the cell's exact count and mean take from the binomial variance of the rows between its shares a and b:
 * f (1 - f) - MEAN_KNOWN f² (1 - a - b)², f = b - a (query.MEAN_KNOWN). */
#define MEAN_KNOWN 3.0
/* query.PINNED_MOST: the most of a profiled cut cell's f (1 - f) its exact mean may pin down */
#define PINNED_MOST 0.75

/* query.mean_known: on a lattice of step q a cell of half-width w holds m = 2w/q values, whose positions vary
 * by (1 - 1/m²)/12, so its exact mean pins down m²/(m² - 1) times as much; 3 on a continuous column, past 10⁶
 * values, and in a cell of two values (whose split the count and mean fix, which the estimate does not use). */
/* cells.cell_slots: the lattice slots of a cell of half-width w, step q: floor(2w/q + 1/2) */
static double
cell_slots(double w, double step)
{
	return floor(2 * w / step + 0.5);
}

static double
mean_known(double w, double step)
{
	double		values = step > 0 ? 2 * w / step : 0.0;

	if (values >= 2.5 && values <= 1e6)
	{
		double		m = cell_slots(w, step);

		return MEAN_KNOWN * m * m / (m * m - 1);
	}
	return MEAN_KNOWN;
}
/* The share of the cut cells' disagreement with the other shape (the straight line) that counts as the shape's standard
 * error where a synopsis does not say its own (doubt_weight NULL, or a row of a version before 0.20.0:
 * query.SHAPE_DOUBT). */
#define SHAPE_DOUBT 1.0
/* Largest rate of an exponential shape (cells.RATE_LIMIT). */
#define RATE_LIMIT 500.0
/* Where the cubic is no density, the exponential with the cell's mean past this distance of the mean from the
 * middle, else the straight line (cells.EXP_FROM). */
#define EXP_FROM 0.01

typedef struct Vector
{
	const double *v;
	int			n;
} Vector;

typedef struct Moments
{
	double		estimate;
	double		variance;
	double		low;
	double		high;
	double		scaled;			/* the estimate times 2^-FAR_SCALE, its far terms summed at that scale (smooth) */
} Moments;

/* query.add_down: a + b rounded down (the float8 sum, one float8 lower where its exact error, Knuth's
 * two-sum, is negative); not where the sum is infinite or NaN. kde_add_up mirrors it. */
static double
kde_add_down(double a, double b)
{
	double		s = a + b,
				bb;

	if (s == INFINITY && isfinite(a) && isfinite(b))
		return DBL_MAX;			/* an exact sum past float8's largest, rounded down (0.28.0) */
	if (!isfinite(s))
		return s;
	bb = s - a;
	return (a - (s - bb)) + (b - bb) < 0 ? nextafter(s, -INFINITY) : s;
}

static double
kde_add_up(double a, double b)
{
	return -kde_add_down(-a, -b);
}

/*
 * _kde_coarse_widen(x, rows, biggest, up), query.coarse_widened: a sum's hard bound x moved out (up: above,
 * else below) by what the values of `rows` rows may lie from their float8s on a column whose float8s may stand
 * for several of its values (kde_synopsis.coarse, 0.30.0): half an ulp each, at most 2^-53 of `biggest`, the
 * largest magnitude a row in the range may have (2^-1075 where that is subnormal); taken as 2^-52 of it (or
 * 2^-1074) a row, which also covers the product's rounding, and added rounded outwards.
 */
Datum
kde_coarse_widen(PG_FUNCTION_ARGS)
{
	double		x = PG_GETARG_FLOAT8(0),
				rows = PG_GETARG_FLOAT8(1),
				biggest = fabs(PG_GETARG_FLOAT8(2)),
				each = biggest >= DBL_MIN ? ldexp(biggest, -52) : ldexp(1.0, -1074),
				slack = biggest > 0 && rows > 0 ? rows * each : 0.0;

	PG_RETURN_FLOAT8(PG_GETARG_BOOL(3) ? kde_add_up(x, slack) : kde_add_down(x, -slack));
}

/* query._widen: a range's hard bounds with whole cells' rows or sum added, off either side: a count's exactly,
 * a sum's rounded outwards (0.27.0) */
static void
widen_whole(Moments *out, double whole, double off, int order)
{
	if (order == 0)
	{
		out->low += whole - off;
		out->high += whole + off;
		return;
	}
	out->low = kde_add_down(out->low, kde_add_down(whole, -off));
	out->high = kde_add_up(out->high, kde_add_up(whole, off));
}

/* Partials of an exact sum of float8s, as CPython's math.fsum keeps them (Shewchuk's non-overlapping
 * expansion; a finite sum of float8s has at most about 40). false where a partial overflows. */
#define FSUM_PARTIALS 128
typedef struct Fsum
{
	double		p[FSUM_PARTIALS];
	int			n;
	bool		overflow;
} Fsum;

static void
fsum_add(Fsum *f, double x)
{
	int			i = 0,
				j;

	if (f->overflow)
		return;
	for (j = 0; j < f->n; j++)
	{
		double		y = f->p[j],
					hi,
					lo;

		if (fabs(x) < fabs(y))
		{
			double		t = x;

			x = y;
			y = t;
		}
		hi = x + y;
		lo = y - (hi - x);
		if (lo != 0.0)
			f->p[i++] = lo;
		x = hi;
	}
	f->n = i;
	if (x != 0.0)
	{
		if (!isfinite(x) || f->n >= FSUM_PARTIALS)
		{
			f->overflow = true;
			return;
		}
		f->p[f->n++] = x;
	}
}

/* The partials' sum correctly rounded, as CPython's math.fsum rounds it (half to even across partials). */
static double
fsum_value(const Fsum *f)
{
	int			n = f->n;
	double		hi = 0.0,
				lo = 0.0;

	if (n > 0)
	{
		hi = f->p[--n];
		while (n > 0)
		{
			double		x = hi,
						y = f->p[--n];

			hi = x + y;
			lo = y - (hi - x);
			if (lo != 0.0)
				break;
		}
		if (n > 0 && ((lo < 0.0 && f->p[n - 1] < 0.0) || (lo > 0.0 && f->p[n - 1] > 0.0)))
		{
			double		y = lo * 2.0,
						x = hi + y;

			if (y == x - hi)
				hi = x;
		}
	}
	return hi;
}

/* query._whole_from_ends: whole cells [first, last) of a sum whose stored running sums there are past float8's
 * range (a few rows of +-1.7e308 make every later one infinite): each cell's rows between its ends, the products
 * and additions rounded outwards; their estimate at the cells' midpoints times 2^-FAR_SCALE into *middle, which the
 * caller sums over its cells and scales back once (cells of +-1.7e308 neither make it inf - inf nor swallow the
 * others; 0.28.0: such a range read NaN). */
static void
whole_from_ends(Moments *out, const double *grid, const double *counts, int first, int last, Fsum *middle)
{
	for (int c = first; c < last; c++)
	{
		double		n = counts[c + 1] - counts[c];

		if (n <= 0)
			continue;
		fsum_add(middle, n * (ldexp(grid[c], -FAR_SCALE) / 2 + ldexp(grid[c + 1], -FAR_SCALE) / 2));
		out->low = kde_add_down(out->low, nextafter(n * grid[c], -INFINITY));
		out->high = kde_add_up(out->high, nextafter(n * grid[c + 1], INFINITY));
	}
}

/* The sum of the heavy values values[below..upto) holding cum_count's steps of rows each at 2^-scale, as
 * heavy_sum: its correctly rounded total and the float8s either side on the exact sum's side (the total where
 * exact); false where a product or the summation overflows. At scale > 0 the values below 2^(scale - 1022) in
 * magnitude are left out, *tiny_rows their rows (each value times 2^-scale would round). */
static bool
heavy_sum_at(const double *values, const double *cum_count, int below, int upto, int scale, double *sum,
			 double *low, double *high, double *tiny_rows)
{
	Fsum		f;
	Fsum		r;
	double		prev = below > 0 ? cum_count[below - 1] : 0.0,
				least = scale > 0 ? ldexp(1.0, scale - 1022) : 0.0,
				total,
				residual;

	f.n = 0;
	f.overflow = false;
	*tiny_rows = 0;
	for (int i = below; i < upto; i++)
	{
		double		v = values[i],
					c = cum_count[i] - prev,
					product;

		prev = cum_count[i];
		if (fabs(v) < least)
		{
			*tiny_rows += c;
			continue;
		}
		v = ldexp(v, -scale);
		product = v * c;
		if (!isfinite(product))
			return false;
		fsum_add(&f, product);
		fsum_add(&f, fma(v, c, -product));
	}
	if (f.overflow)
		return false;
	total = fsum_value(&f);
	if (!isfinite(total))
		return false;
	r = f;
	fsum_add(&r, -total);
	if (r.overflow)
		return false;
	residual = fsum_value(&r);
	*sum = total;
	*low = residual < 0 ? nextafter(total, -INFINITY) : total;
	*high = residual > 0 ? nextafter(total, INFINITY) : total;
	return true;
}

/* query.heavy_sum: the sum of the heavy values values[below..upto) holding cum_count's steps of rows each,
 * from the values and counts (each product split exactly into a float8 and its error by fma, their sum
 * correctly rounded), and its hard bounds: the sum where exact, else the float8s either side on the exact
 * sum's side. Where a product or the summation overflows (0.28.0), the same at 2^-FAR_SCALE (exact for
 * values from 2^(FAR_SCALE - 1022) up; the smaller ones' rows widen the bounds by that much each), scaled
 * back: +-inf past float8's range with bounds from float8's largest, else the sum of values that cancel
 * (100 rows of each of +-float8's largest beside small values read NaN within [-inf, inf] before). */
static bool
heavy_sum(const double *values, const double *cum_count, int below, int upto, double *sum, double *low,
		  double *high)
{
	double		tiny_rows;

	if (heavy_sum_at(values, cum_count, below, upto, 0, sum, low, high, &tiny_rows))
		return true;
	/* at 2^-FAR_SCALE nothing finite overflows: products below 2^(1024 - FAR_SCALE + 53), 2^53 rows of them
	 * (a NaN value fails there too: the running sums' difference stands, as before 0.27.0) */
	if (!heavy_sum_at(values, cum_count, below, upto, FAR_SCALE, sum, low, high, &tiny_rows))
		return false;
	*sum = ldexp(*sum, FAR_SCALE);
	*low = ldexp(*low, FAR_SCALE);
	*high = ldexp(*high, FAR_SCALE);
	/* a bound past float8's range: the exact sum is too (its scaled bound is at least 2^(1024 - FAR_SCALE)) */
	if (*low == INFINITY)
		*low = DBL_MAX;
	if (*high == -INFINITY)
		*high = -DBL_MAX;
	if (tiny_rows > 0)
	{
		double		slack = nextafter(tiny_rows * ldexp(1.0, FAR_SCALE - 1022), INFINITY);

		*low = kde_add_down(*low, -slack);
		*high = kde_add_up(*high, slack);
	}
	return true;
}

/* A cell's shape: the cubic a + b t + c t^2 + e t^3 (a straight line has c = e = 0), or the exponential
 * density of rate lambda. */
typedef struct Shape
{
	bool		exponential;
	double		a,
				b,
				c,
				e,
				lambda;
} Shape;


/* A float8[] (or, with single set, a float4[] read into a palloc'd float8 copy) of the row, checked. */
static Vector
vector(HeapTupleHeader row, const char *name, bool single)
{
	ArrayType  *array = DatumGetArrayTypeP(kde_row_field(row, name));
	Vector		out;

	if (ARR_NDIM(array) > 1 || ARR_HASNULL(array) || ARR_ELEMTYPE(array) != (single ? FLOAT4OID : FLOAT8OID))
		ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED),
						errmsg("pg_kde: the synopsis row's %s is not a one-dimensional %s array without NULLs",
							   name, single ? "float4" : "float8")));
	out.n = ArrayGetNItems(ARR_NDIM(array), ARR_DIMS(array));
	if (single)
	{
		const float4 *f = (const float4 *) ARR_DATA_PTR(array);
		double	   *d = palloc(sizeof(double) * Max(out.n, 1));

		for (int i = 0; i < out.n; i++)
			d[i] = (double) f[i];
		out.v = d;
	}
	else
		out.v = (const double *) ARR_DATA_PTR(array);
	return out;
}

/* How many of the sorted values are <= x (right: not above it, as Python's bisect_right reads a NaN) or < x (not
 * right): Python's bisect. */
static int
bisect(const Vector *values, double x, bool right)
{
	int			lo = 0,
				hi = values->n;

	while (lo < hi)
	{
		int			mid = (lo + hi) / 2;

		if (right ? !(x < values->v[mid]) : values->v[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Python's max(lo, min(hi, x)) spelled out: a NaN x gives hi, as there. */
static double
clamp(double x, double lo, double hi)
{
	double		y = x < hi ? x : hi;

	return y > lo ? y : lo;
}

/* cells.exponential_rate: lambda of the density lambda e^(-lambda t) / (1 - e^(-lambda)) on [0, 1] with the
 * given mean, by Newton's method: from 1/m where m < 1/3, else from 12 (1/2 - m), below the root (m(lambda) is
 * convex, above its tangent at 0), whence the steps rise to it. */
static double
exponential_rate(double mean)
{
	double		m = fmin(fmax(mean, 1e-6), 1 - 1e-6);
	bool		flip = m > 0.5;
	double		lam;

	if (flip)
		m = 1 - m;
	lam = fmin(RATE_LIMIT, fmax(1e-6, m < 1.0 / 3 ? 1.0 / m : 12 * (0.5 - m)));
	for (int i = 0; i < 30; i++)
	{
		double		e = exp(-lam);
		double		f = 1 / lam - e / (1 - e) - m;
		double		d = -1 / (lam * lam) + e / ((1 - e) * (1 - e));
		double		next = fmin(RATE_LIMIT, fmax(1e-6, lam - f / d));

		if (fabs(next - lam) <= 1e-12 * lam)
		{
			lam = next;
			break;
		}
		lam = next;
	}
	return flip ? -lam : lam;
}

/* cells.cubic_is_density: a cubic with non-negative ends is non-negative at the roots of f' inside (0, 1). */
static bool
cubic_is_density(double a, double b, double c, double e)
{
	double		roots[2];
	int			k = 0;

	if (fabs(e) > 1e-12)
	{
		double		disc = 4 * c * c - 12 * e * b;

		if (disc >= 0)
		{
			double		s = sqrt(disc);

			roots[k++] = (-2 * c + s) / (6 * e);
			roots[k++] = (-2 * c - s) / (6 * e);
		}
	}
	else if (fabs(c) > 1e-12)
		roots[k++] = -b / (2 * c);
	for (int i = 0; i < k; i++)
	{
		double		t = roots[i];

		if (0 < t && t < 1 && a + t * (b + t * (c + t * e)) < 0)
			return false;
	}
	return true;
}

static Shape
linear(double mean)
{
	double		slope = fmax(-2.0, fmin(2.0, 12 * (mean - 0.5)));
	Shape		s = {false, 1 - slope / 2, slope, 0.0, 0.0, 0.0};

	return s;
}

/* cells.cell_shape: the KDE's cubic where it is a density; else the exponential with the cell's mean where
 * that is more than EXP_FROM from the middle (1/6 without usable densities); else the straight line with that
 * mean. */
static Shape
cell_shape(double d0, double d1, double mean)
{
	bool		known = d0 >= 0 && d1 >= 0;

	if (known)
	{
		Shape		s = {false, d0, -9 * d0 + 3 * d1 - 60 * mean + 36, 18 * d0 - 12 * d1 + 180 * mean - 96,
						 -10 * d0 + 10 * d1 - 120 * mean + 60, 0.0};

		if (cubic_is_density(s.a, s.b, s.c, s.e))
			return s;
	}
	/* (without the KDE's ends, the line wherever it reaches the mean) */
	if (fabs(mean - 0.5) > (known ? EXP_FROM : 1.0 / 6))
	{
		Shape		s = {true, 0, 0, 0, 0, exponential_rate(mean)};

		return s;
	}
	return linear(mean);
}

/* cells.mass: the shape's mass on [0, t]. */
static double
mass(const Shape *s, double t)
{
	if (s->exponential)
		return (exp(-s->lambda * t) - 1) / (exp(-s->lambda) - 1);
	return t * (s->a + t * (s->b / 2 + t * (s->c / 3 + t * s->e / 4)));
}

/* cells.moment: the shape's first moment on [0, t]. */
static double
moment_of(const Shape *s, double t)
{
	if (s->exponential)
		return (1 - exp(-s->lambda * t) * (1 + s->lambda * t)) / (s->lambda * (1 - exp(-s->lambda)));
	return t * t * (s->a / 2 + t * (s->b / 3 + t * (s->c / 4 + t * s->e / 5)));
}

/* cells.HOLE_ROUNDS, HOLE_FLOOR: evaluations of the search for the mean a cut cell's shape is given over its
 * whole width so that over its own slots (the heavy values' taken out) its mean is the cell's; below
 * HOLE_FLOOR of the shape's mass off the heavy values' slots, they are not taken out. */
#define HOLE_ROUNDS 6
#define HOLE_FLOOR 1e-6

/* The shapes cells.fit_holes takes out the heavy values' slots of, each given its mean m: the cell's
 * (cell_shape with the KDE's densities at its ends: cells.cubic_shape), the straight line (linear_shape) or
 * the periodic profile tilted to m (profile_shape). */
typedef enum
{
	PIECE_CELL,
	PIECE_LINE,
	PIECE_PROFILE
} PieceKind;

typedef struct Piece
{
	PieceKind	kind;
	double		d0,
				d1;				/* PIECE_CELL: the KDE's densities at the ends */
	const float4 *profile;		/* PIECE_PROFILE: the profile, its values, its period and the cell */
	int			profile_n;
	double		period,
				step,
				g0,
				g1;
	double		z[4];			/* PIECE_PROFILE: the cell's moments */
	double		m;				/* the mean it is given */
	Shape		shape;			/* PIECE_CELL, PIECE_LINE: the shape with mean m */
	double		beta;			/* PIECE_PROFILE: the tilt to m */
} Piece;

static void
piece_mean(Piece *p, double m)
{
	p->m = m;
	if (p->kind == PIECE_CELL)
		p->shape = cell_shape(p->d0, p->d1, m);
	else if (p->kind == PIECE_LINE)
		p->shape = linear(m);
	else
		p->beta = kde_profile_tilt(p->z, m);
}

/* The piece's mass and first moment over [ta, tb]; a profile's from the piece's moments c (NULL: taken here). */
static void
piece_part(const Piece *p, double ta, double tb, const double *c, double *part, double *first)
{
	if (p->kind == PIECE_PROFILE)
	{
		double		own[4],
					share,
					pos;

		if (c == NULL)
		{
			kde_profile_piece_moments(p->profile, p->profile_n, p->period, p->step, p->g0, p->g1, ta, tb, false,
									  own);
			c = own;
		}
		kde_profile_tilted(p->z, c, p->beta, ta, tb, &share, &pos);
		*part = share;
		*first = share * pos;
	}
	else
	{
		*part = mass(&p->shape, tb) - mass(&p->shape, ta);
		*first = moment_of(&p->shape, tb) - moment_of(&p->shape, ta);
	}
}

/* cells.Holes: the heavy values taken out of a cut cell's shape (n of them; none: 0), each slot's mass and
 * first moment under it, and the mass off them. */
typedef struct Holes
{
	int			n;
	const double *values;
	double	   *part,
			   *first;
	double		rest;
} Holes;

/* cells.fit_holes: the n heavy values inside cell [g0, g1] (a lattice of step q) taken out of the piece's
 * shape, whose mean over the cell's other slots is then nearest the cell's exact mean of HOLE_ROUNDS
 * evaluations of a secant search on the mean it is given over the whole cell; the piece is left with that
 * mean. */
static void
fit_holes(Piece *p, double mean, const double *values, int n, double step, double g0, double g1, Holes *out)
{
	out->n = 0;
	out->values = values;
	out->part = out->first = NULL;
	out->rest = 1.0;
	if (n > 0)
	{
		double		w = g1 / 2 - g0 / 2,
					h = step / 2,
					m = mean,
					best_miss = 0,
					best_m = mean,
					best_rest = 1.0,
					last_m = 0,
					last_miss = 0,
					whole[4];
		double	   *ta = palloc(sizeof(double) * n),
				   *tb = palloc(sizeof(double) * n),
				   *part = palloc(sizeof(double) * n),
				   *first = palloc(sizeof(double) * n),
				   *best_part = palloc(sizeof(double) * n),
				   *best_first = palloc(sizeof(double) * n),
				   *slot = NULL;	/* a profile's moments of each slot (they do not move with m) */
		bool		have_best = false,
					have_last = false,
					floor_hit = false;

		for (int i = 0; i < n; i++)
		{
			ta[i] = clamp(((values[i] - h) / 2 - g0 / 2) / w, 0.0, 1.0);
			tb[i] = clamp(((values[i] + h) / 2 - g0 / 2) / w, 0.0, 1.0);
		}
		if (p->kind == PIECE_PROFILE)
		{
			slot = palloc(sizeof(double) * 4 * n);
			kde_profile_piece_moments(p->profile, p->profile_n, p->period, p->step, p->g0, p->g1, 0.0, 1.0, false,
									  whole);
			for (int i = 0; i < n; i++)
				kde_profile_piece_moments(p->profile, p->profile_n, p->period, p->step, p->g0, p->g1, ta[i], tb[i],
										  false, slot + 4 * i);
		}
		for (int rounds = 0; rounds < HOLE_ROUNDS; rounds++)
		{
			double		m0,
						m1,
						h0 = 0,
						h1 = 0,
						miss,
						slope;

			piece_mean(p, m);
			piece_part(p, 0.0, 1.0, slot != NULL ? whole : NULL, &m0, &m1);
			for (int i = 0; i < n; i++)
			{
				piece_part(p, ta[i], tb[i], slot != NULL ? slot + 4 * i : NULL, &part[i], &first[i]);
				h0 += part[i];
				h1 += first[i];
			}
			if (!(m0 - h0 > HOLE_FLOOR))
			{
				floor_hit = true;
				break;
			}
			miss = (m1 - h1) / (m0 - h0) - mean;
			if (!have_best || fabs(miss) < fabs(best_miss))
			{
				have_best = true;
				best_miss = miss;
				best_m = m;
				best_rest = m0 - h0;
				memcpy(best_part, part, sizeof(double) * n);
				memcpy(best_first, first, sizeof(double) * n);
			}
			if (miss == 0 || rounds == HOLE_ROUNDS - 1)
				break;
			slope = have_last && m != last_m ? (miss - last_miss) / (m - last_m) : 1.0;
			if (!(slope > 0))
				slope = 1.0;
			have_last = true;
			last_m = m;
			last_miss = miss;
			m = clamp(m - miss / slope, 0.0, 1.0);
		}
		pfree(ta);
		pfree(tb);
		pfree(part);
		pfree(first);
		if (slot != NULL)
			pfree(slot);
		if (!floor_hit)
		{
			out->n = n;
			out->part = best_part;
			out->first = best_first;
			out->rest = best_rest;
			piece_mean(p, best_m);
			return;
		}
		pfree(best_part);
		pfree(best_first);
	}
	piece_mean(p, mean);
}

/* cells.Holes.share: the piece's mass and first moment over [t0, t1] of the cell's own slots, whose values lie
 * in (lo, hi), as shares of its rows. */
static void
holes_share(const Piece *p, const Holes *holes, double t0, double t1, double lo, double hi, double *part,
			double *first)
{
	piece_part(p, t0, t1, NULL, part, first);
	if (holes->n == 0)
		return;
	for (int i = 0; i < holes->n; i++)
		if (lo < holes->values[i] && holes->values[i] < hi)
		{
			*part -= holes->part[i];
			*first -= holes->first[i];
		}
	*part /= holes->rest;
	*first /= holes->rest;
}

/* query._position: the share clamped to [0, 1] and the position of the mass within [t0, t1]. */
static void
position(double part, double first, double t0, double t1, double *share, double *pos)
{
	*share = fmin(1.0, fmax(0.0, part));
	*pos = *share > 0 ? first / *share : (t0 + t1) / 2;
	*pos = fmin(t1, fmax(t0, *pos));
}

/* Python's math.ulp of |x|: the gap to the next float8 (to the one below at the largest), infinity for
 * infinities and NaN (maths.ulp) */
static double
ulp_of(double x)
{
	double		up;

	x = fabs(x);
	if (!isfinite(x))
		return get_float8_infinity();
	up = nextafter(x, get_float8_infinity());
	return isfinite(up) ? up - x : x - nextafter(x, 0.0);
}

/* query.OWN_SLOTS_MOST: a cut cell of more lattice slots keeps its rows anywhere but half a step from a cut */
#define OWN_SLOTS_MOST 1e6

/* query.half_step: whether x lies on a half-step (k + 1/2) q of the lattice of step q, within a quarter step
 * (|x / q| below 2^50); a merge of parts whose steps differ keeps a coarser part's boundaries, which may be
 * values of the finer common lattice */
static bool
half_step(double x, double step)
{
	double		f = x / step - 0.5;

	return fabs(f) < 1125899906842624.0 && fabs(f - floor(f + 0.5)) < 0.25;
}

/* the lattice slot of a cell's hole j (a heavy value strictly inside it): floor((v - g0) / q) */
static double
hole_slot(const double *holes, int j, double g0, double step)
{
	return floor((holes[j] - g0) / step);
}

/* how many of the holes' slots (ascending) are below x, or at most x where at_most */
static int
holes_below(const double *holes, int holes_n, double g0, double step, double x, bool at_most)
{
	int			lo = 0,
				hi = holes_n;

	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;
		double		slot = hole_slot(holes, mid, g0, step);

		if (slot < x || (at_most && slot == x))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* query.own_slots' below: the centre of the highest slot under index i that may hold the cell's rows (NaN:
 * none) */
static double
own_below(double i, double gap, const double *holes, int holes_n, double g0, double step)
{
	int			k = holes_below(holes, holes_n, g0, step, i - 1, true) - 1;

	i -= 1;
	while (i >= 0 && k >= 0 && hole_slot(holes, k, g0, step) == i)
	{
		i -= 1;
		k -= 1;
	}
	return i >= 0 ? (2 * i + 1) * gap : NAN;
}

/* query.own_slots' above: the centre of the lowest slot from index i up that may hold the cell's rows (NaN:
 * none) */
static double
own_above(double i, double slots, double gap, const double *holes, int holes_n, double g0, double step)
{
	int			k = holes_below(holes, holes_n, g0, step, i, false);

	while (i < slots && k < holes_n && hole_slot(holes, k, g0, step) == i)
	{
		i += 1;
		k += 1;
	}
	return i < slots ? (2 * i + 1) * gap : NAN;
}

/* query._below_cut: the fewest and most of a cell's n rows below a cut, those below at positions in
 * [first, upto], the others in [above, last], their mean position mean +- doubt */
static void
below_cut(double n, double mean, double doubt, double upto, double above, double first, double last,
		  double *lo, double *hi)
{
	*lo = above > first ? n * (above - (mean + doubt)) / (above - first) : 0.0;
	*hi = upto < last ? n * (last - (mean - doubt)) / (last - upto) : n;
}

/* query.mean_bounds: the fewest and most of a cut cell's n rows inside the range, as its exact count and sum
 * allow; on a lattice its rows sit on its slots' centres, none on the slots of its holes (the holes_n whole heavy
 * values strictly inside it, sorted), and each cut's nearest such centres bound them (query.own_slots, 0.24.0);
 * 0 and n where the sum's slack and quantum are not known (known false) or leave the mean too loose */
static void
mean_bounds(double n, double g0, double g1, double w, double cum0, double cum1, double t0, double t1,
			double step, bool known, double slack, double rounding, const double *holes, int holes_n,
			double *k_lo, double *k_hi)
{
	double		total = cum1 - cum0,
				mean,
				error,
				doubt,
				slots,
				gap,
				first,
				last,
				below0,
				above0,
				below1,
				above1,
				lo = 0.0,
				hi = n;
	bool		own,
				from_start,
				to_end;

	*k_lo = 0.0;
	*k_hi = n;
	if (!known || !(n >= 1))
		return;
	mean = ((total / n) / 2 - g0 / 2) / w;
	error = 2 * slack + ulp_of(total) + n * rounding;
	doubt = (error / n / 2 + 4 * ulp_of(fmax(fmax(fabs(g0), fabs(g1)), fabs(total / n)))) / w + MEAN_BOUNDS_FLOOR;
	if (!(isfinite(mean) && doubt <= MEAN_BOUNDS_SLACK))
		return;
	slots = step > 0 ? cell_slots(w, step) : 0.0;
	gap = step > 0 ? step / 4 / w : 0.0;
	/* query.own_slots: a lattice's slots, the cell's ends half-steps, no NaN heavy value among its holes (only
	 * a tampered row holds one) */
	own = slots >= 2 && slots <= OWN_SLOTS_MOST && half_step(g0, step) && half_step(g1, step);
	for (int j = 0; own && j < holes_n; j++)
		own = !isnan(holes[j]);
	first = own ? own_above(0.0, slots, gap, holes, holes_n, g0, step) : NAN;
	if (!isnan(first))
	{
		/* the lowest and highest centres of the cell's rows, and each cut's nearest */
		double		i0 = floor(t0 * slots + 0.5),
					i1 = floor(t1 * slots + 0.5);

		last = own_below(slots, gap, holes, holes_n, g0, step);
		below0 = own_below(i0, gap, holes, holes_n, g0, step);
		above0 = own_above(i0, slots, gap, holes, holes_n, g0, step);
		below1 = own_below(i1, gap, holes, holes_n, g0, step);
		above1 = own_above(i1, slots, gap, holes, holes_n, g0, step);
		if (isnan(above0) || isnan(below1) || above0 > below1)
		{
			/* the range holds none of the slots its rows may take: heavy values' alone */
			*k_lo = 0.0;
			*k_hi = 0.0;
			return;
		}
		from_start = isnan(below0);
		to_end = isnan(above1);
	}
	else
	{
		/* rows anywhere in the cell; on a lattice of more than OWN_SLOTS_MOST slots, half a step from a cut */
		first = 0.0;
		last = 1.0;
		below0 = t0 - gap;
		above0 = t0 + gap;
		below1 = t1 - gap;
		above1 = t1 + gap;
		from_start = t0 == 0.0;
		to_end = t1 == 1.0;
	}
	if (from_start && to_end)
		lo = hi = n;
	else if (from_start)
		below_cut(n, mean, doubt, below1, above1, first, last, &lo, &hi);
	else if (to_end)
	{
		double		below_lo,
					below_hi;

		below_cut(n, mean, doubt, below0, above0, first, last, &below_lo, &below_hi);
		lo = n - below_hi;
		hi = n - below_lo;
	}
	else
	{
		if (above0 > first)
			hi = fmin(hi, n * (mean + doubt - first) / (above0 - first));
		if (last > below1)
			hi = fmin(hi, n * (last - (mean - doubt)) / (last - below1));
	}
	lo = ceil(lo - MEAN_BOUNDS_FLOOR * n);
	hi = floor(hi + MEAN_BOUNDS_FLOOR * n);
	lo = isnan(lo) ? 0.0 : fmax(0.0, lo);
	hi = isnan(hi) ? n : fmin(n, hi);
	if (lo <= hi)
	{
		*k_lo = lo;
		*k_hi = hi;
	}
}

/* How far whole cells' stored sum may be from their rows' (query.stored_sum_error): each row rounded to the
 * quantum (half of it), and the prefix sums' float8 slack at both ends; none for a count. */
static double
stored_sum_error(int order, double rows, double slack, double rounding)
{
	return order == 0 ? 0.0 : rows * (rounding / 2) + 2 * slack;
}

/* query._add_whole: whole cells [first, last) added to out, their stored rows or sum with hard bounds off either
 * side (stored_sum_error, widen_whole); a sum whose stored running sums there are past float8's range from the
 * cells' ends instead (whole_from_ends), its estimate's terms into far */
static void
add_whole(Moments *out, const double *cells, const Vector *grid, const Vector *counts, int first, int last,
		  int order, double slack, double rounding, Fsum *far, bool *far_used)
{
	double		whole = cells[last] - cells[first];

	if (order == 1 && !isfinite(whole))
	{
		whole_from_ends(out, grid->v, counts->v, first, last, far);
		*far_used = true;
		return;
	}
	out->estimate += whole;
	widen_whole(out, whole, stored_sum_error(order, counts->v[last] - counts->v[first], slack, rounding), order);
}

/* The weights of a row's shape's doubt, read from it once a call, when a cut cell first disagrees with the
 * other shape it could take: its groups' (doubt_weights, 0.21.0; none: n 0) and its one weight (doubt_weight, else
 * SHAPE_DOUBT: NULL, or a row of a version before 0.20.0). */
typedef struct DoubtWeights
{
	bool		read;
	int			n;
	const float4 *groups;
	double		one;
} DoubtWeights;

/* query.cell_weight: the weight of the shape's doubt in cell c of cells: its group's (cell c in group
 * c * n / cells of n), else the row's one weight. */
static double
cell_doubt_weight(HeapTupleHeader row, DoubtWeights *w, int c, int cells)
{
	if (!w->read)
	{
		bool		isnull;
		Datum		datum = kde_row_field_optional(row, "doubt_weights", &isnull);

		w->read = true;
		w->n = 0;
		if (!isnull)
		{
			ArrayType  *array = DatumGetArrayTypeP(datum);

			if (ARR_NDIM(array) > 1 || ARR_HASNULL(array) || ARR_ELEMTYPE(array) != FLOAT4OID)
				ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED),
								errmsg("pg_kde: the synopsis row's doubt_weights is not a one-dimensional float4 array without NULLs")));
			w->n = ArrayGetNItems(ARR_NDIM(array), ARR_DIMS(array));
			w->groups = (const float4 *) ARR_DATA_PTR(array);
		}
		datum = kde_row_field_optional(row, "doubt_weight", &isnull);
		w->one = isnull ? SHAPE_DOUBT : DatumGetFloat8(datum);
	}
	return w->n > 0 ? (double) w->groups[(int64) c * w->n / cells] : w->one;
}

/* query.smooth_1d: the cells' part of [a, b] (bounds already snapped on a lattice). */
static Moments
smooth(HeapTupleHeader row, double a, double b, int order, double step, double kde_rows, const Vector *heavy)
{
	Moments		out = {0, 0, 0, 0};
	Vector		grid = vector(row, "grid", false);
	Vector		counts = vector(row, "cell_cum_count", false);
	Vector		sums = vector(row, "cell_cum_sum", false);
	Vector		density = vector(row, "density", true);
	const double *cells = order == 0 ? counts.v : sums.v;
	double		shape_var = DatumGetFloat8(kde_row_field(row, "shape_var"));
	double		period = DatumGetFloat8(kde_row_field(row, "period"));
	int			m = grid.n;
	double		half_range,
				A,
				B,
				shape_error = 0;
	Fsum		far;			/* terms of the estimate at 2^-FAR_SCALE: whole cells past float8's range
								 * (whole_from_ends), cut pieces too */
	bool		far_used = false;
	DoubtWeights doubt_weights = {false, 0, NULL, SHAPE_DOUBT};
	int			ka,
				kb,
				ks[2],
				nk;
	const float4 *profile = NULL;	/* a periodic profile's values (period > 0), profile_n of them */
	int			profile_n = 0;
	bool		slack_null,
				quantum_null;
	Datum		slack_datum = kde_row_field_optional(row, "sum_slack", &slack_null),
				quantum_datum = kde_row_field_optional(row, "sum_quantum", &quantum_null);
	double		slack = slack_null ? 0.0 : DatumGetFloat8(slack_datum),
				rounding = quantum_null ? 0.0 : DatumGetFloat8(quantum_datum);

	if (counts.n != m || sums.n != m || density.n != m)
		ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED),
						errmsg("pg_kde: the synopsis row's cell arrays do not match its grid")));
	if (kde_rows == 0 || m < 2)
		return out;
	far.n = 0;
	far.overflow = false;
	half_range = grid.v[m - 1] / 2 - grid.v[0] / 2;
	A = a > grid.v[0] ? a : grid.v[0];
	B = b < grid.v[m - 1] ? b : grid.v[m - 1];
	if (A > B || (A == B && step > 0))
		return out;
	ka = Min(Max(bisect(&grid, A, true) - 1, 0), m - 2);
	kb = Min(Max(bisect(&grid, B, true) - 1, 0), m - 2);
	if (kb > ka + 1)
		add_whole(&out, cells, &grid, &counts, ka + 1, kb, order, slack, rounding, &far, &far_used);
	if (period > 0)
	{
		/* a row the catalog's check did not see (a composite value built by hand) is checked here */
		profile_n = kde_profile_values(DatumGetArrayTypeP(kde_row_field(row, "profile")), &profile);
		if (!isfinite(period) || profile_n == 0)
			ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED),
							errmsg("pg_kde: the synopsis row's periodic profile is not a float4[] of K + 2 values "
								   "(K >= 1) without NULLs, cumulative shares from 0 up to 1 and its rows, with a "
								   "finite period")));
	}
	nk = 0;
	ks[nk++] = ka;
	if (kb != ka)
		ks[nk++] = kb;
	for (int i = 0; i < nk; i++)
	{
		int			c = ks[i];
		double		g0 = grid.v[c],
					g1 = grid.v[c + 1],
					w = g1 / 2 - g0 / 2,	/* halves: no difference of values near the ends of float8 overflows */
					t0 = c == ka ? (A / 2 - g0 / 2) / w : 0.0,
					t1 = c == kb ? (B / 2 - g0 / 2) / w : 1.0,
					n,
					mean,
					share,
					pos,
					doubt = 0,
					apart,
					weighed,
					f,
					cuts,
					below,
					pinned,
					keep,
					spread,
					part,
					first;
		int			inside,
					holes_n;
		const double *holes_at;
		Piece		own = {0};
		Holes		own_holes;
		double		spread_mean = 0.5,	/* a profile's: a row's position in the cell, its mean and variance */
					spread_var = 0.0;	/* (0: the even bridge) */

		t0 = clamp(t0, 0.0, 1.0);
		t1 = clamp(t1, 0.0, 1.0);
		/* A bound inside the cell never makes it whole or empty, however the division rounds. */
		if (c == kb && B < g1)
			t1 = fmin(t1, INSIDE_HIGH);
		if (c == ka && A > g0)
			t0 = fmax(t0, INSIDE_LOW);
		/* A <= B: the rounding or the nudges that put t1 below t0 (a narrow range near an end of a cell 1e300
		 * wide) must not drop the cell */
		t1 = t1 > t0 ? t1 : t0;
		n = counts.v[c + 1] - counts.v[c];
		/* (On a lattice no row sits on a boundary; a continuous column's rows may sit on B.) */
		if (n <= 0 || t1 < t0 || (t1 == t0 && step > 0))
			continue;
		if (t0 == 0 && t1 == 1)	/* the range holds this cell whole: exact */
		{
			add_whole(&out, cells, &grid, &counts, c, c + 1, order, slack, rounding, &far, &far_used);
			continue;
		}
		/* cells.cell_ends: the cell's mean position from its exact sum (1/2 where sums ran past float8) */
		mean = (((sums.v[c + 1] - sums.v[c]) / n) / 2 - g0 / 2) / w;
		mean = isfinite(mean) ? fmin(1.0, fmax(0.0, mean)) : 0.5;
		/* where the heavy values are whole, the ones inside the cell (cells.heavy_slots) hold none of its rows:
		 * its shape is over its other slots, with its exact mean there (cells.fit_holes) */
		inside = heavy != NULL ? bisect(heavy, g0, true) : 0;
		holes_n = heavy != NULL ? bisect(heavy, g1, false) - inside : 0;
		holes_at = heavy != NULL ? heavy->v + inside : NULL;
		if (period > 0)
		{
			/* the periodic profile's shape tilted to the cell's mean, and its own sampling error */
			own.kind = PIECE_PROFILE;
			own.profile = profile;
			own.profile_n = profile_n;
			own.period = period;
			own.step = step;
			own.g0 = g0;
			own.g1 = g1;
			own.m = mean;
			own_holes.n = 0;
			/* the cell's moments, taken once: its tilt, its cut's share and its rows' spread follow from them;
			 * fit_holes leaves own tilted to its mean (none: the cell's) */
			kde_profile_piece_moments(profile, profile_n, period, step, g0, g1, 0.0, 1.0, true, own.z);
			fit_holes(&own, mean, holes_at, holes_n, step, g0, g1, &own_holes);
			kde_profile_share_of(profile, profile_n, period, step, g0, g1, own.z, t0, t1, own.m, &share, &pos,
								 &doubt);
			if (own_holes.n > 0)
			{
				holes_share(&own, &own_holes, t0, t1, A, B, &part, &first);
				position(part, first, t0, t1, &share, &pos);
			}
			apart = 0.0;
			/* where the cell's rows lie under the tilted profile: what its exact mean pins down (0.25.0); not
			 * where the tilt cannot reach the cell's mean or heavy values hold some of its slots (the even
			 * bridge, as before) */
			if (fabs(own.beta) < PROFILE_TILT && own_holes.n == 0)
				kde_profile_spread(own.z, own.beta, step > 0 ? cell_slots(w, step) : 0.0, &spread_mean,
								   &spread_var);
		}
		else
		{
			/* the KDE's densities at the ends, relative to the cell's mean density (stored relative to the
			 * grid's) */
			double		scale = (w / half_range) * (kde_rows / n);
			Piece		line = {0},
						cubic = {0};
			Holes		line_holes,
						cubic_holes;
			double		other,
						other_first;

			line.kind = PIECE_LINE;
			fit_holes(&line, mean, holes_at, holes_n, step, g0, g1, &line_holes);
			cubic.kind = PIECE_CELL;
			cubic.d0 = density.v[c] * scale;
			cubic.d1 = density.v[c + 1] * scale;
			fit_holes(&cubic, mean, holes_at, holes_n, step, g0, g1, &cubic_holes);
			if (holes_n > 0 && 2.0 * holes_n > cell_slots(w, step))
			{
				/* heavy values hold more than half its slots: the straight line over the others, its doubt
				 * measured from the KDE's cubic (cells.mostly_heavy, cells.own_holes) */
				own = line;
				own_holes = line_holes;
				holes_share(&cubic, &cubic_holes, t0, t1, A, B, &other, &other_first);
			}
			else
			{
				/* the KDE's cubic, its doubt measured from the straight line */
				own = cubic;
				own_holes = cubic_holes;
				holes_share(&line, &line_holes, t0, t1, A, B, &other, &other_first);
			}
			holes_share(&own, &own_holes, t0, t1, A, B, &part, &first);
			position(part, first, t0, t1, &share, &pos);
			apart = n * fabs(share - other);
		}
		/* Binomial, less what the cell's exact count and mean pin down, plus the shape's error; a cut cell is
		 * never certain: its share counts as at least one row's each side. */
		f = fmin(fmax(share, 1 / (n + 1)), n / (n + 1));
		cuts = f * (1 - f);
		below = 0.0;
		if (0 < t0 && t1 < 1)
		{
			/* a range inside one cell: where it lies sets what the cell's exact mean pins down of its rows,
			 * and the shape's errors at its two cuts add */
			double		below_first;

			holes_share(&own, &own_holes, 0.0, t0, -INFINITY, A, &below, &below_first);
			below = fmin(1.0, fmax(0.0, below));
			if (shape_var > 0 && !(period > 0))
			{
				double		upto = fmin(1.0, below + share);

				cuts = fmax(cuts, below * (1 - below) + upto * (1 - upto));
			}
		}
		/* f (1 - a - b), a the share below the range (within 1 - f), b = a + f */
		pinned = f * (1 - 2 * fmin(below, 1.0 - f) - f);
		if (spread_var > 0)
		{
			/* under a profile the rows crowd its busy hours: the exact mean pins down the rows in [t0, t1] by
			 * their covariance with a row's position, f (pos - mean), over its variance (0.25.0), never more than
			 * PINNED_MOST of f (1 - f) */
			double		pinned_by = f * (pos - spread_mean);

			keep = fmax((1 - PINNED_MOST) * f * (1 - f), f * (1 - f) - pinned_by * pinned_by / spread_var);
		}
		else
			keep = fmax(0.0, f * (1 - f) - mean_known(w, step) * pinned * pinned);
		/* the profile's own sampling error (a variance of the share), conditioned alike by the tilt to the
		 * cell's exact mean: the same share of it stays */
		spread = n * keep + keep / (f * (1 - f)) * n * n * doubt + 4 * n * n * shape_var * cuts;
		if (period > 0)
		{
			/* a profiled cell has no other shape to disagree with: its build's calibration weighs its own
			 * spread instead (0.25.0; 1 where it has no weight) */
			double		scaled = cell_doubt_weight(row, &doubt_weights, c, m - 1);

			spread = spread * (scaled * scaled);
		}
		if (order == 0)
		{
			double		k_lo,
						k_hi;

			mean_bounds(n, g0, g1, w, sums.v[c], sums.v[c + 1], t0, t1, step, !slack_null && !quantum_null,
						slack, rounding, holes_at, holes_n, &k_lo, &k_hi);
			if (k_lo == k_hi)	/* the cell's count and mean leave one answer: exact */
			{
				out.estimate += k_lo;
				out.low += k_lo;
				out.high += k_lo;
				continue;
			}
			out.estimate += fmin(k_hi, fmax(k_lo, n * share));
			out.variance += spread;
			weighed = apart != 0 ? cell_doubt_weight(row, &doubt_weights, c, m - 1) : 0.0;
			if (weighed != 0)	/* (a weight 0 adds nothing, an infinite disagreement's product included) */
				shape_error += weighed * apart;
			out.low += k_lo;
			out.high += k_hi;
		}
		else
		{
			/* points inside a cell as weighted means of its ends (no difference of values to overflow) */
			double		x = g0 * (1 - pos) + g1 * pos,
						piece = n * share * x;

			if (isfinite(piece))
				out.estimate += piece;
			else
			{
				/* past float8's range: at 2^-FAR_SCALE beside the whole cells' (0.28.0: two such pieces of opposite
				 * signs read inf - inf) */
				fsum_add(&far, n * share * (ldexp(g0, -FAR_SCALE) * (1 - pos) + ldexp(g1, -FAR_SCALE) * pos));
				far_used = true;
			}
			out.variance += spread * x * x;
			weighed = apart != 0 ? cell_doubt_weight(row, &doubt_weights, c, m - 1) : 0.0;
			if (weighed != 0)
				shape_error += weighed * (apart * fabs(x));
			/* none to all of the cut piece's rows, each between the piece's ends (not read back from t0 and
			 * t1, whose rounding can put them a float8 inside), the products and sums rounded outwards
			 * (query.smooth_1d, 0.27.0) */
			out.low = kde_add_down(out.low, fmin(0.0, nextafter(n * (A > g0 ? A : g0), -INFINITY)));
			out.high = kde_add_up(out.high, fmax(0.0, nextafter(n * (B < g1 ? B : g1), INFINITY)));
		}
	}
	/* the shape's own uncertainty: how far its shares are from the other shape's, each cut cell's weighed as
	 * the build calibrated it (doubt_weight, 0.20.0, and doubt_weights, 0.21.0: calibration.py) */
	out.variance += shape_error * shape_error;
	out.scaled = ldexp(out.estimate, -FAR_SCALE);
	if (far_used)
	{
		out.scaled += fsum_value(&far);
		out.estimate += ldexp(fsum_value(&far), FAR_SCALE);
	}
	return out;
}

/* The rows of a lattice value the column holds where its cells expect lambda there: a Poisson count given
 * that it is at least one; below HELD_MEDIAN_BELOW rows its median (a whole number), from there its mean
 * (query.held_rows, step for step). */
#define HELD_MEDIAN_BELOW 10.0

static double
held_rows(double lambda)
{
	double		half,
				p,
				below;
	int			k;

	if (!(lambda > 0))
		return 0.0;
	if (lambda >= HELD_MEDIAN_BELOW)
		return lambda / -expm1(-lambda);
	half = -expm1(-lambda) / 2;
	p = lambda * exp(-lambda);
	below = p;
	k = 1;
	while (below < half && k < 64)
	{
		k += 1;
		p *= lambda / k;
		below += p;
	}
	return (double) k;
}

/* _kde_range(s kde_synopsis, lo float8, hi float8, moment integer, OUT estimate, OUT variance, OUT low,
 * OUT high): query.range_1d. */
Datum
kde_range(PG_FUNCTION_ARGS)
{
	HeapTupleHeader row;
	double		a = PG_ARGISNULL(1) ? -INFINITY : PG_GETARG_FLOAT8(1);
	double		b = PG_ARGISNULL(2) ? INFINITY : PG_GETARG_FLOAT8(2);
	int			order;
	double		exact = 0,
				exact_low = 0,
				exact_high = 0,
				step,
				kde_rows;
	bool		bounded = false;	/* the heavy values' sum has its own hard bounds (exact_low, exact_high) */
	Moments		part = {0, 0, 0, 0};
	Vector		atoms = {NULL, 0},
				cum = {NULL, 0};
	double	   *index_sums = NULL;	/* a pack's exact running index sums */
	double	   *packed_counts = NULL;	/* and its running counts */
	int			held_values = 0;	/* heavy values in [a, b] */
	int			below = 0,
				upto = 0;		/* they are atoms[below..upto) */
	TupleDesc	desc;
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	if (PG_ARGISNULL(3) || (PG_GETARG_INT32(3) != 0 && PG_GETARG_INT32(3) != 1))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("pg_kde: a range's moment is 0 (count) or 1 (sum)")));
	if (isnan(a) || isnan(b))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("pg_kde: a range's bound is NaN"),
						errhint("Pass NULL or an infinite bound for an open end.")));
	row = PG_GETARG_HEAPTUPLEHEADER(0);
	order = PG_GETARG_INT32(3);
	if (a <= b && a != INFINITY && b != -INFINITY)	/* (no finite value lies at or beyond an infinite bound) */
	{
		step = DatumGetFloat8(kde_row_field(row, "step"));
		atoms = vector(row, "atom_values", false);
		if (atoms.n > 0)
			cum = vector(row, order == 0 ? "atom_cum_count" : "atom_cum_sum", false);
		else
		{
			/* query.heavy_values: packed (atoms.c) where the arrays are empty */
			bytea	   *pack = DatumGetByteaPP(kde_row_field(row, "atom_pack"));

			if (VARSIZE_ANY_EXHDR(pack) > 0)
			{
				double	   *values,
						   *counts,
						   *sums;

				atoms.n = kde_unpack_atoms_kept(VARDATA_ANY(pack), VARSIZE_ANY_EXHDR(pack), step, &values,
												&counts, &sums, &index_sums);
				atoms.v = values;
				packed_counts = counts;
				cum.v = order == 0 ? counts : sums;
				cum.n = atoms.n;
			}
		}
		if (atoms.n > 0)
		{
			upto = bisect(&atoms, b, true);
			below = bisect(&atoms, a, false);
			held_values = upto - below;

			if (cum.n != atoms.n)
				ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED),
								errmsg("pg_kde: the synopsis row's heavy values do not match their sums")));
			if (order == 1 && index_sums != NULL)
			{
				/* packing.range_sum: (K - K') q, rounded once, not a difference of rounded sums */
				int64		k = (upto > 0 ? (int64) index_sums[upto - 1] : 0)
					- (below > 0 ? (int64) index_sums[below - 1] : 0);

				exact = kde_lattice_value((double) k, step);
				if (upto > below)
				{
					/* query.packed_sum_bounds: the float8s either side of the rounded decimal sum, widened by half
					 * an ulp of the largest magnitude a row (a float8 column's rows hold their decimal's float8) */
					double		rows = packed_counts[upto - 1] - (below > 0 ? packed_counts[below - 1] : 0.0);
					double		top = Max(fabs(atoms.v[below]), fabs(atoms.v[upto - 1]));
					double		err = nextafter(rows * (ulp_of(top) / 2), INFINITY);

					/* (whole numbers up to 2^53, the rows' and their sum's, are float8s: exact) */
					if (!(step >= 1 && top <= 9007199254740992.0 && fabs(exact) <= 9007199254740992.0))
					{
						exact_low = kde_add_down(nextafter(exact, -INFINITY), -err);
						exact_high = kde_add_up(nextafter(exact, INFINITY), err);
						bounded = true;
					}
				}
			}
			else
			{
				/* (no heavy value in the range: 0, not inf - inf where the running sums overflowed) */
				exact = upto == below ? 0.0 : (upto > 0 ? cum.v[upto - 1] : 0.0) - (below > 0 ? cum.v[below - 1] : 0.0);
				if (order == 1 && upto > below)
				{
					/* query.heavy_sum: from the values and counts, not the running sums (0.27.0) */
					Vector		counts = vector(row, "atom_cum_count", false);
					if (counts.n != atoms.n)
						ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED),
										errmsg("pg_kde: the synopsis row's heavy values do not match their counts")));
					bounded = heavy_sum(atoms.v, counts.v, below, upto, &exact, &exact_low, &exact_high);
				}
			}
		}
		kde_rows = (double) DatumGetInt64(kde_row_field(row, "kde_rows"));
		if (step > 0)
		{
			/* heavy values that hold every row of their value (heavy_whole; NULL before 0.17.0: not known) */
			bool		whole_null = true;
			Datum		whole_datum = atoms.n > 0 ? kde_row_field_optional(row, "heavy_whole", &whole_null) : 0;
			const Vector *whole = !whole_null && DatumGetBool(whole_datum) ? &atoms : NULL;
			/* query.snap: [a, b] moved out to half-steps around the lattice values it includes */
			double		lo = -INFINITY,
						hi = INFINITY,
						ka = 0,
						kb = 0;
			bool		has_a = isfinite(a),
						has_b = isfinite(b);

			if (has_a)
			{
				ka = ceil(a / step);
				if (kde_lattice_value(ka - 1, step) >= a)
					ka -= 1;
				else if (kde_lattice_value(ka, step) < a)
					ka += 1;
				lo = (ka - 0.5) * step;
			}
			if (has_b)
			{
				kb = floor(b / step);
				if (kde_lattice_value(kb + 1, step) <= b)
					kb += 1;
				else if (kde_lattice_value(kb, step) > b)
					kb -= 1;
				hi = (kb + 0.5) * step;
			}
			/* (a point on a heavy value that holds every row of its value: exact) */
			if (!(has_a && has_b && ka > kb) && !(a == b && held_values > 0 && whole != NULL))
			{
				part = smooth(row, lo, hi, order, step, kde_rows, whole);
				if (a == b && held_values == 0)
				{
					/* a point off the heavy values: the rows of a value the column holds, where its count is
					 * not exact (query.range_1d, held_rows); a sum by the same factor as the count */
					Moments		count = order == 0 ? part : smooth(row, lo, hi, 0, step, kde_rows, whole);

					if (count.low < count.high && count.estimate > 0)
					{
						double		held = fmin(count.high, fmax(count.low, held_rows(count.estimate)));

						/* (the slot's mean value first: a subnormal count would make held / count infinite) */
						part.estimate = order == 0 ? held
							: fmin(part.high, fmax(part.low, held * (part.estimate / count.estimate)));
					}
				}
			}
		}
		else
			part = smooth(row, a, b, order, step, kde_rows, NULL);
	}
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("pg_kde: a record is expected")));
	desc = BlessTupleDesc(desc);
	{
		double		estimate = exact + part.estimate,
					low,
					high;

		if (order == 1 && index_sums == NULL && upto > below && isnan(estimate) && !isnan(exact)
			&& !isnan(part.estimate))
		{
			/* +-inf -+ inf: heavy values and cells whose sums pass float8's range with opposite signs, both at
			 * 2^-FAR_SCALE (query.range_1d; before, NaN within [-inf, inf]) */
			Vector		counts = vector(row, "atom_cum_count", false);
			double		scaled,
						scaled_low,
						scaled_high,
						tiny_rows;

			if (counts.n == atoms.n && heavy_sum_at(atoms.v, counts.v, below, upto, FAR_SCALE, &scaled, &scaled_low,
													&scaled_high, &tiny_rows))
				estimate = ldexp(scaled + part.scaled, FAR_SCALE);
		}

		if (order == 0)
		{
			low = exact + part.low;
			high = exact + part.high;
		}
		else
		{
			/* a sum's hard bounds rounded outwards where the float8 additions round (0.27.0) */
			low = kde_add_down(bounded ? exact_low : exact, part.low);
			high = kde_add_up(bounded ? exact_high : exact, part.high);
		}
		/* the estimate within its hard bounds (0.28.0: a cut piece's sum, its mean value taken from a cell's
		 * start far below the piece, read -2.8e-141 under a hard low of 0); a NaN stays NaN */
		if (estimate < low)
			estimate = low;
		if (estimate > high)
			estimate = high;
		values[0] = Float8GetDatum(estimate);
		values[1] = Float8GetDatum(part.variance);
		values[2] = Float8GetDatum(low);
		values[3] = Float8GetDatum(high);
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}
