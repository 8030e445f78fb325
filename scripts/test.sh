#!/usr/bin/env bash
# Runs the whole test suite against the real local cluster and directory, installing and
# starting what it needs first. Extra arguments go to pytest (e.g. `-k ldap`, `-m "not browser"`).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

"$ROOT/slurm/dev/up.sh"
"$ROOT/scripts/install.sh" --dev

cd "$ROOT"
say "ruff"
ruff check .
export DJANGO_SETTINGS_MODULE=portal.settings.test
if (($#)); then
  say "pytest $*"
  exec pytest "$@"
fi
# Two stages: everything, then the fault tests that kill and restart real services.
say "pytest: all but the fault tests"
pytest -m "not fault"
say "pytest: fault tests"
pytest -m fault
