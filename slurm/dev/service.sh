#!/usr/bin/env bash
# Stop or start one service of the local cluster, e.g. for fault tests:
#   service.sh redis|postgres|ldap|slurmrestd stop|start
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=/dev/null # one file per service, see services/
for f in "$DEV_DIR"/services/*.sh; do source "$f"; done

require_root
case ${1:-}:${2:-} in
  redis:stop | postgres:stop | ldap:stop | slurmrestd:stop) "${1}_down" ;;
  redis:start | postgres:start | ldap:start | slurmrestd:start) "${1}_up" ;;
  *) echo "usage: $0 redis|postgres|ldap|slurmrestd stop|start" >&2; exit 2 ;;
esac
