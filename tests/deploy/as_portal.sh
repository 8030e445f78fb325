#!/usr/bin/env bash
# as_portal.sh ENV_FILE LOGFILE|- COMMAND...: run COMMAND exactly as scripts/up.sh runs the portal's
# processes (scripts/lib.sh's AS_PORTAL: the gpuportal account, an emptied environment, settings
# and secrets read from ENV_FILE by the account's own shell), but with another environment file.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
[[ ${AS_PORTAL[-1]} == "$PORTAL_ENV" ]] || die "scripts/lib.sh: AS_PORTAL no longer ends with PORTAL_ENV"
AS_PORTAL[-1]=$1
shift
exec "${AS_PORTAL[@]}" "$@"
