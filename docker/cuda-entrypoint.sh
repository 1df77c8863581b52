#!/usr/bin/env bash
# First start: initialise the cluster (password from POSTGRES_PASSWORD, required), listen on all
# addresses, create the extension in the postgres database. Then run the server in the foreground.
set -euo pipefail
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  : "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
  initdb -D "$PGDATA" -U postgres --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 -E UTF8
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  pg_ctl -D "$PGDATA" -w start -o "-c listen_addresses=''"
  psql -v ON_ERROR_STOP=1 -U postgres -d postgres -c 'CREATE EXTENSION IF NOT EXISTS pg_kde CASCADE;'
  pg_ctl -D "$PGDATA" -w stop
fi
exec postgres -D "$PGDATA" -c listen_addresses='*'
