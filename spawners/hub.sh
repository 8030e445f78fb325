#!/usr/bin/env bash
# Starts or stops JupyterHub, its configurable-http-proxy (on loopback) and the idle culler (a hub
# service), for `make up` and tests.
#   spawners/hub.sh start|stop|stop-hub|status|secrets
# Settings come from the environment (defaults: the ports of `make up`, state in $GPUPORTAL_STATE/hub):
#   HUB_STATE_DIR, HUB_PORT, HUB_PROXY_PORT, HUB_PROXY_API_PORT, PORTAL_URL, JUPYTERHUB_API_TOKEN,
#   JUPYTERHUB_OAUTH_CLIENT_SECRET, CONFIGPROXY_AUTH_TOKEN, JUPYTERHUB_CRYPT_KEY, HUB_CULL_TIMEOUT,
#   HUB_CULL_EVERY, HUB_CULLER_TOKEN, HUB_CONFIG (another config file, e.g. the benchmark's),
#   CLUSTERS_DIR and SLURM_CLUSTER_NAME (the portal's clusters, #38; default /etc/gpuportal/clusters.d),
#   HUB_USER (the account all three run as when started by root; default jupyterhub, "root" for a
#   config whose spawner needs root, such as bench/stock_hub_config.py's runuser prefix).
# Secrets not given are generated once into $HUB_STATE_DIR/secrets.env (mode 600, owned by HUB_USER).
#
# Layout: $HUB_STATE_DIR itself is root's (pid files written here, the secrets file), data/ (the
# hub's database, cookie secret) and log/ belong to HUB_USER. The hub acts as a user only through
# `sudo -E -n -u <user>` for sbatch and scancel (deploy/sudoers.d/gpuportal).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$HERE")"
export HUB_STATE_DIR="${HUB_STATE_DIR:-${GPUPORTAL_STATE:-/var/lib/gpuportal}/hub}"
export HUB_DATA_DIR="$HUB_STATE_DIR/data"
HUB_LOG_DIR="$HUB_STATE_DIR/log"
export HUB_PORT="${HUB_PORT:-8081}" HUB_PROXY_PORT="${HUB_PROXY_PORT:-8001}"
export HUB_PROXY_API_PORT="${HUB_PROXY_API_PORT:-8002}"
# Jobs copy the notebook templates from here as the user: readable by all, unlike the hub's state.
export HUB_TEMPLATES_DIR="${HUB_TEMPLATES_DIR:-${GPUPORTAL_STATE:-/var/lib/gpuportal}/notebook-templates}"
VENV_BIN="$(dirname "$(command -v python)")"
SECRET_KEYS=(JUPYTERHUB_API_TOKEN JUPYTERHUB_OAUTH_CLIENT_SECRET CONFIGPROXY_AUTH_TOKEN
             JUPYTERHUB_CRYPT_KEY HUB_CULLER_TOKEN)

# Started by root: drop to HUB_USER. Started by anybody else: run as that account.
if ((EUID == 0)); then
  HUB_USER="${HUB_USER:-jupyterhub}"
  getent passwd "$HUB_USER" >/dev/null || { echo "no account $HUB_USER (scripts/install.sh makes it)" >&2; exit 1; }
else
  HUB_USER="$(id -un)"
fi

running() { [[ -f "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null \
  && [[ "$(awk '{print $3}' "/proc/$(cat "$1")/stat" 2>/dev/null)" != Z ]]; }

stop_pid() {  # pidfile: TERM its process group, wait, then KILL
  local pidfile=$1 pid
  [[ -f "$pidfile" ]] || return 0
  pid=$(cat "$pidfile")
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 50); do running "$pidfile" || break; sleep 0.2; done
  kill -KILL -- "-$pid" 2>/dev/null || true
  rm -f "$pidfile"
}

wait_http() {  # url, pidfile: until it answers at all, or the process is gone
  for _ in $(seq 150); do
    curl -s --max-time 2 -o /dev/null "$1" && return 0
    running "$2" || break
    sleep 0.2
  done
  echo "no answer from $1; see $HUB_LOG_DIR/*.log" >&2
  return 1
}

dirs() {
  mkdir -p "$HUB_STATE_DIR" "$HUB_DATA_DIR" "$HUB_LOG_DIR"
  chmod 755 "$HUB_STATE_DIR"
  chmod 700 "$HUB_DATA_DIR"
  chmod 750 "$HUB_LOG_DIR"
  if ((EUID == 0)); then
    chown root:root "$HUB_STATE_DIR"
    chown "$HUB_USER:" "$HUB_DATA_DIR" "$HUB_LOG_DIR"
    # Hubs before the data/ split kept their database and cookie secret at the top (as root).
    if ! running "$HUB_STATE_DIR/hub.pid"; then
      # Root chowns only the files it moved: a recursive chown in the hub's own folder would hand
      # the hub whatever it had linked there.
      for name in jupyterhub.sqlite cookie_secret; do
        if [[ -f "$HUB_STATE_DIR/$name" && ! -L "$HUB_STATE_DIR/$name" && ! -e "$HUB_DATA_DIR/$name" ]]; then
          mv "$HUB_STATE_DIR/$name" "$HUB_DATA_DIR/$name"
          chown "$HUB_USER:" "$HUB_DATA_DIR/$name"
        fi
      done
    fi
  fi
}

# Each secret once, from `openssl rand`; values already in the environment (tests, an operator's)
# win over the file. The file belongs to HUB_USER: it is read here only for the known names and
# only values that look generated, never sourced.
secrets() {
  local file="$HUB_STATE_DIR/secrets.env" key value
  (umask 077; touch "$file")
  for key in "${SECRET_KEYS[@]}"; do
    grep -qE "^$key=[A-Za-z0-9_-]{32,}$" "$file" || echo "$key=$(openssl rand -hex 32)" >>"$file"
  done
  chmod 600 "$file"
  if ((EUID == 0)); then chown "$HUB_USER:" "$file"; fi
  for key in "${SECRET_KEYS[@]}"; do
    value=$(sed -n "s/^$key=\([A-Za-z0-9_-]\{32,\}\)\$/\1/p" "$file" | tail -n1)
    [[ -n "${!key:-}" ]] || export "$key=$value"
  done
}

# as_hub LOGFILE COMMAND...: exec COMMAND as HUB_USER (setpriv, no fork, so `$!` is its pid) with
# HOME and friends of that account, appending its output to LOGFILE, which it opens itself.
# No --no-new-privs: the hub needs sudo for its spawner.
as_hub() {
  local logfile=$1
  shift
  if ((EUID == 0)) && [[ $HUB_USER != root ]]; then
    # The portal's own secrets, should the caller have them, are none of the hub's business.
    exec env -u DJANGO_SECRET_KEY -u DATABASE_URL -u LDAP_BIND_PASSWORD \
      HOME="$HUB_DATA_DIR" USER="$HUB_USER" LOGNAME="$HUB_USER" SHELL=/usr/sbin/nologin \
      setpriv --reuid="$HUB_USER" --regid="$HUB_USER" --init-groups --inh-caps=-all -- \
      /bin/sh -c 'umask 077; exec >>"$1" 2>&1; shift; exec "$@"' as-hub "$logfile" "$@"
  fi
  exec "$@" >>"$logfile" 2>&1
}

# The notebook templates servers copy into ~/templates: exactly the checkout's, on every start (a
# notebook renamed or removed in the checkout is gone here too; users' own copies are theirs).
templates_sync() {
  local staged
  staged=$(mktemp -d "$HUB_TEMPLATES_DIR.XXXXXX")
  cp -r "$ROOT/templates/notebooks/." "$staged/"
  chmod -R a+rX "$staged"
  rm -rf "$HUB_TEMPLATES_DIR"
  mv "$staged" "$HUB_TEMPLATES_DIR"
}

start() {
  dirs
  secrets
  templates_sync
  if ! running "$HUB_STATE_DIR/proxy.pid"; then
    (as_hub "$HUB_LOG_DIR/proxy.log" setsid "$HERE/node_modules/.bin/configurable-http-proxy" \
      --ip 127.0.0.1 --port "$HUB_PROXY_PORT" \
      --api-ip 127.0.0.1 --api-port "$HUB_PROXY_API_PORT" \
      --default-target "http://127.0.0.1:$HUB_PORT" \
      --error-target "http://127.0.0.1:$HUB_PORT/hub/error" </dev/null) &
    echo $! >"$HUB_STATE_DIR/proxy.pid"
  fi
  if ! running "$HUB_STATE_DIR/hub.pid"; then
    (cd "$HUB_DATA_DIR" && export PATH="$VENV_BIN:/usr/sbin:/usr/bin:/bin" && as_hub "$HUB_LOG_DIR/hub.log" \
      setsid "$VENV_BIN/jupyterhub" -f "${HUB_CONFIG:-$HERE/jupyterhub_config.py}" </dev/null) &
    echo $! >"$HUB_STATE_DIR/hub.pid"
  fi
  wait_http "http://127.0.0.1:$HUB_PORT/hub/api/" "$HUB_STATE_DIR/hub.pid"
  # Through the proxy's public port: a proxy that cannot bind it logs EADDRINUSE and lives on.
  wait_http "http://127.0.0.1:$HUB_PROXY_PORT/hub/api/" "$HUB_STATE_DIR/proxy.pid"
  if ! running "$HUB_STATE_DIR/culler.pid"; then
    (export JUPYTERHUB_API_TOKEN="$HUB_CULLER_TOKEN" JUPYTERHUB_API_URL="http://127.0.0.1:$HUB_PORT/hub/api"
      as_hub "$HUB_LOG_DIR/culler.log" setsid "$VENV_BIN/python" -m jupyterhub_idle_culler \
      --timeout="${HUB_CULL_TIMEOUT:-3600}" --cull-every="${HUB_CULL_EVERY:-300}" </dev/null) &
    echo $! >"$HUB_STATE_DIR/culler.pid"
  fi
}

case "${1:-}" in
  start) start ;;
  secrets) dirs && secrets ;;
  stop) for name in culler hub proxy; do stop_pid "$HUB_STATE_DIR/$name.pid"; done ;;
  stop-hub) stop_pid "$HUB_STATE_DIR/hub.pid" ;;
  status) for name in hub proxy culler; do running "$HUB_STATE_DIR/$name.pid" || exit 1; done ;;
  *) echo "usage: $0 start|stop|stop-hub|status|secrets" >&2; exit 2 ;;
esac
