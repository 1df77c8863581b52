#!/usr/bin/env bash
# pg_kde's entrypoint for its stand-in PostgreSQL base (docker/postgres/Dockerfile). It provides the parts
# of the official postgres image's start-up that pg_kde's image and tests use, and no more:
#   - POSTGRES_PASSWORD (required unless POSTGRES_HOST_AUTH_METHOD=trust), POSTGRES_USER (default
#     postgres), POSTGRES_DB (default: the user's name), POSTGRES_INITDB_ARGS, POSTGRES_HOST_AUTH_METHOD
#     (default scram-sha-256: logins from other hosts, e.g. the bridge's gateway, need the password);
#   - on the first start with an empty PGDATA: initdb, then every /docker-entrypoint-initdb.d/*.sql (psql)
#     and *.sh (sourced) on a server that listens on its Unix socket only, then that server stops;
#   - then postgres in the foreground as the postgres user, listening on every address.
# Any other command (e.g. bash) runs as given.
set -euo pipefail

if [ "$#" -eq 0 ] || [ "${1#-}" != "$1" ]; then
    set -- postgres "$@"
fi
if [ "$1" != postgres ]; then
    exec "$@"
fi

if [ "$(id -u)" = 0 ]; then  # as root: own the data and socket directories, then run as postgres
    mkdir -p "$PGDATA" /var/run/postgresql
    chown postgres:postgres "$PGDATA" /var/run/postgresql
    chmod 0700 "$PGDATA"
    exec gosu postgres "$BASH_SOURCE" "$@"
fi

if [ ! -s "$PGDATA/PG_VERSION" ]; then
    user="${POSTGRES_USER:-postgres}"
    db="${POSTGRES_DB:-$user}"
    auth="${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}"
    if [ -z "${POSTGRES_PASSWORD:-}" ] && [ "$auth" != trust ]; then
        echo "pg_kde image: POSTGRES_PASSWORD is not set (or set POSTGRES_HOST_AUTH_METHOD=trust)" >&2
        exit 1
    fi
    pwfile="$(mktemp)"
    printf '%s' "${POSTGRES_PASSWORD:-}" > "$pwfile"
    # shellcheck disable=SC2086 # POSTGRES_INITDB_ARGS is a list of options
    initdb --username="$user" --pwfile="$pwfile" --auth-local=trust --auth-host="$auth" \
        ${POSTGRES_INITDB_ARGS:-} -D "$PGDATA"
    rm -f "$pwfile"
    printf 'host all all all %s\n' "$auth" >> "$PGDATA/pg_hba.conf"

    pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start
    psql=(psql -v ON_ERROR_STOP=1 --no-psqlrc --username "$user")
    if [ "$db" != postgres ]; then
        "${psql[@]}" --dbname postgres -v db="$db" -c 'CREATE DATABASE :"db"'
    fi
    for f in /docker-entrypoint-initdb.d/*; do
        case "$f" in
            *.sql) echo "pg_kde image: running $f"; "${psql[@]}" --dbname "$db" -f "$f" ;;
            *.sh) echo "pg_kde image: sourcing $f"; . "$f" ;;
            *) if [ -e "$f" ]; then echo "pg_kde image: ignoring $f"; fi ;;
        esac
    done
    pg_ctl -D "$PGDATA" -m fast -w stop
    echo "pg_kde image: initialised; starting PostgreSQL"
fi

exec "$@" -c listen_addresses='*'
