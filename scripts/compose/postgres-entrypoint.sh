#!/bin/sh
# PID 1 of klear-postgres (Debian's PostgreSQL): on an empty $PGDATA volume create the cluster, a
# password-protected $POSTGRES_USER owning $POSTGRES_DB, listening on all addresses; then run the server
# as the postgres user. Stop it with SIGINT (PostgreSQL's fast shutdown; docker-compose.yml sets stop_signal).
set -eu
: "${PGDATA:=/var/lib/postgresql/data}" "${POSTGRES_USER:=prefect}" "${POSTGRES_DB:=prefect}"
: "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
as_pg() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }

mkdir -p "$PGDATA" /run/postgresql
chown -R postgres:postgres "$PGDATA" /run/postgresql
chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
  chown postgres "$pwfile"
  as_pg "$bin/initdb" -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" -E UTF8 --locale=C.UTF-8 \
    --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pwfile"
  echo "listen_addresses = '*'" >> "$PGDATA/postgresql.conf"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  as_pg "$bin/pg_ctl" -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
  if [ "$POSTGRES_DB" != postgres ]; then
    as_pg "$bin/createdb" -h /run/postgresql -U "$POSTGRES_USER" -O "$POSTGRES_USER" "$POSTGRES_DB"
  fi
  as_pg "$bin/pg_ctl" -D "$PGDATA" -m fast -w stop >/dev/null
  echo "klear-postgres: initialised $PGDATA (database $POSTGRES_DB, user $POSTGRES_USER)"
fi
exec setpriv --reuid=postgres --regid=postgres --init-groups "$bin/postgres" -D "$PGDATA"
