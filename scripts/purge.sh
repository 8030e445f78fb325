#!/usr/bin/env bash
# `make purge`: stops everything and removes all state that a first `make up` would not find, so the
# next `make up` starts from nothing (.ci/run does this first). Removed: the local cluster's state
# (slurm/dev/purge.sh: Slurm, its accounting database, LDAP, PostgreSQL, Redis, the demo accounts
# and homes), the hub's database and secrets, the registry's data, the portal's state, environment
# file and venv, its service accounts, root helpers (and what they read: user-files' roots, the Shell's scripts),
# the bed's cluster files and sudoers fragments.
# Kept: caches that are rebuilt whenever their input changes, so keeping them cannot hide a missing
# step (README "Caches make purge keeps").
set -euo pipefail
source "$(dirname "$0")/lib.sh"

[[ $EUID -eq 0 ]] || die "run as root"
"$ROOT/scripts/down.sh"
# The MLflow venvs are keyed by their pinned version (scripts/mlflow-client.sh).
KEEP="mlflow-client-venv mlflow-server-venv" ACCOUNTS="$PORTAL_USER $HUB_USER $APPS_USER" "$ROOT/slurm/dev/purge.sh"
rm -rf /usr/local/libexec/gpuportal /usr/local/share/gpuportal
rm -f "$USER_FILES_CONF"
# The bed's cluster files (install.sh --dev); the folder only while it holds nothing else.
rm -f "$CLUSTERS_DIR/gpuportal.toml" "$CLUSTERS_DIR/cluster-b.toml"
rmdir "$CLUSTERS_DIR" 2>/dev/null || true
# The projects' folder that install.sh --dev made, only while it holds nothing (never a project's files).
rmdir "${GPUPORTAL_PROJECTS_DIR-/srv/projects}" 2>/dev/null || true
rm -f /usr/local/bin/gpuportal
rm -f /etc/sudoers.d/gpuportal /etc/sudoers.d/gpuportal-*
say "purged; kept: /opt/gpuportal (framework environments, container image, code-server), the MLflow venvs, /data, Debian and npm packages"
