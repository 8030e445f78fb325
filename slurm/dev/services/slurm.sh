# shellcheck shell=bash
# slurmdbd + slurmctld + one slurmd per node (NODES, see lib.sh) for the cluster
# "gpuportal". Configuration lives in /etc/slurm (global); all state, pid and
# log files under $STATE.

SLURM_ACCOUNT=portal
SLURMCTLD_PIDFILE=$RUN/slurmctld.pid
SLURMDBD_PIDFILE=$RUN/slurmdbd.pid
# Beds made before the multi-node switch ran one slurmd with this pid file.
LEGACY_SLURMD_PIDFILE=$RUN/slurmd.pid
slurmd_pidfile() { echo "$RUN/slurmd-$1.pid"; }

# Every slurmd pid file there is: the configured nodes', those of nodes a
# smaller SLURM_DEV_NODES dropped, and the legacy one.
slurmd_pidfiles() {
  local f
  for f in "$RUN"/slurmd-*.pid "$LEGACY_SLURMD_PIDFILE"; do [[ -e $f ]] && echo "$f"; done
  return 0
}

slurm_any_running() {
  local f
  running "$SLURMCTLD_PIDFILE" slurmctld || running "$SLURMDBD_PIDFILE" slurmdbd && return 0
  cluster_b_any_running && return 0
  for f in $(slurmd_pidfiles); do running "$f" slurmd && return 0; done
  return 1
}

# The node names resolve to loopback through one managed line in /etc/hosts
# (rewritten in place: /etc/hosts may be a bind mount that cannot be replaced).
HOSTS_MARK="# gpuportal dev nodes"
hosts_entries() {
  local want others
  want="127.0.0.1 ${NODES[*]} $HOSTS_MARK"
  grep -qxF "$want" /etc/hosts && return 0
  others=$(grep -vF "$HOSTS_MARK" /etc/hosts || true)
  printf '%s\n%s\n' "$others" "$want" >/etc/hosts
}

# fake_gpus: /dev/nvidiaN look-alikes, 4 per node. Nothing backs them; Slurm only
# needs character devices to count, allocate and map them to CUDA_VISIBLE_DEVICES.
fake_gpus() {
  local node n dev
  mkdir_owned "$STATE/gpu" root:root 755
  rm -f "$STATE"/gpu/nvidia[0-9]*   # the one-node bed kept them here
  for node in "${NODES[@]}"; do
    mkdir_owned "$STATE/gpu/$node" root:root 755
    for n in 0 1 2 3; do
      dev=$STATE/gpu/$node/nvidia$n
      if [[ ! -c $dev || $(stat -c '%t:%T' "$dev") != "c3:$n" ]]; then # 195 = 0xc3
        rm -f "$dev"
        mknod -m 666 "$dev" c 195 "$n"
      fi
    done
  done
}

# The per-node lines of slurm.conf and gres.conf (rendered from conf/*.in).
node_lines() {
  local node
  SLURM_NODE_LINES='' GRES_NODE_LINES=''
  for node in "${NODES[@]}"; do
    SLURM_NODE_LINES+="NodeName=$node NodeAddr=127.0.0.1 Port=$(node_port "$node") CPUs=64 RealMemory=515000 Gres=gpu:a100:4 State=UNKNOWN"$'\n'
    GRES_NODE_LINES+="NodeName=$node Name=gpu Type=a100 File=$STATE/gpu/$node/nvidia[0-3]"$'\n'
  done
  export SLURM_NODE_LINES=${SLURM_NODE_LINES%$'\n'} GRES_NODE_LINES=${GRES_NODE_LINES%$'\n'}
}

# /etc/slurm and the loopback ports are global: one bed per machine. Refuse to
# start a second one next to a running bed that uses another state directory.
slurm_check_no_other_bed() {
  local recorded
  recorded=$(recorded_state)
  [[ -n $recorded && $recorded != "$STATE" ]] || return 0
  # The pid files of the other bed live in its own state directory.
  if running "$recorded/run/slurmctld.pid" slurmctld || running "$recorded/run/slurmdbd.pid" slurmdbd; then
    die "a bed with state $recorded is running: run GPUPORTAL_STATE=$recorded $DEV_DIR/down.sh first"
  fi
}

slurm_configure() {
  local node
  mkdir -p /etc/slurm "$STATE/slurm/ctld"
  for node in "${NODES[@]}"; do mkdir -p "$STATE/slurm/d/$node"; done
  # Files right in slurm/d are the one-node bed's spool; each node has its own directory now.
  find "$STATE/slurm/d" -maxdepth 1 -type f -delete
  hosts_entries
  fake_gpus
  node_lines
  slurm_jwt_key   # services/slurmrestd.sh
  RENDER_CHANGED=0
  render "$DEV_DIR/conf/slurm.conf.in" /etc/slurm/slurm.conf 644
  render "$DEV_DIR/conf/gres.conf.in" /etc/slurm/gres.conf 644
  # Holds the DB password; slurmdbd insists on 0600 owned by SlurmUser.
  render "$DEV_DIR/conf/slurmdbd.conf.in" /etc/slurm/slurmdbd.conf 600
  if ((RENDER_CHANGED)) && slurm_any_running; then
    log "slurm: config changed, restarting the Slurm daemons"
    slurm_down
  fi
}

slurmdbd_start() {
  if ! running "$SLURMDBD_PIDFILE" slurmdbd; then
    log "slurm: starting slurmdbd"
    slurmdbd </dev/null >>"$LOG/slurmdbd.log" 2>&1
  fi
  # Each sacctmgr call costs ~0.2 s: a warm up.sh makes only one here.
  local clusters
  if ! clusters=$(sacctmgr -n -P list cluster format=cluster 2>/dev/null); then
    wait_for "slurmdbd (sacctmgr -n list cluster)" 60 sacctmgr -n list cluster
    clusters=$(sacctmgr -n -P list cluster format=cluster)
  fi
  # Register the cluster ourselves rather than waiting for slurmctld to do it,
  # so accounts and associations can be added deterministically below.
  if ! grep -qx gpuportal <<<"$clusters"; then
    sacctmgr -i add cluster gpuportal >/dev/null
  fi
}

slurmctld_ping() { scontrol ping | grep -q 'is UP'; }

slurmctld_start() {
  local flags=()
  if ! running "$SLURMCTLD_PIDFILE" slurmctld; then
    # -i: on a fresh StateSaveLocation there is no state to read; do not treat that as fatal.
    [[ -e $STATE/slurm/ctld/node_state ]] || flags+=(-i)
    log "slurm: starting slurmctld${flags:+ ${flags[*]}}"
    slurmctld "${flags[@]}" </dev/null >>"$LOG/slurmctld.log" 2>&1
  fi
  wait_for "slurmctld (scontrol ping)" 60 slurmctld_ping
}

slurmctld_stop() {
  stop_pidfile slurmctld "$SLURMCTLD_PIDFILE" slurmctld 60
}

# nodes_usable: every node is idle/mix/alloc in every partition. A drained or
# down node (e.g. after a config change or an unclean stop) is resumed here.
nodes_usable() {
  local lines bad
  lines=$(sinfo -h -N -n "$SLURM_NODELIST" -o '%N %t' | sort -u)
  (($(cut -d' ' -f1 <<<"$lines" | sort -u | grep -c .) == SLURM_DEV_NODES)) || { echo "nodes: ${lines:-none}"; return 1; }
  bad=$(grep -vE ' (idle|mix|alloc)$' <<<"$lines" || true)
  [[ -z $bad ]] && return 0
  grep -E ' (drain|drng|down)' <<<"$bad" | while read -r node _; do
    scontrol update nodename="$node" state=resume >/dev/null 2>&1 || true
  done
  echo "node states: $bad"
  return 1
}

# Each slurmd gets its own UTS namespace with the node's hostname, so jobs and
# `srun hostname` see the node they run on (the network stays shared: all
# nodes, the hub and the services are on this host's loopback).
slurmd_start() {
  local node
  for node in "${NODES[@]}"; do
    running "$(slurmd_pidfile "$node")" slurmd && continue
    log "slurm: starting slurmd for $node"
    unshare --uts sh -c 'hostname "$1" && exec slurmd -N "$1"' sh "$node" \
      </dev/null >>"$LOG/slurmd-$node.log" 2>&1
  done
  wait_for "nodes $SLURM_NODELIST to be idle (sinfo -N -o '%N %t')" 60 nodes_usable
}

slurm_accounts() {
  local u have
  # One query answers both "does the account exist" (a row with an empty user)
  # and "which users are in it" (sacctmgr calls cost ~0.2 s each).
  have=$(sacctmgr -n -P list assoc cluster=gpuportal account="$SLURM_ACCOUNT" format=account,user)
  if [[ -z $have ]]; then
    sacctmgr -i add account "$SLURM_ACCOUNT" cluster=gpuportal \
      Description="gpuportal users" Organization=gpuportal >/dev/null
  fi
  for u in $(demo_uids); do
    grep -qx "$SLURM_ACCOUNT|$u" <<<"$have" || sacctmgr -i add user "$u" account="$SLURM_ACCOUNT" cluster=gpuportal >/dev/null
  done
  slurm_portal_grants
}

# The portal's service account (scripts/install.sh creates it) and what Slurm lets it do, as
# docs/deploy.md tells an administrator to grant it:
# - Operator: it raises running jobs' time limits (walltime extension: `scontrol update JobId=N
#   TimeLimit=M`, slurm/adapter.py), which a plain Slurm user may only lower;
# - coordinator of the projects' parent account (SLURM_PROJECTS_PARENT_ACCOUNT, made here as root):
#   projects_sync adds the projects' accounts below it, their members and budgets.
# slurmdbd maps a Slurm user to its uid when the user is added: one added before its Unix account
# exists has no uid, and every privileged request of that account is denied. So nothing is granted
# until the account exists.
SLURM_PORTAL_OPERATOR=gpuportal
SLURM_PROJECTS_PARENT=${SLURM_PROJECTS_PARENT_ACCOUNT:-projects}
slurm_portal_grants() {
  local level coordinators
  if ! id -u "$SLURM_PORTAL_OPERATOR" >/dev/null 2>&1; then
    log "slurm: no Unix account $SLURM_PORTAL_OPERATOR yet: its Slurm grants wait for scripts/install.sh"
    return 0
  fi
  level=$(sacctmgr -n -P list user "$SLURM_PORTAL_OPERATOR" format=adminlevel)
  if [[ -z $level ]]; then
    sacctmgr -i add user "$SLURM_PORTAL_OPERATOR" account="$SLURM_ACCOUNT" cluster=gpuportal \
      adminlevel=Operator >/dev/null
  elif [[ $level != Operator ]]; then
    sacctmgr -i modify user "$SLURM_PORTAL_OPERATOR" set adminlevel=Operator >/dev/null
  fi
  coordinators=$(sacctmgr -n -P list account "$SLURM_PROJECTS_PARENT" withcoord format=account,coordinators)
  if [[ -z $coordinators ]]; then
    sacctmgr -i add account "$SLURM_PROJECTS_PARENT" cluster=gpuportal \
      Description="gpuportal projects" Organization=gpuportal >/dev/null
  fi
  if ! grep -qE "[|,]$SLURM_PORTAL_OPERATOR(,|\$)" <<<"$coordinators"; then
    sacctmgr -i add coordinator account="$SLURM_PROJECTS_PARENT" names="$SLURM_PORTAL_OPERATOR" >/dev/null
  fi
}

slurm_up() {
  slurm_configure
  slurmdbd_start
  slurmctld_start
  slurmd_start
  slurm_accounts
}

# Jobs still running at down.sh. Killing slurmstepd alone would leave them
# RUNNING in slurmctld's saved state after the next up (slurmd re-registers
# within slurmctld's startup grace, so it never notices them missing), holding
# their GPUs for good. So first kill the job processes while slurmd and
# slurmctld still run: each slurmstepd then reports its job ended (FAILED,
# signal 9) and exits. Whatever is left after that is killed outright.
end_running_jobs() {
  local stepds=() pids=() p deadline
  mapfile -t stepds < <(pids_named slurmstepd)
  ((${#stepds[@]})) || return 0
  for p in "${stepds[@]}"; do mapfile -t -O "${#pids[@]}" pids < <(descendants "$p"); done
  if ((${#pids[@]})); then
    log "ending running jobs: killing ${#pids[@]} job processes"
    kill -KILL "${pids[@]}" 2>/dev/null || true
  fi
  deadline=$((SECONDS + 10))
  while [[ -n $(pids_named slurmstepd) ]] && ((SECONDS < deadline)); do sleep 0.2; done
}

# Job steps survive slurmd by design; nothing of them may outlive down.sh.
kill_stepds() {
  local pids=() p
  for p in $(pids_named slurmstepd); do
    pids+=("$p")
    mapfile -t -O "${#pids[@]}" pids < <(descendants "$p")
  done
  ((${#pids[@]})) || return 0
  log "killing ${#pids[@]} leftover slurmstepd/job processes"
  kill -KILL "${pids[@]}" 2>/dev/null || true
  for p in "${pids[@]}"; do
    wait_for "pid $p to exit" 10 pid_gone "$p"
  done
}

slurm_down() {
  local f
  slurmrestd_down   # it talks to slurmctld; services/slurmrestd.sh
  end_running_jobs  # both clusters' jobs
  cluster_b_down    # services/cluster_b.sh; before slurmdbd, to which its slurmctld reports
  for f in $(slurmd_pidfiles); do
    stop_pidfile slurmd "$f" slurmd
  done
  kill_stepds
  slurmctld_stop
  stop_pidfile slurmdbd "$SLURMDBD_PIDFILE" slurmdbd
}
