#!/usr/bin/env bash
# Stops the bed and removes everything it keeps that a first up.sh would not find: the state
# directory (Slurm's state and spool, the accounting database, LDAP, PostgreSQL, Redis, the fake
# GPUs, logs), the rendered /etc/slurm files, the munge key and the demo accounts with their homes
# and groups. Keeps what KEEP names under the state directory (caches of the portal's scripts, see
# scripts/purge.sh). The next up.sh starts from nothing.
#
#   slurm/dev/purge.sh                  # as root
#   KEEP="venv other" ACCOUNTS="svc1 svc2" slurm/dev/purge.sh   # keep those, remove these too
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=/dev/null # one file per service, see services/
for f in "$DEV_DIR"/services/*.sh; do source "$f"; done

require_root
"$DEV_DIR/down.sh"

# The state directory, less the caches named in KEEP.
keep=" ${KEEP:-} "
if [[ -d $STATE ]]; then
  for path in "$STATE"/* "$STATE"/.[!.]*; do
    [[ -e $path ]] || continue
    [[ $keep == *" $(basename "$path") "* ]] && continue
    log "purge: $path"
    rm -rf --one-file-system "$path"
  done
fi
rm -f /etc/slurm/slurm.conf /etc/slurm/gres.conf /etc/slurm/slurmdbd.conf "$MUNGE_KEY"
# cluster-b's configuration; its state went with the state directory, its slurmdbd rows with MariaDB's.
rm -rf "$CLUSTER_B_CONF_DIR"
rm -f /usr/local/bin/nvidia-smi /usr/local/bin/gpu-busy

# account_remove NAME: end its processes, then the account (userdel refuses while any is left, and
# PID 1 here reaps the killed ones only every ~2 s).
account_remove() {
  local name=$1 num
  num=$(id -u "$name")
  pkill -KILL -u "$name" 2>/dev/null || true
  wait_for "the processes of $name to end" 30 bash -c "! pgrep -u $num >/dev/null"
  log "purge: Unix account $name"
  userdel "$name"
  rm -rf "/tmp/podman-run-$num"
}

# The demo accounts (lib.sh DEMO_USERS) with their homes, slurmrestd's account, the accounts the
# caller names in ACCOUNTS (the portal's), and their groups.
for name in $(demo_uids) "$SLURMRESTD_USER" ${ACCOUNTS:-}; do
  getent passwd "$name" >/dev/null && account_remove "$name"
  [[ $(demo_uids) == *"$name"* ]] && rm -rf "/home/$name"
done
for group in "$PORTAL_UNIX_GROUP" "$UNIX_GROUP" "$SLURMRESTD_USER" ${ACCOUNTS:-}; do
  if getent group "$group" >/dev/null; then groupdel "$group"; fi
done
# The demo projects' groups and shared folders (ldap.sh unix_project_groups_up).
for group in "${LDAP_PROJECT_GROUPS[@]}"; do
  if [[ -n $PROJECTS_DIR ]]; then rm -rf "${PROJECTS_DIR:?}/$group"; fi
  if getent group "$group" >/dev/null; then groupdel "$group"; fi
done
log "test bed purged (kept under $STATE: ${KEEP:-nothing})"
