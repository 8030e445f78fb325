#!/usr/bin/env bash
# Stop or start only a slurmctld, e.g. for tests of "the controller is down".
#   slurmctld.sh stop [cluster-b]     stop it and wait until it is gone
#   slurmctld.sh start [cluster-b]    start it and wait until `scontrol ping` says UP and the nodes are usable
#   slurmctld.sh restart [cluster-b]
#   slurmctld.sh status [cluster-b]   exit 0 when running, 1 when not
# Without a cluster: the default cluster's (gpuportal); cluster-b: the second cluster's
# (services/cluster_b.sh).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=/dev/null # one file per service, see services/
for f in "$DEV_DIR"/services/*.sh; do source "$f"; done

case ${2:-} in
  "") pidfile=$SLURMCTLD_PIDFILE ;;
  "$CLUSTER_B") pidfile=$CLUSTER_B_CTLD_PIDFILE ;;
  *) echo "usage: $0 stop|start|restart|status [$CLUSTER_B]" >&2; exit 2 ;;
esac
case ${1:-}:${2:-} in
  stop:) require_root; slurmctld_stop ;;
  stop:*) require_root; cluster_b_slurmctld_stop ;;
  start:)
    require_root
    running "$SLURMDBD_PIDFILE" slurmdbd || die "slurmdbd is not running: use up.sh"
    slurmctld_start
    wait_for "nodes $SLURM_NODELIST to be usable" 60 nodes_usable
    ;;
  start:*)
    require_root
    running "$SLURMDBD_PIDFILE" slurmdbd || die "slurmdbd is not running: use up.sh"
    [[ -r $CLUSTER_B_CONF ]] || die "$CLUSTER_B is not configured: use up.sh (SLURM_DEV_CLUSTERS=2)"
    cluster_b_slurmctld_start
    wait_for "$CLUSTER_B's node $CLUSTER_B_NODE to be usable" 60 cluster_b_usable
    ;;
  restart:*) "$0" stop "${@:2}" && "$0" start "${@:2}" ;;
  status:*)
    if running "$pidfile" slurmctld; then
      echo "slurmctld${2:+ of $2} running (pid $(pidfile_pid "$pidfile"))"
    else
      echo "slurmctld${2:+ of $2} not running"; exit 1
    fi
    ;;
  *) echo "usage: $0 stop|start|restart|status [$CLUSTER_B]" >&2; exit 2 ;;
esac
