#!/usr/bin/env bash
# as_apps_gateway.sh ENV_FILE LOGFILE|- COMMAND...: run COMMAND exactly as scripts/up.sh runs the apps
# gateway (scripts/lib.sh's AS_APPS: the gpuportal-apps account, an emptied environment, settings and
# secrets read from ENV_FILE by the account's own shell), but with another environment file.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
[[ ${AS_APPS[-1]} == "$APPS_ENV" ]] || die "scripts/lib.sh: AS_APPS no longer ends with APPS_ENV"
AS_APPS[-1]=$1
shift
exec "${AS_APPS[@]}" "$@"
