# shellcheck shell=bash
# PostgreSQL 15 as the postgres user with its own datadir; role and database
# `gpuportal` (password gpuportal, CREATEDB so Django's test runner can create
# test_gpuportal).

PG_DIR=$STATE/postgres
PG_DATA=$PG_DIR/data
PG_SOCK=$PG_DIR/run

pg_running() { running "$PG_DATA/postmaster.pid" postgres; }
# Admin connection: as the postgres OS user over our unix socket (peer auth).
# shellcheck disable=SC2120 # arguments are optional (SQL may come on stdin)
pg_admin() { runuser -u postgres -- "$PG_BIN/psql" -h "$PG_SOCK" -p "$PG_PORT" -U postgres -d postgres -XtAq -v ON_ERROR_STOP=1 "$@"; }

postgres_up() {
  [[ -x $PG_BIN/postgres ]] || die "$PG_BIN/postgres missing (package postgresql-15)"
  mkdir_owned "$PG_DIR" postgres:postgres 755
  mkdir_owned "$PG_SOCK" postgres:postgres 755
  touch_owned "$LOG/postgres.log" postgres:postgres
  if [[ ! -s $PG_DATA/PG_VERSION ]]; then
    log "postgres: initdb $PG_DATA"
    rm -rf "$PG_DATA"
    runuser -u postgres -- "$PG_BIN/initdb" -D "$PG_DATA" -U postgres -E UTF8 --locale=C.UTF-8 \
      --auth-local=peer --auth-host=scram-sha-256 >>"$LOG/postgres.log" 2>&1 ||
      die "initdb failed, see $LOG/postgres.log"
    echo "include_if_exists = 'gpuportal.conf'" >>"$PG_DATA/postgresql.conf"
  fi
  RENDER_CHANGED=0
  render "$DEV_DIR/conf/postgresql.conf.in" "$PG_DATA/gpuportal.conf" 600 postgres:postgres
  if ((RENDER_CHANGED)) && pg_running; then
    log "postgres: config changed, restarting"
    postgres_down
  fi
  if ! pg_running; then
    log "postgres: starting on 127.0.0.1:$PG_PORT"
    # A postmaster.pid left by an unclean stop would block the start; the
    # running-check above already established that its pid is not postgres.
    rm -f "$PG_DATA/postmaster.pid"
    runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$LOG/postgres.log" -w -t 60 start >/dev/null ||
      die "postgres did not start, see $LOG/postgres.log"
  fi
  wait_for "postgres on 127.0.0.1:$PG_PORT" 30 "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT"

  pg_admin <<'SQL'
SELECT 'CREATE ROLE gpuportal LOGIN CREATEDB PASSWORD ''gpuportal'''
 WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'gpuportal') \gexec
SELECT 'CREATE DATABASE gpuportal OWNER gpuportal'
 WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'gpuportal') \gexec
SQL
}

postgres_down() {
  if pg_running; then
    log "stopping postgres"
    # fast: disconnect clients (a test run may still hold connections).
    runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w -t 60 stop >/dev/null ||
      stop_pidfile postgres "$PG_DATA/postmaster.pid" postgres 30
  fi
}
