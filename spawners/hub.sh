#!/usr/bin/env bash
# Starts or stops JupyterHub, its configurable-http-proxy (on loopback) and the idle culler (a hub
# service), for `make up` and tests.
#   spawners/hub.sh start|stop|stop-hub|status|secrets
# Settings come from the environment (defaults: the ports of `make up`, state in $GPUPORTAL_STATE/hub):
#   HUB_STATE_DIR, HUB_PORT, HUB_PROXY_PORT, HUB_PROXY_API_PORT, PORTAL_URL, JUPYTERHUB_API_TOKEN,
#   JUPYTERHUB_OAUTH_CLIENT_SECRET, CONFIGPROXY_AUTH_TOKEN, JUPYTERHUB_CRYPT_KEY, HUB_CULL_TIMEOUT,
#   HUB_CULL_EVERY, HUB_CULLER_TOKEN, HUB_CONFIG (another config file, e.g. the benchmark's).
# Secrets not given are generated once into $HUB_STATE_DIR/secrets.env (mode 600).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$HERE")"
export HUB_STATE_DIR="${HUB_STATE_DIR:-${GPUPORTAL_STATE:-/var/lib/gpuportal}/hub}"
export HUB_PORT="${HUB_PORT:-8081}" HUB_PROXY_PORT="${HUB_PROXY_PORT:-8001}"
export HUB_PROXY_API_PORT="${HUB_PROXY_API_PORT:-8002}"
# Jobs copy the notebook templates from here as the user: readable by all, unlike the hub's state.
export HUB_TEMPLATES_DIR="${HUB_TEMPLATES_DIR:-${GPUPORTAL_STATE:-/var/lib/gpuportal}/notebook-templates}"
VENV_BIN="$(dirname "$(command -v python)")"

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
    curl -s -o /dev/null "$1" && return 0
    running "$2" || break
    sleep 0.2
  done
  echo "no answer from $1; see $HUB_STATE_DIR/*.log" >&2
  return 1
}

secrets() {
  local file="$HUB_STATE_DIR/secrets.env" key
  (umask 077; touch "$file")
  for key in JUPYTERHUB_API_TOKEN JUPYTERHUB_OAUTH_CLIENT_SECRET CONFIGPROXY_AUTH_TOKEN \
             JUPYTERHUB_CRYPT_KEY HUB_CULLER_TOKEN; do
    grep -q "^$key=" "$file" || echo "$key=$(openssl rand -hex 32)" >>"$file"
  done
  # Values already in the environment (tests, an operator's) win over the file.
  while IFS='=' read -r key value; do
    [[ -n "${!key:-}" ]] || export "$key=$value"
  done <"$file"
}

start() {
  mkdir -p "$HUB_STATE_DIR" "$HUB_TEMPLATES_DIR"
  chmod 700 "$HUB_STATE_DIR"
  secrets
  cp -r "$ROOT/templates/notebooks/." "$HUB_TEMPLATES_DIR/"
  chmod -R a+rX "$HUB_TEMPLATES_DIR"
  if ! running "$HUB_STATE_DIR/proxy.pid"; then
    setsid "$HERE/node_modules/.bin/configurable-http-proxy" --ip 127.0.0.1 --port "$HUB_PROXY_PORT" \
      --api-ip 127.0.0.1 --api-port "$HUB_PROXY_API_PORT" \
      --default-target "http://127.0.0.1:$HUB_PORT" \
      --error-target "http://127.0.0.1:$HUB_PORT/hub/error" \
      >>"$HUB_STATE_DIR/proxy.log" 2>&1 </dev/null &
    echo $! >"$HUB_STATE_DIR/proxy.pid"
  fi
  if ! running "$HUB_STATE_DIR/hub.pid"; then
    (cd "$HUB_STATE_DIR" && PATH="$VENV_BIN:/usr/sbin:/usr/bin:/bin" exec setsid "$VENV_BIN/jupyterhub" \
      -f "${HUB_CONFIG:-$HERE/jupyterhub_config.py}" >>"$HUB_STATE_DIR/hub.log" 2>&1 </dev/null) &
    echo $! >"$HUB_STATE_DIR/hub.pid"
  fi
  wait_http "http://127.0.0.1:$HUB_PORT/hub/api/" "$HUB_STATE_DIR/hub.pid"
  if ! running "$HUB_STATE_DIR/culler.pid"; then
    JUPYTERHUB_API_TOKEN="$HUB_CULLER_TOKEN" JUPYTERHUB_API_URL="http://127.0.0.1:$HUB_PORT/hub/api" \
      setsid "$VENV_BIN/python" -m jupyterhub_idle_culler --timeout="${HUB_CULL_TIMEOUT:-3600}" \
      --cull-every="${HUB_CULL_EVERY:-300}" >>"$HUB_STATE_DIR/culler.log" 2>&1 </dev/null &
    echo $! >"$HUB_STATE_DIR/culler.pid"
  fi
}

case "${1:-}" in
  start) start ;;
  secrets) mkdir -p "$HUB_STATE_DIR" && chmod 700 "$HUB_STATE_DIR" && secrets ;;
  stop) for name in culler hub proxy; do stop_pid "$HUB_STATE_DIR/$name.pid"; done ;;
  stop-hub) stop_pid "$HUB_STATE_DIR/hub.pid" ;;
  status) for name in hub proxy culler; do running "$HUB_STATE_DIR/$name.pid" || exit 1; done ;;
  *) echo "usage: $0 start|stop|stop-hub|status|secrets" >&2; exit 2 ;;
esac
