#!/bin/sh
# An exec prefix for fault tests: slurmctld takes an sbatch only LATE_SBATCH_DELAY seconds after it
# was sent, long after the portal's call timed out (as when slurmctld is slow to answer and then
# registers the job anyway). Other commands run as usual.
case "$*" in
  *sbatch*)
    script=$(mktemp)
    cat >"$script"
    # Its own session: the runner's timeout kills this call's process group, not the late sbatch.
    setsid sh -c 'sleep "$1"; shift; "$@" <"$0" >/dev/null 2>&1; rm -f "$0"' \
      "$script" "$LATE_SBATCH_DELAY" "$@" </dev/null >/dev/null 2>&1 &
    exec sleep 3600 ;;
esac
exec "$@"
