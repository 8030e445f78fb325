# shellcheck shell=bash
# slurmrestd, Slurm's REST daemon, on 127.0.0.1:$SLURMRESTD_PORT for the portal's second adapter
# (SLURM_ADAPTER=slurmrestd, slurm/rest.py). It authenticates every request by the caller's own
# JSON Web Token (rest_auth/jwt; SLURM_JWT=daemon: it talks to slurmctld and slurmdbd with that
# token, never as itself), and runs under an account of its own: it refuses root and SlurmUser.

SLURMRESTD_USER=slurmrestd
SLURMRESTD_PORT=6820   # free: slurmd i listens on 6820+i (lib.sh)
SLURMRESTD_PIDFILE=$RUN/slurmrestd.pid
SLURM_JWT_KEY=$STATE/slurm/jwt_hs256.key

# The HS256 key that slurmctld and slurmdbd check tokens with (AuthAltParameters in conf/*.in).
# Made once; only SlurmUser (root here) reads it: whoever holds it can sign a token for anyone.
slurm_jwt_key() {
  mkdir -p "$STATE/slurm"
  if [[ ! -s $SLURM_JWT_KEY ]]; then
    log "slurm: generating the JWT key $SLURM_JWT_KEY"
    (umask 077 && head -c 32 /dev/urandom >"$SLURM_JWT_KEY.new") && mv -f "$SLURM_JWT_KEY.new" "$SLURM_JWT_KEY"
  fi
  chown root:root "$SLURM_JWT_KEY"
  chmod 600 "$SLURM_JWT_KEY"
}

# Any HTTP answer (401 without a token) means it listens.
slurmrestd_ping() { curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$SLURMRESTD_PORT/slurm/v0.0.38/ping"; }

slurmrestd_up() {
  getent passwd "$SLURMRESTD_USER" >/dev/null \
    || useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$SLURMRESTD_USER"
  # A restart of slurmctld after a config change leaves slurmrestd on the old slurm.conf.
  if running "$SLURMRESTD_PIDFILE" slurmrestd && [[ /etc/slurm/slurm.conf -nt $SLURMRESTD_PIDFILE ]]; then
    log "slurmrestd: slurm.conf changed, restarting"
    slurmrestd_down
  fi
  if ! running "$SLURMRESTD_PIDFILE" slurmrestd; then
    log "slurmrestd: starting on 127.0.0.1:$SLURMRESTD_PORT as $SLURMRESTD_USER"
    touch_owned "$LOG/slurmrestd.log" "$SLURMRESTD_USER"
    # It stays in the foreground: setsid detaches it (no fork here, so $! is its pid), setpriv
    # drops to its account before it starts.
    SLURM_JWT=daemon setsid setpriv --reuid="$SLURMRESTD_USER" --regid="$SLURMRESTD_USER" --init-groups \
      slurmrestd -a rest_auth/jwt -s openapi/v0.0.38,openapi/dbv0.0.38 "127.0.0.1:$SLURMRESTD_PORT" \
      </dev/null >>"$LOG/slurmrestd.log" 2>&1 &
    echo $! >"$SLURMRESTD_PIDFILE"
  fi
  wait_for "slurmrestd on 127.0.0.1:$SLURMRESTD_PORT" 30 slurmrestd_ping
}

slurmrestd_down() {
  stop_pidfile slurmrestd "$SLURMRESTD_PIDFILE" slurmrestd
}
