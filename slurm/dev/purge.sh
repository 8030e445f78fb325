#!/usr/bin/env bash
# Stops the bed and removes everything it keeps that a first up.sh would not find: the state
# directory (Slurm's state and spool, the accounting database, LDAP, PostgreSQL, Redis, the fake
# GPUs, logs), the rendered /etc/slurm files, the munge key and the demo accounts with their homes
# and groups. Keeps what KEEP names under the state directory (caches of the portal's scripts, see
# scripts/purge.sh). The next up.sh starts from nothing.
#
#   slurm/dev/purge.sh                  # as root
#   KEEP="venv other" slurm/dev/purge.sh
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
rm -f /usr/local/bin/nvidia-smi /usr/local/bin/gpu-busy

# The demo accounts (lib.sh DEMO_USERS), their homes, run state and groups; slurmrestd's account.
for uid in $(demo_uids) "$SLURMRESTD_USER"; do
  getent passwd "$uid" >/dev/null || continue
  num=$(id -u "$uid")
  pkill -KILL -u "$uid" 2>/dev/null || true
  log "purge: Unix account $uid and its home"
  userdel --remove "$uid" 2>/dev/null || userdel "$uid"
  rm -rf "/tmp/podman-run-$num" "/home/$uid"
done
for group in "$PORTAL_UNIX_GROUP" "$UNIX_GROUP" "$SLURMRESTD_USER"; do
  getent group "$group" >/dev/null && groupdel "$group"
done
log "test bed purged (kept under $STATE: ${KEEP:-nothing})"
