/*
 * What the files of pg_kde's library share: the value conversions of cells.c, so that the sample
 * (sample.c) and the scans (cells.c, cells2.c) read every type to the same float8, and the scans' array and
 * int128 helpers; the periodic profile's cut of a cell (profile.c) and the packed heavy values (atoms.c),
 * which a range's query (range.c) reads.
 */
#ifndef PG_KDE_H
#define PG_KDE_H

#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "storage/itemptr.h"
#include "utils/array.h"
#include "utils/date.h"
#include "utils/timestamp.h"

/* numeric -> float8, the same value as numeric's own ::float8 cast */
extern double kde_numeric_to_double(Datum datum);

/* epoch seconds of a timestamp or timestamptz, as extract(epoch from ...)::float8 reads them */
extern double kde_epoch_seconds(Timestamp ts);

/* epoch seconds of a date's midnight, UTC */
extern double kde_date_seconds(DateADT d);

/* a float8[] argument's values, checked: one dimension, no NULLs, finite, ascending (strictly with strict),
 * at least min_len of them; *len gets their number */
extern double *kde_sorted_array(ArrayType *a, const char *what, int min_len, bool strict, int *len);

/* whether the refresh's row sample keeps a row (its ctid and table) at that share and seed (sample.c) */
extern bool kde_keep_row(ItemPointer tid, Oid table, double share, int64 seed);

/* the cell of v on a grid of m points: the points <= v, less one, clamped to 0 .. m - 2 (width_bucket's rule,
 * values beyond the ends in the outer cells) */
extern int	kde_cell_of(const double *grid, int m, double v);

/* widen [*lo, *hi] (NaN: empty) to hold v */
extern void kde_widen(double *lo, double *hi, double v);

/* add x to the int128 kept as (low, high) int64 words at pair */
extern void kde_add_quanta(int64 *pair, __int128 x);

/* The values of a periodic profile (*values) and their number n, returned, when the array is one: a 1-D float4[]
 * without NULLs of K + 2 >= 3 values, cumulative shares C_0 = 0 <= ... <= C_K = 1 and a row count >= 1; else 0
 * (profile.c) */
extern int	kde_profile_values(ArrayType *array, const float4 **values);
/* share of a cut cell [g0, g1]'s rows between fractions t0 <= t1 under a periodic profile (n float4 values),
 * their mean position there and the variance of that share its own sample leaves (_kde_profile_cut's OUT
 * values) */
extern void kde_profile_share(const float4 *profile, int n, double period, double step, double g0, double g1,
							  double t0, double t1, double mean, double *share, double *pos, double *doubt);
/* the same given the cell's moments z (kde_profile_piece_moments over [0, 1], whole) */
extern void kde_profile_share_of(const float4 *profile, int n, double period, double step, double g0, double g1,
								 const double *z, double t0, double t1, double mean, double *share, double *pos,
								 double *doubt);
/* its parts (cells.profile_piece_moments, profile_tilt, profile_tilted, profile_spread): a piece's moments
 * [int p, int t p, int t^2 p, int t^3 p] (the whole cell's with whole), the tilt to a mean from the cell's moments
 * z, a piece's share and position under a tilt, and the mean and variance of a row's position in the cell */
extern void kde_profile_piece_moments(const float4 *profile, int n, double period, double step, double g0,
									  double g1, double t0, double t1, bool whole, double *c);
extern double kde_profile_tilt(const double *z, double mean);
extern void kde_profile_tilted(const double *z, const double *c, double beta, double t0, double t1, double *share,
							   double *pos);
extern void kde_profile_spread(const double *z, double beta, double slots, double *mean, double *var);
/* The largest tilt of the profile's density p (1 + beta (t - 1/2)): it stays non-negative (cells.PROFILE_TILT). */
#define PROFILE_TILT 2.0

/* the float8 value of lattice point k: k q for steps of 1 and more, k / (1/q) below (query.lattice_value) */
static inline double
kde_lattice_value(double k, double step)
{
	return step >= 1 ? k * step : k / rint(1 / step);
}

/* Python's bisect on n ascending values: bisect_left, or with right bisect_right (atoms.c) */
extern int	kde_bisect(const double *v, int n, double x, bool right);

/* a column of a synopsis row (a composite argument), never NULL: an error says which is */
extern Datum kde_row_field(HeapTupleHeader row, const char *name);

/* a column of a synopsis row that may be NULL or absent (added by a later version than the row's table):
 * isnull then */
extern Datum kde_row_field_optional(HeapTupleHeader row, const char *name, bool *isnull);

/* a float8[] of n values */
extern ArrayType *kde_float8_array(const double *v, int n);

/* how many steps from 0 a lattice reaches (cells.STEP_RANGE): past it a half-step bound rounds onto a value */
#define KDE_STEP_RANGE 0x1p40

/* sums past float8's range are taken at 2^-FAR_SCALE and scaled back (query.FAR_SCALE, 0.28.0): the heavy values'
 * and a pair table's where a product or the sum overflows, whole cells' and cut pieces' estimates where theirs
 * did; a count times a value below float8's largest stays below 2^(1024 - FAR_SCALE + 53) there */
#define FAR_SCALE 128

/* whether v is a lattice point of step: exactly the float8 of its index k, within KDE_STEP_RANGE steps of 0
 * (cells.on_lattice): k q, or k / (1/q) for steps below 1 (k q again below 2^-53, a power-of-two quantum);
 * near 0 only 0 itself */
static inline bool
kde_on_lattice(double v, double step)
{
	double		k = rint(v / step);

	return fabs(k) <= KDE_STEP_RANGE && (step < 0x1p-53 ? k * step : kde_lattice_value(k, step)) == v;
}

/* the heavy values of a pack (atoms.c; pg_kde.synopsis.packing): their number, and palloc'd arrays of the
 * values, their cumulative counts and exact cumulative sums, and (index_sums not NULL) the running sums K of
 * count x lattice index, exact integers; a malformed pack is an error */
extern int	kde_unpack_atoms(const char *bytes, int len, double step, double **values, double **counts,
							 double **sums, double **index_sums);
extern int	kde_unpack_atoms_kept(const char *bytes, int len, double step, double **values, double **counts,
								  double **sums, double **index_sums);

#endif
