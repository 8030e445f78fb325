#!/usr/bin/env bash
# Puts the bed's demo accounts (DEMO_USERS in lib.sh) back at a known point: no Slurm jobs, no
# processes, homes as useradd makes them, no Podman run state. `make test` runs it before the suite,
# so nothing an earlier run or an older commit left in a demo home can make a test pass or fail.
# Only the bed's own demo accounts: a real deployment's users are never touched.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=/dev/null # one file per service, see services/
for f in "$DEV_DIR"/services/*.sh; do source "$f"; done

require_root
mapfile -t users < <(demo_uids)
for uid in "${users[@]}"; do
  getent passwd "$uid" >/dev/null || continue
  scancel --quiet --user "$uid" 2>/dev/null || true
  # cluster-b's too (services/cluster_b.sh); their processes go with pkill below.
  ((SLURM_DEV_CLUSTERS < 2)) || scancel -M "$CLUSTER_B" --quiet --user "$uid" 2>/dev/null || true
done
# Cancelled jobs leave the queue within a few seconds; their processes go with them.
for _ in $(seq 100); do
  [[ -z $(squeue -h -o %i --user "$(IFS=,; echo "${users[*]}")" 2>/dev/null) ]] && break
  sleep 0.2
done
for uid in "${users[@]}"; do
  getent passwd "$uid" >/dev/null || continue
  pkill -KILL -u "$uid" 2>/dev/null || true
  rm -rf "/tmp/podman-run-$(id -u "$uid")" "/home/$uid"
  log "demo account $uid: fresh home"
done
unix_users_up  # makes the homes again (useradd's skeleton, owner and mode)
for uid in "${users[@]}"; do
  [[ -d /home/$uid ]] || continue
  cp -rT /etc/skel "/home/$uid"
  chown -R "$uid:$UNIX_GROUP" "/home/$uid"
done
