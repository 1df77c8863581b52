/*
 * A box of a multi-column synopsis (kde_synopsis_nd): pg_kde.synopsis.multi.box, step for step.
 *
 * Each column's bounds map through the sample's distribution function (its knots) to ranks [a, b]; each
 * point's weight is the product, over the constrained columns, of the mass its reflected Gaussian kernel
 * (width h in rank units; h = 0: the point itself) puts in [a, b], 0 where its value is NULL. The estimate is
 * N/m times the weights' sum (or, for a sum, of weight times the point's value of that column); its variance
 * treats each weight as the chance that the point's row is in the box: N²/m (mean(w v²) − mean(w v)²), v = 1
 * for a count. docs/math.md §13.
 */
#include "pg_kde.h"

#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/typcache.h"

PG_FUNCTION_INFO_V1(kde_box_nd);

#define CODE_SCALE 65534.0
#define CODE_NULL 0xFFFF
#define MAX_COLUMNS 16
/* beyond this many widths from a point its kernel's mass is taken as 0 or 1 (Phi(-4) = 3.2e-5; multi.KERNEL_REACH) */
#define KERNEL_REACH 4.0
/* the narrowest kernel a synopsis may hold (multi.MIN_WIDTH; LSCV's search stops at 1e-6) */
#define MIN_WIDTH 1e-9

typedef struct Column
{
	const double *values;		/* knots, ascending */
	const int32 *below;			/* sampled rows below each knot */
	const int32 *upto;			/* ... and up to it */
	int			n;				/* knots */
	int32		non_null;		/* the column's non-NULL sampled rows */
	bool		complete;		/* every distinct sampled value a knot (F a step function) */
	double		h;				/* kernel width in rank units */
	double		a,
				b;				/* the box's ranks */
	double		lo,
				hi,				/* ... clipped to [0, 1] */
				inv_h,
				inner_lo,		/* a kernel at u in [inner_lo, inner_hi] lies inside [lo, hi]: mass 1 */
				inner_hi;
	bool		constrained,
				reflect0,		/* the reflections at 0 and at 1 can reach [lo, hi] */
				reflect1;
} Column;

static void
corrupt(const char *what)
{
	ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED),
					errmsg("pg_kde: a multi-column synopsis is malformed: %s", what),
					errhint("Rebuild it with kde_refresh.")));
}

/* a one-dimensional array without NULLs of the given element type, from a row's field; *n its length */
static const void *
field_array(HeapTupleHeader row, const char *name, Oid type, int *n)
{
	ArrayType  *a = DatumGetArrayTypeP(kde_row_field(row, name));

	if (ARR_ELEMTYPE(a) != type || ARR_NDIM(a) > 1 || ARR_HASNULL(a))
		corrupt(name);
	*n = ARR_NDIM(a) == 0 ? 0 : ARR_DIMS(a)[0];
	return ARR_DATA_PTR(a);
}

/* F(x−) (strict) or F(x), as a share of the column's non-NULL sampled rows (multi.Knots.cdf) */
static double
column_cdf(const Column *c, double x, bool strict)
{
	int			i = kde_bisect(c->values, c->n, x, false);	/* the first knot not below x */
	double		f;

	if (c->non_null == 0)
		return 0;
	if (i < c->n && c->values[i] == x)
		return (double) (strict ? c->below[i] : c->upto[i]) / c->non_null;
	if (i == 0)
		return 0;
	if (i == c->n)
		return 1;
	if (c->complete)
		return (double) c->upto[i - 1] / c->non_null;
	f = (x - c->values[i - 1]) / (c->values[i] - c->values[i - 1]);
	if (!isfinite(c->values[i] - c->values[i - 1]))	/* knots more than float8's largest apart: halved (exact) */
		f = (x * 0.5 - c->values[i - 1] * 0.5) / (c->values[i] * 0.5 - c->values[i - 1] * 0.5);
	return ((double) c->upto[i - 1] + f * (double) (c->below[i] - c->upto[i - 1])) / c->non_null;
}

/* the knot whose band of ranks holds rank u: the first whose rows up to it are not below u's (the last for a
 * u past them) (multi.Knots.band) */
static int
column_band(const Column *c, double u)
{
	double		k = u * c->non_null;
	int			lo = 0,
				hi = c->n;

	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if ((double) c->upto[mid] < k)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < c->n ? lo : c->n - 1;
}

/* the value at rank u: its band's knot, or linear between two knots kept apart (multi.Knots.value) */
static double
column_value(const Column *c, double u)
{
	double		k = u * c->non_null,
				gap,
				f;
	int			i = column_band(c, u);

	if (k >= (double) c->below[i] || i == 0)
		return c->values[i];
	gap = (double) (c->below[i] - c->upto[i - 1]);
	f = gap > 0 ? (k - (double) c->upto[i - 1]) / gap : 0;
	if (!isfinite(c->values[i] - c->values[i - 1]))	/* knots more than float8's largest apart */
		return c->values[i - 1] * (1 - f) + c->values[i] * f;
	return c->values[i - 1] + f * (c->values[i] - c->values[i - 1]);
}

/* The power of two e by which a box's sums of the column's values are taken at 2^-e where, taken as they are,
 * they ran past float8's range: 0, or where the column's knots reach 2^481 (values v at 2^-e stay below it, so
 * v² and the variance's sums of them stay finite), e with its largest knot at 2^-e below 2^481; the estimate and
 * its variance are then scaled back (±inf past float8's range, of the sum's sign: a running sum of such values
 * had overflowed in the points' order). Only those outputs: values below about 2^-478 underflow at 2^-e. */
static int
sum_exponent(const Column *c)
{
	int			e;

	frexp(fmax(fabs(c->values[0]), fabs(c->values[c->n - 1])), &e);
	return e > 481 ? e - 481 : 0;
}

/* The standard normal distribution function from a table of PHI_STEPS + 1 values over [-KERNEL_REACH,
 * KERNEL_REACH], linear between them (error below 5e-7; multi.normal_cdf reads the same table): a box reads it
 * a few times per point and column, and erfc there cost most of a call. 0 and 1 beyond the table. */
#define PHI_STEPS 2048			/* steps of 0.0039: 16 KB, in the L1 cache */
static double phi_table[PHI_STEPS + 1];
static bool phi_ready = false;

static void
phi_init(void)
{
	for (int i = 0; i <= PHI_STEPS; i++)
	{
		double		z = -KERNEL_REACH + (2.0 * KERNEL_REACH) * i / PHI_STEPS;

		phi_table[i] = 0.5 * erfc(-z * M_SQRT1_2);
	}
	phi_ready = true;
}

static inline double
normal_cdf(double z)
{
	double		t;
	int			i;

	if (z >= KERNEL_REACH)
		return 1;
	if (!(z > -KERNEL_REACH))	/* NaN too: never an index */
		return 0;
	t = (z + KERNEL_REACH) * (PHI_STEPS / (2.0 * KERNEL_REACH));
	i = (int) t;
	if (i >= PHI_STEPS)
		i = PHI_STEPS - 1;
	return phi_table[i] + (t - i) * (phi_table[i + 1] - phi_table[i]);
}

/* The mass in [a, b] of the kernel at u reflected at 0 and 1 (multi._kernel_mass): upto(b') - upto(a') with
 * upto(y) = Phi((y - u)/h) + Phi((y + u)/h) + Phi((y - 2 + u)/h), a' = max(a, 0), b' = min(b, 1). The terms
 * a column's bounds cannot reach are left out (reflect0: a' within the reach of 0; reflect1: b' within the
 * reach of 1): beyond the table's reach Phi is exactly 0 or 1, so the sum is the same. */
static inline double
kernel_mass(const Column *c, double u)
{
	double		m;

	if (c->h == 0)
		return (u >= c->a && u <= c->b) ? 1.0 : 0.0;
	if (u + KERNEL_REACH * c->h < c->a || u - KERNEL_REACH * c->h > c->b)
		return 0;
	if (u >= c->inner_lo && u <= c->inner_hi)
		return 1;
	m = normal_cdf((c->hi - u) * c->inv_h) - normal_cdf((c->lo - u) * c->inv_h);
	if (c->reflect0)
		m += normal_cdf((c->hi + u) * c->inv_h) - normal_cdf((c->lo + u) * c->inv_h);
	if (c->reflect1)
		m += normal_cdf((c->hi - 2.0 + u) * c->inv_h) - normal_cdf((c->lo - 2.0 + u) * c->inv_h);
	return m < 0 ? 0 : (m > 1 ? 1 : m);
}

/* An integer field of the row that a synopsis built before it existed lacks or holds NULL: 0 then. */
static int32
optional_int4_field(HeapTupleHeader row, const char *name)
{
	bool		isnull;
	Datum		value = kde_row_field_optional(row, name, &isnull);

	return isnull ? 0 : DatumGetInt32(value);
}

/*
 * The variance of a box's estimate from balanced points (multi.balanced_variance, docs/math.md §13): the
 * kernel's share (sum w v^2 - sum (w v)^2), the systematic sample's along the curve (successive differences,
 * with the pool's finite-population factor) and the pool's own. pool 0 (a synopsis built before 0.12.0, of a
 * sample thinned in its first column's order): a simple random sample's, as before.
 */
static double
box_variance(double scale, int m, double pool, double n_rows, double total, double second, double squares,
			 double steps)
{
	double		kernel,
				along,
				spread,
				whole;

	if (pool <= 0 || m < 2)
		return fmax(scale * scale * (second - total * total / Max(m, 1)), 0.0);
	kernel = fmax(second - squares, 0.0);
	along = m * fmax(1.0 - m / pool, 0.0) * steps / (2.0 * (m - 1));
	spread = fmax(squares - total * total / m, 0.0) * m / (m - 1);
	whole = n_rows > 0 ? (m / pool) * fmax(1.0 - pool / n_rows, 0.0) * spread : 0.0;
	return scale * scale * (kernel + along + whole);
}

/* the ranks at which a point of the column has some mass in the box */
static inline double
reach_width(const Column *c)
{
	return fmin(c->b, 1.0 + KERNEL_REACH * c->h) - fmax(c->a, -KERNEL_REACH * c->h) + 2 * KERNEL_REACH * c->h;
}

/* the bounds of a query: a float8[] of d elements, NULL elements open */
static void
bounds(ArrayType *a, int d, const char *what, double *out, bool *given)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;

	if (ARR_NDIM(a) != 1)
		ereport(ERROR, (errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
						errmsg("pg_kde: %s must be a one-dimensional array", what)));
	deconstruct_array(a, FLOAT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &elems, &nulls, &n);
	if (n != d)
		ereport(ERROR, (errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
						errmsg("pg_kde: %s has %d elements for %d columns", what, n, d)));
	for (int j = 0; j < d; j++)
	{
		given[j] = !nulls[j];
		out[j] = nulls[j] ? 0 : DatumGetFloat8(elems[j]);
		if (given[j] && isnan(out[j]))
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							errmsg("pg_kde: %s must not hold NaN (NULL leaves a side open)", what)));
	}
}

/* _kde_box_nd(s kde_synopsis_nd, widths float8[], n_rows float8, lo float8[], hi float8[], sum_col integer,
 * group_col integer) RETURNS float8[]: {estimate, variance} of the rows in the box (sum_col 0), or of the sum
 * of column sum_col (1-based) over them; with group_col > 0, one such pair per knot of that column (a
 * category, or a value of a column whose every sampled value is a knot), then one for its NULLs. */
Datum
kde_box_nd(PG_FUNCTION_ARGS)
{
	HeapTupleHeader row = PG_GETARG_HEAPTUPLEHEADER(0);
	ArrayType  *widths_a = PG_GETARG_ARRAYTYPE_P(1);
	double		n_rows = PG_GETARG_FLOAT8(2);
	int			sum_col = PG_GETARG_INT32(5);
	int			group_col = PG_GETARG_INT32(6);
	double	   *group_sum = NULL,
			   *group_sum2 = NULL,
			   *group_squares = NULL,
			   *group_steps = NULL,
				prev = 0,
				squares = 0,
				steps = 0;
	int			prev_g = -1;
	int			groups = 0;
	bytea	   *points = DatumGetByteaPP(kde_row_field(row, "points"));
	const unsigned char *codes = (const unsigned char *) VARDATA_ANY(points);
	int			m = DatumGetInt32(kde_row_field(row, "n_points"));
	int			d,
				n_values,
				n_below,
				n_upto,
				n_nn,
				n_complete,
				order[MAX_COLUMNS],
				k = 0,
				start = 0;
	const int32 *counts = field_array(row, "knot_counts", INT4OID, &d);
	const double *values = field_array(row, "knot_values", FLOAT8OID, &n_values);
	const int32 *below = field_array(row, "knot_below", INT4OID, &n_below);
	const int32 *upto = field_array(row, "knot_upto", INT4OID, &n_upto);
	const int32 *non_null = field_array(row, "non_null", INT4OID, &n_nn);
	const bool *complete = field_array(row, "complete", BOOLOID, &n_complete);
	const double *widths;
	Column		cols[MAX_COLUMNS];
	double		lo[MAX_COLUMNS],
				hi[MAX_COLUMNS],
				sum = 0,
				sum2 = 0,
				scale,
				pool;
	bool		lo_given[MAX_COLUMNS],
				hi_given[MAX_COLUMNS],
				empty = false;
	Datum	   *out;
	int			n_out,
				e = 0;			/* sums at 2^-e (sum_exponent) */

	if (!phi_ready)
		phi_init();
	if (d < 1 || d > MAX_COLUMNS || n_nn != d || n_complete != d || n_below != n_values || n_upto != n_values)
		corrupt("its knot arrays disagree");
	if (m < 1 || (int64) VARSIZE_ANY_EXHDR(points) != (int64) m * d * 2)
		corrupt("its points do not match n_points");
	if (ARR_ELEMTYPE(widths_a) != FLOAT8OID || ARR_NDIM(widths_a) != 1 || ARR_HASNULL(widths_a)
		|| ARR_DIMS(widths_a)[0] != d)
		corrupt("its bandwidth is not one width a column");
	widths = (const double *) ARR_DATA_PTR(widths_a);
	if (!(n_rows >= 0) || !isfinite(n_rows))
		corrupt("its row count");
	if (sum_col < 0 || sum_col > d)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("pg_kde: no column %d to sum", sum_col)));
	if (group_col < 0 || group_col > d)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("pg_kde: no column %d to group by", group_col)));
	bounds(PG_GETARG_ARRAYTYPE_P(3), d, "lo", lo, lo_given);
	bounds(PG_GETARG_ARRAYTYPE_P(4), d, "hi", hi, hi_given);

	for (int j = 0; j < d; j++)
	{
		Column	   *c = &cols[j];

		/* a width is 0 (no kernel) or at least MIN_WIDTH: 1/h stays finite */
		if (counts[j] < 1 || counts[j] > n_values - start || non_null[j] < 0
			|| !(widths[j] == 0 || (widths[j] >= MIN_WIDTH && widths[j] <= 1)))
			corrupt("its knot counts or widths");
		c->values = values + start;
		c->below = below + start;
		c->upto = upto + start;
		c->n = counts[j];
		c->non_null = non_null[j];
		c->complete = complete[j];
		c->h = widths[j];
		for (int i = 0; i < c->n; i++)
			if (!isfinite(c->values[i]) || (i > 0 && c->values[i] <= c->values[i - 1]) || c->below[i] < 0
				|| c->upto[i] < c->below[i] || c->upto[i] > c->non_null || (i > 0 && c->below[i] < c->upto[i - 1]))
				corrupt("its knots are not ascending");
		start += c->n;
		c->constrained = lo_given[j] || hi_given[j];
		if (!c->constrained)
			continue;
		if (lo_given[j] && hi_given[j] && lo[j] > hi[j])
			empty = true;
		c->a = lo_given[j] ? column_cdf(c, lo[j], true) : -1.0;
		c->b = hi_given[j] ? column_cdf(c, hi[j], false) : 2.0;
		c->lo = fmax(c->a, 0.0);
		c->hi = fmin(c->b, 1.0);
		c->inv_h = c->h > 0 ? 1.0 / c->h : 0;

		/*
		 * Where the kernel's reach, with 1e-12 to spare (far more than the rounding of (y - u)/h), lies
		 * within [lo, hi], every Phi above reads exactly 0 or 1 and the mass is exactly 1: the same sum as
		 * from the full formula, a few operations sooner. (Empty where the box is narrower than the reach.)
		 */
		c->inner_lo = c->lo + (KERNEL_REACH * c->h + 1e-12);
		c->inner_hi = c->hi - (KERNEL_REACH * c->h + 1e-12);
		/* (y + u)/h >= lo/h: both terms 1 where lo is out of the reach of 0; (y - 2 + u)/h <= (hi - 1)/h */
		c->reflect0 = c->lo < KERNEL_REACH * c->h;
		c->reflect1 = c->hi > 1.0 - KERNEL_REACH * c->h;
		order[k++] = j;
	}
	if (start != n_values)
		corrupt("its knot counts do not add up");
	/* the narrowest columns first, as far as their kernels reach: most points leave the box there */
	for (int i = 1; i < k; i++)
		for (int t = i; t > 0 && reach_width(&cols[order[t]]) < reach_width(&cols[order[t - 1]]); t--)
		{
			int			swap = order[t];

			order[t] = order[t - 1];
			order[t - 1] = swap;
		}

	if (group_col > 0)
	{
		/* a group column the box also bounds is counted unsmoothed: a group whose value lies within the bounds
		 * holds all its rows, one outside none (multi.box) */
		if (cols[group_col - 1].constrained)
		{
			cols[group_col - 1].h = 0;
			cols[group_col - 1].inv_h = 0;
		}
		if (!cols[group_col - 1].complete)
			ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
							errmsg("pg_kde: a synopsis groups by a category, or a column whose sample holds few values")));
		groups = cols[group_col - 1].n;
		group_sum = palloc0(sizeof(double) * (groups + 1));
		group_sum2 = palloc0(sizeof(double) * (groups + 1));
		group_squares = palloc0(sizeof(double) * (groups + 1));
		group_steps = palloc0(sizeof(double) * (groups + 1));
	}
	scale = n_rows / m;
	pool = (double) optional_int4_field(row, "pool_rows");
	n_out = group_col > 0 ? 2 * (groups + 1) : 2;
	out = palloc(sizeof(Datum) * n_out);
	/* pass 0 sums the values as they are; where a sum or variance ran past float8's range and the column's knots
	 * reach 2^481, pass 1 sums them at 2^-e (sum_exponent) for those outputs alone (0.28.0) */
	for (int pass = 0; pass < 2; pass++)
	{
		bool		all_finite = true;

		e = pass == 0 ? 0 : sum_exponent(&cols[sum_col - 1]);
		sum = sum2 = squares = steps = prev = 0;
		prev_g = -1;
		if (group_col > 0)
		{
			memset(group_sum, 0, sizeof(double) * (groups + 1));
			memset(group_sum2, 0, sizeof(double) * (groups + 1));
			memset(group_squares, 0, sizeof(double) * (groups + 1));
			memset(group_steps, 0, sizeof(double) * (groups + 1));
		}
		for (int i = 0; i < m && !empty; i++)
		{
			const unsigned char *p = codes + (size_t) i * d * 2;
			double		w = 1,
						w2;

			for (int t = 0; t < k && w > 0; t++)
			{
				int			j = order[t];
				int			code = p[2 * j] | (p[2 * j + 1] << 8);

				w = code == CODE_NULL ? 0 : w * kernel_mass(&cols[j], code * (1.0 / CODE_SCALE));
			}
			if (w > 0 && sum_col > 0)
			{
				int			j = sum_col - 1;
				int			code = p[2 * j] | (p[2 * j + 1] << 8);
				double		v = code == CODE_NULL ? 0 : ldexp(column_value(&cols[j], code / CODE_SCALE), -e);

				w2 = w * v * v;
				w = w * v;
			}
			else
				w2 = w;
			if (group_col > 0)
			{
				int			g = -1;		/* the group the point counts in, if any */

				if (w != 0)
				{
					int			j = group_col - 1;
					int			code = p[2 * j] | (p[2 * j + 1] << 8);

					g = code == CODE_NULL ? groups : column_band(&cols[j], code / CODE_SCALE);

					/* a group whose value the box's own bounds on that column leave out holds none of its rows
					 * (the kernel of a smoothed column reaches past them) */
					if (g != groups && ((lo_given[j] && cols[j].values[g] < lo[j]) || (hi_given[j] && cols[j].values[g] > hi[j])))
						g = -1;
				}
				if (g >= 0)
				{
					group_sum[g] += w;
					group_sum2[g] += w2;
					group_squares[g] += w * w;
				}
				/* successive differences of each group's weights: both squares, less twice the product where
				 * neighbours share the group */
				if (i > 0)
				{
					if (g >= 0)
						group_steps[g] += w * w;
					if (prev_g >= 0)
						group_steps[prev_g] += prev * prev;
					if (g >= 0 && g == prev_g)
						group_steps[g] -= 2 * w * prev;
				}
				prev_g = g;
				if (g < 0)
					w = 0;			/* (what the steps below compare: nothing in a group) */
			}
			else if (i > 0)
				steps += (w - prev) * (w - prev);
			prev = w;
			squares += w * w;
			sum += w;
			sum2 += w2;
			if ((i & 65535) == 65535)
				CHECK_FOR_INTERRUPTS();
		}
		for (int g = 0; 2 * g < n_out; g++)
		{
			double		estimate,
						variance;

			if (group_col > 0)
			{
				estimate = ldexp(scale * group_sum[g], e);
				variance = ldexp(box_variance(scale, m, pool, n_rows, group_sum[g], group_sum2[g], group_squares[g],
											  group_steps[g]), 2 * e);
			}
			else
			{
				estimate = ldexp(scale * sum, e);
				variance = ldexp(box_variance(scale, m, pool, n_rows, sum, sum2, squares, steps), 2 * e);
			}
			if (pass == 0 || !isfinite(DatumGetFloat8(out[2 * g])))
				out[2 * g] = Float8GetDatum(estimate);
			if (pass == 0 || !isfinite(DatumGetFloat8(out[2 * g + 1])))
				out[2 * g + 1] = Float8GetDatum(variance);
			all_finite = all_finite && isfinite(estimate) && isfinite(variance);
		}
		if (all_finite || sum_col == 0 || sum_exponent(&cols[sum_col - 1]) == 0)
			break;
	}
	PG_RETURN_ARRAYTYPE_P(construct_array(out, n_out, FLOAT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}
