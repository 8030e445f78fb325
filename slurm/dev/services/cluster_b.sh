# shellcheck shell=bash
# The bed's second Slurm cluster, "cluster-b" (SLURM_DEV_CLUSTERS=2, the default; see lib.sh): its
# own slurmctld (:6930) and one slurmd, b-node1 (:6931, 2 fake A100s), on this host, registered in
# the default cluster's slurmdbd as a real multi-cluster site does: `sbatch|squeue|sacct|scancel -M
# cluster-b`, `sinfo -M all` and `sacctmgr ... cluster=cluster-b` work from the default client
# configuration. Its configuration is /etc/slurm-cluster-b (SLURM_CONF for its daemons and for
# clients that want it as their default); state, spool, pid and log files are its own.

CLUSTER_B=cluster-b
CLUSTER_B_CONF_DIR=/etc/slurm-cluster-b
CLUSTER_B_CONF=$CLUSTER_B_CONF_DIR/slurm.conf
CLUSTER_B_STATE=$STATE/slurm-cluster-b
CLUSTER_B_RUN=$RUN/cluster-b
CLUSTER_B_NODE=b-node1              # as in conf/cluster-b/*.in
CLUSTER_B_CTLD_PORT=6930
CLUSTER_B_NODE_PORT=6931
CLUSTER_B_CTLD_PIDFILE=$CLUSTER_B_RUN/slurmctld.pid
CLUSTER_B_SLURMD_PIDFILE=$CLUSTER_B_RUN/slurmd-$CLUSTER_B_NODE.pid
CLUSTER_B_HOSTS_MARK="# gpuportal cluster-b nodes"

# Commands for cluster-b alone. Its daemons run with SLURM_CONF in their environment (not -f):
# slurmd hands it on to each slurmstepd, which is how cluster_b_stepds tells this cluster's job
# steps from the default cluster's.
cluster_b() { SLURM_CONF=$CLUSTER_B_CONF "$@"; }

cluster_b_configure() {
  local n dev
  mkdir -p "$CLUSTER_B_CONF_DIR" "$CLUSTER_B_STATE/ctld" "$CLUSTER_B_STATE/d/$CLUSTER_B_NODE" "$CLUSTER_B_RUN"
  # Its own managed line in /etc/hosts (rewritten in place, like hosts_entries in slurm.sh).
  local want="127.0.0.1 $CLUSTER_B_NODE $CLUSTER_B_HOSTS_MARK" others
  if ! grep -qxF "$want" /etc/hosts; then
    others=$(grep -vF "$CLUSTER_B_HOSTS_MARK" /etc/hosts || true)
    printf '%s\n%s\n' "$others" "$want" >/etc/hosts
  fi
  # 2 fake GPUs with their stand-in state files (services/slurm.sh fake_gpus, services/gpu.sh).
  mkdir_owned "$STATE/gpu/$CLUSTER_B_NODE" root:root 755
  for n in 0 1; do
    dev=$STATE/gpu/$CLUSTER_B_NODE/nvidia$n
    if [[ ! -c $dev || $(stat -c '%t:%T' "$dev") != "c3:$n" ]]; then
      rm -f "$dev"
      mknod -m 666 "$dev" c 195 "$n"
    fi
    [[ -e $dev.state ]] || : >"$dev.state"
    chmod 666 "$dev.state"
  done
  RENDER_CHANGED=0
  render "$DEV_DIR/conf/cluster-b/slurm.conf.in" "$CLUSTER_B_CONF" 644
  render "$DEV_DIR/conf/cluster-b/gres.conf.in" "$CLUSTER_B_CONF_DIR/gres.conf" 644
  if ((RENDER_CHANGED)) && cluster_b_any_running; then
    log "$CLUSTER_B: config changed, restarting its daemons"
    cluster_b_down
  fi
}

cluster_b_any_running() {
  running "$CLUSTER_B_CTLD_PIDFILE" slurmctld || running "$CLUSTER_B_SLURMD_PIDFILE" slurmd
}

# The cluster in slurmdbd, before its slurmctld first registers, and the default cluster's
# associations for the bed's accounts (services/slurm.sh slurm_accounts): account portal with the
# demo users and the portal's operator, and the projects' parent account. Coordinators and admin
# levels are per account and per user, not per cluster: slurm_portal_grants made them already.
cluster_b_accounts() {
  local have u users
  if ! sacctmgr -n -P list cluster "$CLUSTER_B" format=cluster | grep -qx "$CLUSTER_B"; then
    log "$CLUSTER_B: registering it in slurmdbd"
    sacctmgr -i add cluster "$CLUSTER_B" >/dev/null
  fi
  have=$(sacctmgr -n -P list assoc cluster="$CLUSTER_B" format=account,user)
  if ! grep -qx "$SLURM_ACCOUNT|" <<<"$have"; then
    sacctmgr -i add account "$SLURM_ACCOUNT" cluster="$CLUSTER_B" >/dev/null
  fi
  users=$(demo_uids)
  id -u "$SLURM_PORTAL_OPERATOR" >/dev/null 2>&1 && users+=$'\n'$SLURM_PORTAL_OPERATOR
  for u in $users; do
    grep -qx "$SLURM_ACCOUNT|$u" <<<"$have" ||
      sacctmgr -i add user "$u" account="$SLURM_ACCOUNT" cluster="$CLUSTER_B" >/dev/null
  done
  if ! grep -qx "$SLURM_PROJECTS_PARENT|" <<<"$have" &&
    sacctmgr -n -P list account "$SLURM_PROJECTS_PARENT" format=account | grep -q .; then
    sacctmgr -i add account "$SLURM_PROJECTS_PARENT" cluster="$CLUSTER_B" >/dev/null
  fi
}

cluster_b_ping() { cluster_b scontrol ping | grep -q 'is UP'; }

cluster_b_slurmctld_start() {
  local flags=()
  if ! running "$CLUSTER_B_CTLD_PIDFILE" slurmctld; then
    [[ -e $CLUSTER_B_STATE/ctld/node_state ]] || flags+=(-i)
    log "$CLUSTER_B: starting slurmctld${flags:+ ${flags[*]}}"
    cluster_b slurmctld "${flags[@]}" </dev/null >>"$LOG/cluster-b-slurmctld.log" 2>&1
  fi
  wait_for "$CLUSTER_B's slurmctld (scontrol ping)" 60 cluster_b_ping
}

cluster_b_slurmctld_stop() {
  stop_pidfile "$CLUSTER_B slurmctld" "$CLUSTER_B_CTLD_PIDFILE" slurmctld 60
}

# The node is idle/mix/alloc (resumed when drained or down, as nodes_usable does), and clients of
# the default configuration reach the controller through slurmdbd (`-M`: it registered itself).
cluster_b_usable() {
  local state
  state=$(cluster_b sinfo -h -n "$CLUSTER_B_NODE" -o %t | sort -u | xargs)
  if [[ $state =~ ^(idle|mix|alloc)$ ]]; then
    sinfo -h -M "$CLUSTER_B" -o %t >/dev/null && return 0
    echo "sinfo -M $CLUSTER_B fails"; return 1
  fi
  [[ $state =~ drain|drng|down ]] && cluster_b scontrol update nodename="$CLUSTER_B_NODE" state=resume >/dev/null 2>&1
  echo "$CLUSTER_B_NODE: ${state:-no state}"
  return 1
}

cluster_b_slurmd_start() {
  if ! running "$CLUSTER_B_SLURMD_PIDFILE" slurmd; then
    log "$CLUSTER_B: starting slurmd for $CLUSTER_B_NODE"
    cluster_b unshare --uts sh -c 'hostname "$1" && exec slurmd -N "$1"' sh "$CLUSTER_B_NODE" \
      </dev/null >>"$LOG/cluster-b-slurmd-$CLUSTER_B_NODE.log" 2>&1
  fi
}

cluster_b_up() {
  if ((SLURM_DEV_CLUSTERS < 2)); then
    cluster_b_down   # SLURM_DEV_CLUSTERS=1: one cluster; its state and slurmdbd rows stay
    return 0
  fi
  cluster_b_configure
  cluster_b_accounts
  cluster_b_slurmctld_start
  cluster_b_slurmd_start
  wait_for "$CLUSTER_B's node $CLUSTER_B_NODE to be usable" 60 cluster_b_usable
}

# cluster_b_stepds: the slurmstepd processes of cluster-b's jobs.
cluster_b_stepds() {
  local p
  for p in $(pids_named slurmstepd); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qxF "SLURM_CONF=$CLUSTER_B_CONF" && echo "$p"
  done
  return 0
}

# As slurm_down does for the whole bed: the jobs' processes end while slurmd and slurmctld still
# run (their jobs end FAILED instead of staying RUNNING in the saved state), then the daemons stop.
cluster_b_down() {
  local stepds=() pids=() p deadline
  mapfile -t stepds < <(cluster_b_stepds)
  for p in "${stepds[@]}"; do mapfile -t -O "${#pids[@]}" pids < <(descendants "$p"); done
  if ((${#pids[@]})); then
    log "$CLUSTER_B: ending running jobs: killing ${#pids[@]} job processes"
    kill -KILL "${pids[@]}" 2>/dev/null || true
    deadline=$((SECONDS + 10))
    while [[ -n $(cluster_b_stepds) ]] && ((SECONDS < deadline)); do sleep 0.2; done
  fi
  stop_pidfile "$CLUSTER_B slurmd" "$CLUSTER_B_SLURMD_PIDFILE" slurmd
  mapfile -t stepds < <(cluster_b_stepds)
  if ((${#stepds[@]})); then
    log "$CLUSTER_B: killing ${#stepds[@]} leftover slurmstepd"
    kill -KILL "${stepds[@]}" 2>/dev/null || true
  fi
  cluster_b_slurmctld_stop
}
