#!/usr/bin/env bash
# Stop or start only slurmctld, e.g. for tests of "the controller is down".
#   slurmctld.sh stop      stop it and wait until it is gone
#   slurmctld.sh start     start it and wait until `scontrol ping` says UP and the node is usable
#   slurmctld.sh restart
#   slurmctld.sh status    exit 0 when running, 1 when not
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=/dev/null # one file per service, see services/
for f in "$DEV_DIR"/services/*.sh; do source "$f"; done

case ${1:-} in
  stop) require_root; slurmctld_stop ;;
  start)
    require_root
    running "$SLURMDBD_PIDFILE" slurmdbd || die "slurmdbd is not running: use up.sh"
    slurmctld_start
    wait_for "nodes $SLURM_NODELIST to be usable" 60 nodes_usable
    ;;
  restart) "$0" stop && "$0" start ;;
  status)
    if running "$SLURMCTLD_PIDFILE" slurmctld; then
      echo "slurmctld running (pid $(pidfile_pid "$SLURMCTLD_PIDFILE"))"
    else
      echo "slurmctld not running"; exit 1
    fi
    ;;
  *) echo "usage: $0 stop|start|restart|status" >&2; exit 2 ;;
esac
