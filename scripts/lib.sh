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

# --- least privilege (README "Least privilege and secrets") ---
# gunicorn, the Celery worker and beat run as PORTAL_USER, the hub as HUB_USER: unprivileged system
# accounts whose only way to act as a user is deploy/sudoers.d/gpuportal. Users it covers are the
# members of PORTAL_USERS_GROUP.
PORTAL_USER=gpuportal
HUB_USER=jupyterhub
PORTAL_USERS_GROUP=gpuportal-users
# The portal account's home: root-owned, so the account cannot swap the files root writes here
# (its environment file) for links; run/ and log/ below are its own.
PORTAL_HOME="$GPUPORTAL_STATE/portal"
PORTAL_RUN="$PORTAL_HOME/run"
PORTAL_LOG="$PORTAL_HOME/log"
# Settings and secrets of the portal's processes (KEY='value' lines, as systemd's EnvironmentFile=
# reads them): mode 0600, owned by PORTAL_USER; see deploy/gpuportal.env.example.
PORTAL_ENV="$PORTAL_HOME/gpuportal.env"
JOB_FILES=/usr/local/libexec/gpuportal/job-files
SLURM_TOKEN=/usr/local/libexec/gpuportal/slurm-token
SBATCH_BATCH=/usr/local/libexec/gpuportal/sbatch-batch
USER_FILES=/usr/local/libexec/gpuportal/user-files  # the Files page's helper (#37)
USER_FILES_CONF=/etc/gpuportal/user-files.conf  # its data and scratch roots, root-owned
CLUSTERS_DIR=${CLUSTERS_DIR:-/etc/gpuportal/clusters.d}  # one TOML file per Slurm cluster (#38), root-owned
SUDOERS_FILE=/etc/sudoers.d/gpuportal
SUDOERS_TOKEN_FILE=/etc/sudoers.d/gpuportal-slurmrestd  # slurm-token's root rule, slurmrestd only

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# "${AS_PORTAL[@]}" LOGFILE|- COMMAND...: run COMMAND as PORTAL_USER, exec'ing all the way (with
# setsid in front, the pid of the caller's `&` is COMMAND's), the way a systemd unit with User=,
# EnvironmentFile= and a log file would. The environment is emptied first; the account's own shell
# then reads PORTAL_ENV, so no secret passes through a command line or root's environment. LOGFILE
# is opened by the account itself, in its own log dir ("-": keep the caller's stdout/stderr).
# No --no-new-privs: the account needs sudo (setuid) for what deploy/sudoers.d/gpuportal allows.
AS_ACCOUNT_SHELL=(
  /bin/sh -c 'umask 027; set -a; . "$1"; set +a; [ "$2" = - ] || exec >>"$2" 2>&1; shift 2; exec "$@"'
)
AS_PORTAL=(
  env -i PATH="$VENV/bin:/usr/local/bin:/usr/bin:/bin" HOME="$PORTAL_HOME" USER="$PORTAL_USER"
  LOGNAME="$PORTAL_USER" SHELL=/usr/sbin/nologin LANG=C.UTF-8
  setpriv --reuid="$PORTAL_USER" --regid="$PORTAL_USER" --init-groups --inh-caps=-all --
  "${AS_ACCOUNT_SHELL[@]}" as-portal "$PORTAL_ENV"
)

# The apps gateway (#33): an account of its own, not in the portal's group, with an environment file
# of its own that holds its database role, APPS_SIGNING_KEY and its settings, and none of the portal's
# or the hub's secrets (deploy/apps-gateway.env.example). Its home is root's, like the portal's; log/
# is its own. "${AS_APPS[@]}" LOGFILE|- COMMAND... is AS_PORTAL for it, with no new privileges: it
# needs no sudo.
APPS_USER=gpuportal-apps
APPS_HOME="$GPUPORTAL_STATE/apps-gateway"
APPS_LOG="$APPS_HOME/log"
APPS_ENV="$APPS_HOME/apps-gateway.env"
AS_APPS=(
  env -i PATH="$VENV/bin:/usr/local/bin:/usr/bin:/bin" HOME="$APPS_HOME" USER="$APPS_USER"
  LOGNAME="$APPS_USER" SHELL=/usr/sbin/nologin LANG=C.UTF-8
  setpriv --reuid="$APPS_USER" --regid="$APPS_USER" --init-groups --inh-caps=-all --no-new-privs --
  "${AS_ACCOUNT_SHELL[@]}" as-apps-gateway "$APPS_ENV"
)

# secret_read FILE KEY: the value of KEY in FILE if it looks like a generated secret (32 or more of
# [A-Za-z0-9_-], optionally single-quoted), else nothing. The files belong to unprivileged
# accounts: root only ever pattern-matches them, it never sources them.
secret_read() {
  [[ -f $1 ]] || return 0
  sed -n "s/^$2='\{0,1\}\([A-Za-z0-9_-]\{32,\}\)'\{0,1\}\$/\1/p" "$1" | tail -n1
}
