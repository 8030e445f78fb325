#!/usr/bin/env bash
# Runs the whole test suite against the real local cluster and directory, installing and
# starting what it needs first: everything `make up` starts, so the tests also see the portal's
# own processes (and the accounts they run as). Extra arguments go to pytest (e.g. `-k ldap`).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

"$ROOT/scripts/up.sh"
"$ROOT/scripts/install.sh" --dev
# The demo accounts start from a known point (no jobs, fresh homes): nothing an earlier run left
# there can make a test pass or fail.
"$ROOT/slurm/dev/reset-demo.sh"

cd "$ROOT"
say "ruff"
ruff check .
export DJANGO_SETTINGS_MODULE=portal.settings.test
# The documentation site, strictly: a broken link, a missing page or a stale reference fails here.
say "mkdocs build --strict"
NO_MKDOCS_2_WARNING=1 mkdocs build --strict --quiet
if (($#)); then
  say "pytest $*"
  exec pytest "$@"
fi
# Two stages: everything, then the fault tests that kill and restart real services.
say "pytest: all but the fault tests"
pytest -m "not fault" --durations=40
say "pytest: fault tests"
pytest -m fault
