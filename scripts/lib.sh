# Shared by the portal's scripts: where things live, and the venv they run in.
# shellcheck shell=bash
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=../slurm/dev/env.sh
source "$ROOT/slurm/dev/env.sh"
# The venv is built on Debian's /usr/bin/python3 under the state dir, not under /root: notebook
# servers run from it as the end user, so every user must be able to read it.
VENV="${GPUPORTAL_VENV:-$GPUPORTAL_STATE/venv}"
RUN="$GPUPORTAL_STATE/run"
LOG="$GPUPORTAL_STATE/log"
PORTAL_HOST="${PORTAL_HOST:-127.0.0.1}"
PORTAL_PORT="${PORTAL_PORT:-8000}"
# Shared, read-only data every notebook server shows next to the templates.
DATA_DIR="${GPUPORTAL_DATA_DIR:-/data}"
export PATH="$VENV/bin:$PATH"
export DJANGO_SETTINGS_MODULE="${DJANGO_SETTINGS_MODULE:-portal.settings.base}"

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
