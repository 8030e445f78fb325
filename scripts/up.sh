#!/usr/bin/env bash
# Brings the whole portal up on the local cluster: Slurm + LDAP + Redis + PostgreSQL, then the
# portal (gunicorn), Celery worker and beat. Idempotent: what already runs is left running.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

"$ROOT/slurm/dev/up.sh"
"$ROOT/scripts/install.sh"
mkdir -p "$RUN" "$LOG"

cd "$ROOT"
# The hub's secrets (service token, OAuth client secret...), generated once; the portal needs them too.
"$ROOT/spawners/hub.sh" secrets
set -a; source "$GPUPORTAL_STATE/hub/secrets.env"; set +a
python manage.py migrate --noinput >/dev/null
python manage.py hub_oauth_app >/dev/null
python manage.py collectstatic --noinput >/dev/null
# Fill the cluster snapshot now so the first page view has data.
python manage.py slurm_poll

running() { [[ -f "$RUN/$1.pid" ]] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; }

start() {  # name, command...
  local name=$1; shift
  if running "$name"; then return; fi
  say "starting $name"
  setsid "$@" >>"$LOG/$name.log" 2>&1 </dev/null &
  echo $! >"$RUN/$name.pid"
}

start gunicorn gunicorn portal.wsgi --bind "$PORTAL_HOST:$PORTAL_PORT" --workers 2 --timeout 60
start celery-worker celery -A portal worker --loglevel INFO --concurrency 2 --hostname "worker@%h"
start celery-beat celery -A portal beat --loglevel INFO --schedule "$RUN/celerybeat-schedule"
say "starting JupyterHub and its proxy"
"$ROOT/spawners/hub.sh" start

for _ in $(seq 50); do
  curl -fs -o /dev/null "http://$PORTAL_HOST:$PORTAL_PORT/accounts/login/" && break
  sleep 0.2
done
curl -fs -o /dev/null "http://$PORTAL_HOST:$PORTAL_PORT/accounts/login/" \
  || { echo "portal did not start; see $LOG/gunicorn.log" >&2; exit 1; }

cat <<MSG

gpuportal is up:  http://$PORTAL_HOST:$PORTAL_PORT/
  API docs:       http://$PORTAL_HOST:$PORTAL_PORT/api/docs/
  Notebooks:      http://$PORTAL_HOST:$PORTAL_PORT/servers/  (JupyterHub at http://127.0.0.1:8001/)

Demo logins (LDAP):
  alice / alice-pw   portal user
  bob   / bob-pw     portal user
  ada   / ada-pw     portal admin (sees the Admin link)
  eve   / eve-pw     not in portal-users: refused

Logs: $LOG    Stop everything: make down
MSG
