#!/usr/bin/env bash
# The real MLflow, for tests/tracking: the client (mlflow-skinny) that test_mlflow_client_real.py and
# test_mlflow_in_job_real.py run, and MLflow's own server (the full mlflow package) that
# test_mlflow_server_differential.py runs beside the portal. Pinned, each in a venv of its own outside
# the clone (the portal's venv never imports mlflow). install.sh --dev runs this; a venv whose
# version is already there is left alone, so no test downloads anything.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

VERSION="${MLFLOW_VERSION:-3.17.2}"

# venv_with PREFIX PACKAGE: PACKAGE==VERSION in its own venv at PREFIX, readable by every user (jobs
# run the client as their user).
venv_with() {
  local prefix=$1 package=$2
  [[ -e $prefix/.installed-$package-$VERSION && -x $prefix/bin/python ]] && return 0
  say "pip: installing $package $VERSION into $prefix"
  rm -rf "$prefix"
  /usr/bin/python3 -m venv "$prefix"
  "$prefix/bin/pip" install -q --disable-pip-version-check "$package==$VERSION" >"$prefix/pip.log" 2>&1 \
    || { cat "$prefix/pip.log" >&2; exit 1; }
  chmod -R a+rX "$prefix"
  touch "$prefix/.installed-$package-$VERSION"
}

venv_with "${MLFLOW_CLIENT_VENV:-$GPUPORTAL_STATE/mlflow-client-venv}" mlflow-skinny
venv_with "${MLFLOW_SERVER_VENV:-$GPUPORTAL_STATE/mlflow-server-venv}" mlflow
