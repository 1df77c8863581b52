/*
 * What the files of pg_kde's library share: the value conversions of cells.c, so that the sample
 * (sample.c) and the scan (cells.c) read every type to the same float8; and the periodic profile's cut of a
 * cell (profile.c), which a range's query (range.c) reads.
 */
#ifndef PG_KDE_H
#define PG_KDE_H

#include "postgres.h"

#include "utils/timestamp.h"

/* numeric -> float8, the same value as numeric's own ::float8 cast */
extern double kde_numeric_to_double(Datum datum);

/* epoch seconds of a timestamp or timestamptz, as extract(epoch from ...)::float8 reads them */
extern double kde_epoch_seconds(Timestamp ts);

/* share of a cut cell [g0, g1]'s rows between fractions t0 <= t1 under a periodic profile (n float4 values),
 * their mean position there and the share's sampling variance per unit (_kde_profile_cut's OUT values) */
extern void kde_profile_share(const float4 *profile, int n, double period, double step, double g0, double g1,
							  double t0, double t1, double mean, double *share, double *pos, double *doubt);

#endif
