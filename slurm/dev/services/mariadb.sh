# shellcheck shell=bash
# Private MariaDB for slurmdbd (database slurm_acct_db, DB user slurm).

MARIADB_DIR=$STATE/mariadb
MARIADB_CNF=$MARIADB_DIR/my.cnf
MARIADB_PIDFILE=$MARIADB_DIR/mariadbd.pid

# shellcheck disable=SC2120 # arguments are optional (SQL may come on stdin)
mariadb_sql() { mariadb --defaults-file="$MARIADB_CNF" -u root "$@"; }

mariadb_up() {
  # mariadbd runs as mysql: its dirs and log must belong to it.
  mkdir_owned "$MARIADB_DIR" mysql:mysql 755
  touch_owned "$LOG/mariadb.log" mysql:mysql
  RENDER_CHANGED=0
  render "$DEV_DIR/conf/mariadb.cnf.in" "$MARIADB_CNF" 644
  if ((RENDER_CHANGED)) && running "$MARIADB_PIDFILE" mariadbd; then
    log "mariadb: config changed, restarting"
    mariadb_down
  fi

  if [[ ! -d $MARIADB_DIR/data/mysql ]]; then
    log "mariadb: initialising $MARIADB_DIR/data"
    rm -rf "$MARIADB_DIR/data"
    # root@localhost authenticates via the unix socket (we are root), no password.
    mariadb-install-db --defaults-file="$MARIADB_CNF" --skip-test-db \
      --auth-root-authentication-method=socket >>"$LOG/mariadb.log" 2>&1 ||
      die "mariadb-install-db failed, see $LOG/mariadb.log"
  fi

  if ! running "$MARIADB_PIDFILE" mariadbd; then
    log "mariadb: starting mariadbd on 127.0.0.1:$MARIADB_PORT"
    # mariadbd does not daemonize itself.
    setsid -f mariadbd --defaults-file="$MARIADB_CNF" </dev/null >>"$LOG/mariadb.log" 2>&1
  fi
  wait_for "mariadb on $MARIADB_DIR/mysqld.sock" 60 mariadb_sql -e 'select 1'

  # Idempotent: IF NOT EXISTS everywhere; both host spellings of loopback.
  mariadb_sql <<SQL
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$SLURMDB_PASS';
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$SLURMDB_PASS';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
SQL
}

mariadb_down() {
  stop_pidfile mariadbd "$MARIADB_PIDFILE" mariadbd 60
}
