#!/usr/bin/env bash
# Bring up the local gpuportal test bed: munge, MariaDB + slurmdbd, slurmctld,
# one slurmd per node (SLURM_DEV_NODES, default 2; 4 fake A100s each), a second cluster "cluster-b"
# in the same slurmdbd (SLURM_DEV_CLUSTERS=1 leaves it out), OpenLDAP, Redis and PostgreSQL, all on
# loopback with state under ${GPUPORTAL_STATE:-/var/lib/gpuportal}.
#
# Idempotent: installs missing Debian packages (only then touches apt), starts
# what is not running, restarts a daemon whose rendered config changed, and
# waits until everything answers. A second run while up takes a second or two.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=/dev/null # one file per service, see services/
for f in "$DEV_DIR"/services/*.sh; do source "$f"; done

require_root
check_state_path
slurm_check_no_other_bed
start=$SECONDS

packages_ensure

mkdir_owned "$STATE" root:root 755
mkdir_owned "$LOG" root:root 755
mkdir_owned "$RUN" root:root 755

unix_users_up
munge_up
mariadb_up
slurm_up
echo "$SLURM_DEV_CLUSTERS" >"$STATE/slurm/dev-clusters"
cluster_b_up
slurmrestd_up
gpu_standin_up
ldap_up
redis_up
postgres_up

cluster_b_summary="            cluster $CLUSTER_B, node $CLUSTER_B_NODE (2x gres gpu:a100), partitions gpu* debug; conf $CLUSTER_B_CONF_DIR
            slurmctld :$CLUSTER_B_CTLD_PORT  slurmd :$CLUSTER_B_NODE_PORT  -> the same slurmdbd; clients: -M $CLUSTER_B"
((SLURM_DEV_CLUSTERS > 1)) || cluster_b_summary="            (SLURM_DEV_CLUSTERS=1: no second cluster)"
cat <<SUMMARY
gpuportal test bed is up ($((SECONDS - start)) s), state in $STATE, logs in $LOG/
  slurm     cluster gpuportal, nodes $SLURM_NODELIST (4x gres gpu:a100 each), partitions gpu* debug; conf /etc/slurm
            slurmctld :6817  slurmdbd :6819  slurmd :$(node_port "${NODES[0]}")..$(node_port "${NODES[-1]}")  -> MariaDB 127.0.0.1:$MARIADB_PORT (slurm_acct_db)
$cluster_b_summary
            slurmrestd 127.0.0.1:$SLURMRESTD_PORT (JWT: scontrol token; key $SLURM_JWT_KEY)
  gpus      /usr/local/bin/nvidia-smi: a stand-in (fake GPUs, figures from gpu/<node>/nvidia<N>.state); gpu-busy -- CMD
  munge     /run/munge/munge.socket.2
  ldap      $LDAP_URI  base $LDAP_SUFFIX  admin $LDAP_ROOTDN / $LDAP_ROOTPW
            users alice bob ada (portal-users; ada also portal-admins), eve (no group); password <uid>-pw
  redis     redis://127.0.0.1:$REDIS_PORT/0
  postgres  postgres://gpuportal:gpuportal@127.0.0.1:$PG_PORT/gpuportal
  env       source $DEV_DIR/env.sh
SUMMARY
