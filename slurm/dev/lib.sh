# shellcheck shell=bash disable=SC2034,SC2016
# (SC2034: the variables are used by the scripts that source this file;
#  SC2016: TEMPLATE_VARS is meant literally, for envsubst.)
# Shared settings and helpers for the dev test bed (up.sh, down.sh, slurmctld.sh).
# Sourced, never executed.

DEV_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# /etc/slurm is global (one cluster per machine), so the state directory the
# running bed uses is recorded in the rendered slurm.conf. Later calls without
# GPUPORTAL_STATE pick that one up, so up/down/slurmctld.sh always agree.
SLURM_CONF=/etc/slurm/slurm.conf
recorded_state() { [[ -r $SLURM_CONF ]] && sed -n '0,/^# gpuportal-state: /s///p' "$SLURM_CONF" | head -n1 || true; }
STATE=${GPUPORTAL_STATE:-$(recorded_state)}
STATE=${STATE:-/var/lib/gpuportal}
HOST=$(hostname -s)

# Compute nodes: SLURM_DEV_NODES slurmd daemons on this host (Slurm's
# multiple-slurmd mode: one NodeName, Port, spool, pid and log file each), named
# gpu-node1..N, each with its own 4 fake GPUs. The count is recorded in
# slurm.conf like the state directory, so later calls agree with the running bed.
recorded_nodes() { [[ -r $SLURM_CONF ]] && sed -n '0,/^# gpuportal-nodes: /s///p' "$SLURM_CONF" | head -n1 || true; }
SLURM_DEV_NODES=${SLURM_DEV_NODES:-$(recorded_nodes)}
SLURM_DEV_NODES=${SLURM_DEV_NODES:-2}
[[ $SLURM_DEV_NODES =~ ^[1-9][0-9]?$ ]] || { echo "SLURM_DEV_NODES must be 1-99 (got '$SLURM_DEV_NODES')" >&2; exit 1; }
NODE_PREFIX=gpu-node
SLURMD_PORT_BASE=6820   # node i listens on 6820+i (6817-6819: slurmctld, slurmdbd)
NODES=()
for ((i = 1; i <= SLURM_DEV_NODES; i++)); do NODES+=("$NODE_PREFIX$i"); done
SLURM_NODELIST="$NODE_PREFIX[1-$SLURM_DEV_NODES]"
node_port() { echo $((SLURMD_PORT_BASE + ${1#"$NODE_PREFIX"})); }
LOG=$STATE/log
RUN=$STATE/run

# Clusters: 2 (the default) adds "cluster-b" beside "gpuportal", in the same slurmdbd
# (services/cluster_b.sh); 1 keeps only the default cluster. Recorded in the state directory by
# up.sh, so a later `make up` keeps the choice.
recorded_clusters() { cat "$STATE/slurm/dev-clusters" 2>/dev/null || true; }
SLURM_DEV_CLUSTERS=${SLURM_DEV_CLUSTERS:-$(recorded_clusters)}
SLURM_DEV_CLUSTERS=${SLURM_DEV_CLUSTERS:-2}
[[ $SLURM_DEV_CLUSTERS =~ ^[12]$ ]] || { echo "SLURM_DEV_CLUSTERS must be 1 or 2 (got '$SLURM_DEV_CLUSTERS')" >&2; exit 1; }

# Fixed loopback ports, chosen away from the distribution defaults so a stock
# MariaDB/PostgreSQL/Redis/slapd on the same box does not collide with ours.
MARIADB_PORT=3307
LDAP_PORT=3389
REDIS_PORT=6390
PG_PORT=5433
LDAP_SUFFIX=dc=gpuportal,dc=test
LDAP_ROOTDN=cn=admin,$LDAP_SUFFIX
LDAP_ROOTPW=ldap-admin
SLURMDB_PASS=slurmdb-dev   # MariaDB password of the `slurm` user (loopback only)
PG_BIN=/usr/lib/postgresql/15/bin

# Demo users: LDAP entries, local Unix accounts (same uid, gid 10000) and Slurm
# users of account "portal" alike.
# uid   uidNumber givenName sn     password  LDAP groups (comma-separated, - for none)
DEMO_USERS=(
  "alice 10001 Alice Anderson alice-pw portal-users"
  "bob   10002 Bob   Brown    bob-pw   portal-users,vision,nlp"
  "ada   10003 Ada   Lovelace ada-pw   portal-users,portal-admins"
  "eve   10004 Eve   Evans    eve-pw   -"
)
demo_uids() { local l; for l in "${DEMO_USERS[@]}"; do echo "${l%% *}"; done; }

# Variables substituted in conf/*.in; anything else that looks like $X stays as is.
# SLURM_NODE_LINES and GRES_NODE_LINES (one line per node) are set by services/slurm.sh.
export STATE HOST LOG RUN MARIADB_PORT LDAP_PORT REDIS_PORT PG_PORT LDAP_SUFFIX LDAP_ROOTDN SLURMDB_PASS \
  SLURM_DEV_NODES SLURM_NODELIST
TEMPLATE_VARS='${STATE} ${HOST} ${LOG} ${RUN} ${MARIADB_PORT} ${LDAP_PORT} ${REDIS_PORT} ${PG_PORT} ${LDAP_SUFFIX} ${LDAP_ROOTDN} ${LDAP_ROOTPW_HASH} ${SLURMDB_PASS} ${SLURM_DEV_NODES} ${SLURM_NODELIST} ${SLURM_NODE_LINES} ${GRES_NODE_LINES}'

log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }
die() { printf '[%s] ERROR: %s\n' "$(date +%T)" "$*" >&2; exit 1; }

require_root() { [[ $EUID -eq 0 ]] || die "run as root"; }

# pid_alive PID [COMM]: PID is a live process (optionally named COMM).
# PID 1 on these machines reaps exited children only every ~2 s, so a stopped
# daemon lingers as a zombie for which `kill -0` still succeeds: look at the
# state letter in /proc/PID/stat instead.
pid_alive() {
  local pid=${1:-} comm=${2:-} stat st
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
  st=${stat##*) }          # fields after "(comm) "; comm itself may contain spaces
  st=${st%% *}
  [[ $st != Z && $st != X ]] || return 1
  [[ -z $comm || $(cat "/proc/$pid/comm" 2>/dev/null) == "$comm" ]]
}

pid_gone() { ! pid_alive "$1"; }

# pidfile_pid FILE: print the pid stored in FILE (first line), nothing if absent.
pidfile_pid() { [[ -r $1 ]] && head -n1 "$1" 2>/dev/null | tr -dc '0-9' || true; }

# running PIDFILE COMM: the daemon recorded in PIDFILE is alive (and is COMM,
# which guards against a stale pid file pointing at a recycled pid).
running() { pid_alive "$(pidfile_pid "$1")" "$2"; }

# stop_pid NAME PID [TIMEOUT]: SIGTERM, wait until gone or zombie, SIGKILL after TIMEOUT s.
stop_pid() {
  local name=$1 pid=$2 timeout=${3:-30} i
  pid_alive "$pid" || return 0
  log "stopping $name (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < timeout * 10; i++)); do
    pid_alive "$pid" || return 0
    sleep 0.1
  done
  log "$name did not stop within ${timeout}s, sending SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do pid_alive "$pid" || return 0; sleep 0.1; done
  die "$name (pid $pid) still alive after SIGKILL"
}

# stop_pidfile NAME PIDFILE COMM [TIMEOUT]
stop_pidfile() {
  local pid
  pid=$(pidfile_pid "$2")
  if pid_alive "$pid" "$3"; then stop_pid "$1" "$pid" "${4:-30}"; fi
  rm -f "$2"
}

# pids_named COMM: all live processes whose comm is exactly COMM.
pids_named() {
  local d
  for d in /proc/[0-9]*; do
    [[ $(cat "$d/comm" 2>/dev/null) == "$1" ]] && pid_alive "${d#/proc/}" && echo "${d#/proc/}"
  done
  return 0
}

# descendants PID: all live descendants of PID (children first, then theirs).
descendants() {
  local pid=$1 d ppid stat kids=()
  for d in /proc/[0-9]*; do
    stat=$(cat "$d/stat" 2>/dev/null) || continue
    ppid=${stat##*) }; ppid=${ppid#* }; ppid=${ppid%% *}
    [[ $ppid == "$pid" ]] && kids+=("${d#/proc/}")
  done
  for d in "${kids[@]}"; do echo "$d"; descendants "$d"; done
}

# wait_for DESC TIMEOUT CMD...: poll CMD (quietly) every 0.2 s until it succeeds;
# on timeout fail with CMD's last output and a hint where to look.
wait_for() {
  local desc=$1 timeout=$2 deadline out
  shift 2
  deadline=$((SECONDS + timeout))
  while true; do
    if out=$("$@" 2>&1); then return 0; fi
    ((SECONDS < deadline)) || die "timed out after ${timeout}s waiting for $desc; last output: ${out:-<none>} (logs: $LOG/)"
    sleep 0.2
  done
}

# render SRC DST [MODE [OWNER]]: substitute TEMPLATE_VARS in SRC into DST.
# Rewrites DST only when the content differs and sets RENDER_CHANGED=1 then,
# so callers can restart a running daemon exactly when its config changed.
RENDER_CHANGED=0
render() {
  local src=$1 dst=$2 mode=${3:-644} owner=${4:-root:root} tmp
  tmp=$(mktemp "$dst.XXXXXX")
  envsubst "$TEMPLATE_VARS" <"$src" >"$tmp"
  chmod "$mode" "$tmp"
  chown "$owner" "$tmp"
  if [[ -f $dst ]] && cmp -s "$tmp" "$dst"; then
    rm -f "$tmp"
  else
    mv -f "$tmp" "$dst"
    RENDER_CHANGED=1
  fi
}

# mkdir_owned DIR OWNER [MODE]
mkdir_owned() {
  mkdir -p "$1"
  chown "$2" "$1"
  chmod "${3:-755}" "$1"
}

# touch_owned FILE OWNER: a log file the daemon can write after dropping root.
touch_owned() {
  [[ -e $1 ]] || : >"$1"
  chown "$2" "$1"
}

# Every component of STATE must be traversable by mysql/postgres/munge: a state
# directory under /root (mode 0700) breaks them in confusing ways, so refuse early.
check_state_path() {
  local p=$STATE
  [[ $p == /* ]] || die "GPUPORTAL_STATE must be an absolute path (got '$p')"
  while [[ $p != / ]]; do
    p=$(dirname "$p")
    if [[ -d $p ]] && [[ $(stat -c %A "$p") != ?????????[xt] ]]; then
      die "$p is not traversable by other users (mode $(stat -c %a "$p")); choose GPUPORTAL_STATE elsewhere"
    fi
  done
}
