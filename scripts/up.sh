#!/usr/bin/env bash
# Brings the whole portal up on the local cluster: Slurm + LDAP + Redis + PostgreSQL, then the
# portal (gunicorn), Celery worker and beat as the unprivileged account gpuportal, and the hub as
# jupyterhub. Idempotent: what already runs is left running; secrets are generated once and kept.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

# The portal's accounts first (scripts/install.sh): the bed grants them Slurm privileges, which
# slurmdbd ties to their uids when granted.
"$ROOT/scripts/install.sh"
"$ROOT/slurm/dev/up.sh"
# The bed's clusters as cluster files, before the portal's services and the hub read them (#38).
"$ROOT/scripts/bed-clusters.sh"
mkdir -p "$RUN" "$LOG"

# The account's home is root's (it holds the environment file root writes); run/ and log/ are the
# account's own, private to it.
install -d -o root -g root -m 0755 "$PORTAL_HOME"
install -d -o "$PORTAL_USER" -g "$PORTAL_USER" -m 0750 "$PORTAL_RUN" "$PORTAL_LOG"
# The policy the portal publishes and the hub reads (portal/policy): the portal's to write, all may read.
install -d -o "$PORTAL_USER" -g "$PORTAL_USER" -m 0755 "$GPUPORTAL_STATE/policy"
# Container runtimes, the local registry (a stand-in for nvcr.io) and its image; cached.
"$ROOT/scripts/containers/setup.sh"

# The hub's secrets (its service token for the portal, OAuth client secret, culler token...), made
# once, mode 0600, owned by the hub's account; the portal gets its own copy of the two it shares.
"$ROOT/spawners/hub.sh" secrets
HUB_SECRETS="$GPUPORTAL_STATE/hub/secrets.env"

# What the portal's processes read from their environment: the settings in root's environment
# (slurm/dev/env.sh, or e.g. `SLURM_POLL_SECONDS=5 make up`) and the secrets, rewritten on every run
# so settings follow, but DJANGO_SECRET_KEY is generated only when there is none yet.
# The bed's apps gateway: 127.0.0.1:8002 is the hub proxy's API (spawners/hub.sh), so 8003.
export APPS_GATEWAY_BIND="${APPS_GATEWAY_BIND:-127.0.0.1:8003}" APPS_ORIGIN="${APPS_ORIGIN:-http://apps.localhost:8003}"
# The bed runs no syslog daemon (no /dev/log): the audit trail is not shipped unless one is named.
export AUDIT_SYSLOG_ADDRESS="${AUDIT_SYSLOG_ADDRESS-}"
SETTINGS='^(DJANGO|LDAP|JOBS|JUPYTERHUB|HUB|SERVERS|AXES|API|OAUTH|SITE|DIRECTORY|GPUPORTAL|CONTAINERS|APPS|AUDIT)_[A-Z0-9_]+$'
SETTINGS+='|^(SLURM_(ADAPTER|REST_URL|BIN_DIR|EXEC_PREFIX|TIMEOUT_SECONDS|POLL_SECONDS|CONF|PROJECTS_PARENT_ACCOUNT)|DATABASE_URL|REDIS_URL|TIME_ZONE'
SETTINGS+='|LOG_LEVEL|STATIC_ROOT|CLUSTERS_DIR)$'
SECRETS='^(DJANGO_SECRET_KEY|APPS_SIGNING_KEY|JUPYTERHUB_API_TOKEN|JUPYTERHUB_OAUTH_CLIENT_SECRET)$'
portal_env_write() {
  local secret_key apps_key api_token oauth_secret name tmp
  secret_key=$(secret_read "$PORTAL_ENV" DJANGO_SECRET_KEY)
  [[ -n $secret_key ]] || { say "generating DJANGO_SECRET_KEY"; secret_key=$(openssl rand -hex 32); }
  apps_key=$(secret_read "$PORTAL_ENV" APPS_SIGNING_KEY)
  [[ -n $apps_key ]] || { say "generating APPS_SIGNING_KEY"; apps_key=$(openssl rand -hex 32); }
  api_token=$(secret_read "$HUB_SECRETS" JUPYTERHUB_API_TOKEN)
  oauth_secret=$(secret_read "$HUB_SECRETS" JUPYTERHUB_OAUTH_CLIENT_SECRET)
  [[ -n $api_token && -n $oauth_secret ]] || die "no hub secrets in $HUB_SECRETS"
  tmp=$(mktemp "$PORTAL_HOME/.gpuportal.env.XXXXXX")
  {
    echo "# Written by scripts/up.sh on every run: settings from its environment, secrets kept."
    echo "# Mode 0600, owner $PORTAL_USER. Format: deploy/gpuportal.env.example."
    for name in $(compgen -e | grep -E "$SETTINGS" | grep -vE "$SECRETS" | sort); do
      [[ ${!name} != *"'"* && ${!name} != *$'\n'* ]] || die "$name: quotes and newlines are not supported"
      printf "%s='%s'\n" "$name" "${!name}"
    done
    printf "DJANGO_SECRET_KEY='%s'\nAPPS_SIGNING_KEY='%s'\nJUPYTERHUB_API_TOKEN='%s'\n" \
      "$secret_key" "$apps_key" "$api_token"
    printf "JUPYTERHUB_OAUTH_CLIENT_SECRET='%s'\n" "$oauth_secret"
  } >"$tmp"
  if cmp -s "$tmp" "$PORTAL_ENV" && [[ $(stat -c %a:%U "$PORTAL_ENV") == "600:$PORTAL_USER" ]]; then
    rm -f "$tmp"
    return
  fi
  chown "$PORTAL_USER:$PORTAL_USER" "$tmp"
  chmod 600 "$tmp"
  mv -f "$tmp" "$PORTAL_ENV"
}
portal_env_write

# The apps gateway's own environment file (#33): its settings, its database role and APPS_SIGNING_KEY
# (the portal's: the portal mints the grants it checks), nothing of the portal's or the hub's
# secrets, and no REDIS_URL (Redis is the task broker; the gateway needs none). The role's password
# is generated once, kept only here, and set on the role every run.
APPS_SETTINGS='^(APPS_[A-Z0-9_]+|TIME_ZONE|LOG_LEVEL|DATABASE_CONN_MAX_AGE)$'
read -r DB_ROLE DB_HOST DB_PORT DB_NAME < <(python3 -c 'import sys, urllib.parse as u
p = u.urlsplit(sys.argv[1]); print(p.username, p.hostname, p.port, p.path.strip("/"))' "$DATABASE_URL")
APPS_ROLE="${DB_ROLE}_gateway"
# The bed's superuser over its socket (slurm/dev/services/postgres.sh: peer authentication).
PG_SOCKET="$GPUPORTAL_STATE/postgres/run"
pg_as_admin() {
  runuser -u postgres -- psql -h "$PG_SOCKET" -p "$DB_PORT" -U postgres -d postgres -XtAq -v ON_ERROR_STOP=1 "$@"
}
apps_env_write() {
  local password name tmp apps_key
  apps_key=$(secret_read "$PORTAL_ENV" APPS_SIGNING_KEY)
  [[ -n $apps_key ]] || die "no APPS_SIGNING_KEY in $PORTAL_ENV"
  password=""
  [[ ! -f $APPS_ENV ]] ||
    password=$(sed -n "s|^DATABASE_URL='[a-z]*://$APPS_ROLE:\([A-Za-z0-9_-]\{32,\}\)@.*|\1|p" "$APPS_ENV" | tail -n1)
  [[ -n $password ]] || { say "generating the apps gateway's database password"; password=$(openssl rand -hex 32); }
  pg_as_admin <<SQL >/dev/null
SELECT format('CREATE ROLE %I LOGIN', '$APPS_ROLE')
 WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '$APPS_ROLE') \gexec
ALTER ROLE "$APPS_ROLE" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD '$password';
SQL
  install -d -o root -g root -m 0755 "$APPS_HOME"
  install -d -o "$APPS_USER" -g "$APPS_USER" -m 0750 "$APPS_LOG"
  tmp=$(mktemp "$APPS_HOME/.apps-gateway.env.XXXXXX")
  {
    echo "# Written by scripts/up.sh on every run: the apps gateway's settings and secrets, none of the"
    echo "# portal's or the hub's. Mode 0600, owner $APPS_USER. Format: deploy/apps-gateway.env.example."
    echo "DJANGO_SETTINGS_MODULE='portal.settings.gateway'"
    for name in $(compgen -e | grep -E "$APPS_SETTINGS" | grep -v '^APPS_SIGNING_KEY$' | sort); do
      [[ ${!name} != *"'"* && ${!name} != *$'\n'* ]] || die "$name: quotes and newlines are not supported"
      printf "%s='%s'\n" "$name" "${!name}"
    done
    printf "DATABASE_URL='postgres://%s:%s@%s:%s/%s'\n" "$APPS_ROLE" "$password" "$DB_HOST" "$DB_PORT" "$DB_NAME"
    printf "APPS_SIGNING_KEY='%s'\n" "$apps_key"
  } >"$tmp"
  if cmp -s "$tmp" "$APPS_ENV" && [[ $(stat -c %a:%U "$APPS_ENV") == "600:$APPS_USER" ]]; then
    rm -f "$tmp"
    return
  fi
  chown "$APPS_USER:$APPS_USER" "$tmp"
  chmod 600 "$tmp"
  mv -f "$tmp" "$APPS_ENV"
}
apps_env_write

cd "$ROOT"
"${AS_PORTAL[@]}" - python manage.py migrate --noinput >/dev/null
# The gateway's role gets exactly what it reads and writes, from the database admin, after every
# migrate (docs/deploy.md does the same in production).
runuser -u postgres -- env -i PATH="$VENV/bin:/usr/bin:/bin" DJANGO_SETTINGS_MODULE=portal.settings.base \
  python manage.py apps_gateway_grants --role "$APPS_ROLE" \
  --database-url "postgresql:///$DB_NAME?host=$PG_SOCKET&port=$DB_PORT" >/dev/null
"${AS_PORTAL[@]}" - python manage.py hub_oauth_app >/dev/null
"${AS_PORTAL[@]}" - python manage.py environments_sync
"${AS_PORTAL[@]}" - python manage.py apps_catalog_sync
# The demo projects (LDAP groups from slurm/dev/services/ldap.sh): Slurm accounts with GPU-hour
# budgets. Idempotent: two reads when nothing changed.
"${AS_PORTAL[@]}" - python manage.py projects_sync --define vision:vision:vision:500 --define nlp:nlp:nlp:50 >/dev/null
# The local registry's image in the container catalog, once per runtime (scripts/containers/setup.sh).
image="${CONTAINERS_REGISTRY_URL:-https://127.0.0.1:5000}"; image="${image#https://}/gpuportal/python:3.11-bookworm"
for runtime in charliecloud podman; do
  "${AS_PORTAL[@]}" - python manage.py image_register "python-$runtime" "$runtime" "$image" \
    --title "Python 3.11 (Debian 12, $runtime)" --framework python=3.11 \
    --description "Built from Debian packages by scripts/containers/setup.sh; pull it, then pick it." >/dev/null
done
# Static files go into the checkout, which the service account only reads: root collects them.
python manage.py collectstatic --noinput >/dev/null
# The documentation site (mkdocs.yml: docs/ into site/, served at /docs/), built the same way. A page
# that does not build never stops the bed: `make test` builds it --strict.
NO_MKDOCS_2_WARNING=1 mkdocs build --quiet --no-strict || echo "warning: the documentation site did not build" >&2
# Fill the cluster snapshot now so the first page view has data.
"${AS_PORTAL[@]}" - python manage.py slurm_poll
# The hub starts nothing without the policy file; the poll above wrote it, this says where.
"${AS_PORTAL[@]}" - python manage.py policy_publish

running() { [[ -f "$RUN/$1.pid" ]] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; }

start() {  # name, command... (started as the portal's account; the pid file is root's)
  local name=$1; shift
  if running "$name"; then return; fi
  say "starting $name (as $PORTAL_USER)"
  setsid "${AS_PORTAL[@]}" "$PORTAL_LOG/$name.log" "$@" </dev/null &
  echo $! >"$RUN/$name.pid"
}

# Its control socket (gunicornc) in the account's run dir; the default is under $HOME, which is root's.
# Threads let a worker overlap requests' waits on the database and the broker.
start gunicorn gunicorn portal.wsgi --bind "$PORTAL_HOST:$PORTAL_PORT" --workers 2 --threads 4 \
  --timeout 60 --control-socket "$PORTAL_RUN/gunicorn.ctl"
# A task mostly waits on sbatch (a subprocess): threads run several at once for little memory.
start celery-worker celery -A portal.celery_app worker --loglevel INFO --pool threads --concurrency 8 \
  --hostname "worker@%h"
start celery-beat celery -A portal.celery_app beat --loglevel INFO --schedule "$PORTAL_RUN/celerybeat-schedule"
# Users' web apps, each on its own host under APPS_ORIGIN (tornado; portal/webapps/gateway), as the
# gateway's own account with its own environment file.
if ! running apps-gateway; then
  say "starting apps-gateway (as $APPS_USER)"
  setsid "${AS_APPS[@]}" "$APPS_LOG/apps-gateway.log" python manage.py apps_gateway </dev/null &
  echo $! >"$RUN/apps-gateway.pid"
fi
say "starting JupyterHub and its proxy (as $HUB_USER)"
"$ROOT/spawners/hub.sh" start

for _ in $(seq 50); do
  curl -fs -o /dev/null "http://$PORTAL_HOST:$PORTAL_PORT/accounts/login/" && break
  sleep 0.2
done
curl -fs -o /dev/null "http://$PORTAL_HOST:$PORTAL_PORT/accounts/login/" \
  || { echo "portal did not start; see $PORTAL_LOG/gunicorn.log" >&2; exit 1; }

cat <<MSG

gpuportal is up:  http://$PORTAL_HOST:$PORTAL_PORT/
  API docs:       http://$PORTAL_HOST:$PORTAL_PORT/api/docs/
  Documentation:  http://$PORTAL_HOST:$PORTAL_PORT/docs/  (sources in docs/)
  Notebooks:      http://$PORTAL_HOST:$PORTAL_PORT/servers/  (JupyterHub at http://127.0.0.1:8001/)
  Web apps:       $APPS_ORIGIN  (each app at its own <uuid>.<that host>)

Demo logins (LDAP):
  alice / alice-pw   portal user
  bob   / bob-pw     portal user
  ada   / ada-pw     portal admin (sees the Admin link)
  eve   / eve-pw     not in portal-users: refused

Portal logs: $PORTAL_LOG (runs as $PORTAL_USER)    Hub: $GPUPORTAL_STATE/hub/log (as $HUB_USER)
Apps gateway log: $APPS_LOG (runs as $APPS_USER, its settings in $APPS_ENV)
Cluster logs: $LOG    Stop everything: make down
MSG
