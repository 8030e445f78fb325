#!/usr/bin/env bash
# The real MLflow client for tests/tracking/test_mlflow_client_real.py: mlflow-skinny, pinned, in a
# venv of its own outside the clone (the portal's venv never imports mlflow). install.sh --dev runs
# this; it does nothing when that version is already there, so no test downloads anything.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

VERSION="${MLFLOW_CLIENT_VERSION:-3.17.2}"
PREFIX="${MLFLOW_CLIENT_VENV:-$GPUPORTAL_STATE/mlflow-client-venv}"
stamp="$PREFIX/.installed-$VERSION"
[[ -e $stamp && -x $PREFIX/bin/python ]] && exit 0

say "pip: installing mlflow-skinny $VERSION into $PREFIX"
rm -rf "$PREFIX"
/usr/bin/python3 -m venv "$PREFIX"
"$PREFIX/bin/pip" install -q --disable-pip-version-check "mlflow-skinny==$VERSION" >"$PREFIX/pip.log" 2>&1 \
  || { cat "$PREFIX/pip.log" >&2; exit 1; }
chmod -R a+rX "$PREFIX"
touch "$stamp"
