-- pg_kde @PG_KDE_VERSION@: approximate range aggregates from kernel density synopses.
\echo Use "CREATE EXTENSION pg_kde CASCADE" to load this file. \quit
