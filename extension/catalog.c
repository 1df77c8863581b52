/*
 * The catalog's shape checks: _kde_is_vector(anyarray), which the CHECK constraints of kde_catalog and the
 * payload tables call on each of their array columns at every write of a row (a refresh, and every statement a
 * tracked table's triggers apply).
 *
 * In C since 0.31.0: as a SQL function (with its SET clause, or inlined without one) its body was parsed at
 * every call or at every statement, a dozen times a tracked write's statement, a tenth of a millisecond of it.
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/array.h"

#include "pg_kde.h"

PG_FUNCTION_INFO_V1(kde_is_vector);

/*
 * Is the array one readers can index from 1 with no NULL element: no dimension (empty), or one whose lower
 * bound is 1, and no NULL element. Strict: a NULL array is NULL (the checks leave it to NOT NULL).
 */
Datum
kde_is_vector(PG_FUNCTION_ARGS)
{
	ArrayType  *a = PG_GETARG_ARRAYTYPE_P(0);

	if (ARR_NDIM(a) == 0)
		PG_RETURN_BOOL(true);
	PG_RETURN_BOOL(ARR_NDIM(a) == 1 && ARR_LBOUND(a)[0] == 1 && !array_contains_nulls(a));
}
