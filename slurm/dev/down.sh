#!/usr/bin/env bash
# Stop every daemon up.sh started and wait until each is really gone. State
# stays on disk so the next up.sh is fast. Safe to run when nothing runs.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=/dev/null # one file per service, see services/
for f in "$DEV_DIR"/services/*.sh; do source "$f"; done

require_root
# Slurm first (slurmdbd needs MariaDB and munge to flush), then the rest.
slurm_down
mariadb_down
munge_down
ldap_down
redis_down
postgres_down
log "test bed is down (state kept in $STATE)"
