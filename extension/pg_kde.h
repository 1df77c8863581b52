/*
 * What the files of pg_kde's library share: the value conversions of cells.c, so that the sample
 * (sample.c) and the scan (cells.c) read every type to the same float8.
 */
#ifndef PG_KDE_H
#define PG_KDE_H

#include "postgres.h"

#include "utils/timestamp.h"

/* numeric -> float8, the same value as numeric's own ::float8 cast */
extern double kde_numeric_to_double(Datum datum);

/* epoch seconds of a timestamp or timestamptz, as extract(epoch from ...)::float8 reads them */
extern double kde_epoch_seconds(Timestamp ts);

#endif
