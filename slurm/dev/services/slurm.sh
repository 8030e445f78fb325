# shellcheck shell=bash
# slurmdbd + slurmctld + slurmd for the single-node cluster "gpuportal".
# Configuration lives in /etc/slurm (global); all state, pid and log files under $STATE.

SLURM_ACCOUNT=portal
SLURMCTLD_PIDFILE=$RUN/slurmctld.pid
SLURMD_PIDFILE=$RUN/slurmd.pid
SLURMDBD_PIDFILE=$RUN/slurmdbd.pid

slurm_any_running() {
  running "$SLURMCTLD_PIDFILE" slurmctld || running "$SLURMD_PIDFILE" slurmd ||
    running "$SLURMDBD_PIDFILE" slurmdbd
}

# fake_gpus: /dev/nvidiaN look-alikes. Nothing backs them; Slurm only needs
# character devices to count, allocate and map them to CUDA_VISIBLE_DEVICES.
fake_gpus() {
  local n dev
  mkdir_owned "$STATE/gpu" root:root 755
  for n in 0 1 2 3; do
    dev=$STATE/gpu/nvidia$n
    if [[ ! -c $dev || $(stat -c '%t:%T' "$dev") != "c3:$n" ]]; then # 195 = 0xc3
      rm -f "$dev"
      mknod -m 666 "$dev" c 195 "$n"
    fi
  done
}

slurm_configure() {
  local recorded
  recorded=$(recorded_state)
  if [[ -n $recorded && $recorded != "$STATE" ]] && slurm_any_running; then
    die "a bed with state $recorded is running (/etc/slurm is global): run GPUPORTAL_STATE=$recorded $DEV_DIR/down.sh first"
  fi
  mkdir -p /etc/slurm "$STATE/slurm/ctld" "$STATE/slurm/d"
  fake_gpus
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
  wait_for "slurmdbd (sacctmgr -n list cluster)" 60 sacctmgr -n list cluster
  # Register the cluster ourselves rather than waiting for slurmctld to do it,
  # so accounts and associations can be added deterministically below.
  if ! sacctmgr -n -P list cluster format=cluster | grep -qx gpuportal; then
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

# node_usable: every partition line of our node is idle/mix/alloc. A drained or
# down node (e.g. after a config change or an unclean stop) is resumed here.
node_usable() {
  local states
  states=$(sinfo -h -n "$HOST" -o %t | sort -u)
  [[ -n $states ]] || return 1
  if grep -qvE '^(idle|mix|alloc)$' <<<"$states"; then
    if grep -qE '^(drain|drng|down)' <<<"$states"; then
      scontrol update nodename="$HOST" state=resume >/dev/null 2>&1 || true
    fi
    echo "node $HOST state: $states"
    return 1
  fi
}

slurmd_start() {
  if ! running "$SLURMD_PIDFILE" slurmd; then
    log "slurm: starting slurmd"
    slurmd </dev/null >>"$LOG/slurmd.log" 2>&1
  fi
  wait_for "node $HOST to be idle (sinfo -h -o %t)" 60 node_usable
}

slurm_accounts() {
  local u have
  if ! sacctmgr -n -P list account "$SLURM_ACCOUNT" format=account | grep -qx "$SLURM_ACCOUNT"; then
    sacctmgr -i add account "$SLURM_ACCOUNT" Description="gpuportal users" Organization=gpuportal >/dev/null
  fi
  have=$(sacctmgr -n -P list assoc account="$SLURM_ACCOUNT" format=user)
  for u in $(demo_uids); do
    grep -qx "$u" <<<"$have" || sacctmgr -i add user "$u" account="$SLURM_ACCOUNT" >/dev/null
  done
}

slurm_up() {
  slurm_configure
  slurmdbd_start
  slurmctld_start
  slurmd_start
  slurm_accounts
}

# Job steps survive slurmd (by design); kill them and everything they started,
# or the next up.sh finds orphaned job processes.
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
  stop_pidfile slurmd "$SLURMD_PIDFILE" slurmd
  kill_stepds
  slurmctld_stop
  stop_pidfile slurmdbd "$SLURMDBD_PIDFILE" slurmdbd
}
