# shellcheck shell=bash
# munged: authentication for every Slurm RPC. Runs as the munge user with the
# default socket (/run/munge/munge.socket.2), which is where Slurm looks.

MUNGE_KEY=/etc/munge/munge.key
MUNGE_PIDFILE=/run/munge/munged.pid

munge_up() {
  # /run is a tmpfs on real machines and is not recreated by anything here.
  mkdir_owned /run/munge munge:munge 755
  if [[ ! -s $MUNGE_KEY ]]; then
    log "munge: generating $MUNGE_KEY"
    mkdir_owned /etc/munge munge:munge 700
    runuser -u munge -- mungekey --create --keyfile="$MUNGE_KEY"
  fi
  chown munge:munge "$MUNGE_KEY"
  chmod 400 "$MUNGE_KEY"
  touch_owned "$LOG/munged.log" munge:munge
  chmod 640 "$LOG/munged.log"

  if ! running "$MUNGE_PIDFILE" munged; then
    log "munge: starting munged"
    runuser -u munge -- munged --pid-file="$MUNGE_PIDFILE" --log-file="$LOG/munged.log" \
      </dev/null >>"$LOG/munged.log" 2>&1
  fi
  wait_for "munge (munge -n | unmunge)" 20 bash -c 'munge -n | unmunge'
}

munge_down() {
  stop_pidfile munged "$MUNGE_PIDFILE" munged
}
