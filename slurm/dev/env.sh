# shellcheck shell=bash
# Connection settings of the local test bed (slurm/dev/up.sh) for the Django app.
# Source it:  . slurm/dev/env.sh
# Values already set in the environment win; these are only defaults.
export GPUPORTAL_STATE="${GPUPORTAL_STATE:-/var/lib/gpuportal}"
export DATABASE_URL="${DATABASE_URL:-postgres://gpuportal:gpuportal@127.0.0.1:5433/gpuportal}"
export REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6390/0}"
export LDAP_URI="${LDAP_URI:-ldap://127.0.0.1:3389}"
export LDAP_BASE_DN="${LDAP_BASE_DN:-dc=gpuportal,dc=test}"
