#!/usr/bin/env bash
# Containers on the local test bed (README "Containers"): the runtimes users run images with
# (Charliecloud, rootless Podman), a small real image built from Debian packages, and a private OCI
# registry on loopback with basic auth over TLS, standing in for nvcr.io, holding that image.
#   setup.sh          install, build (once), start the registry, push (once)
#   setup.sh stop     stop the registry          setup.sh start   start it
# Idempotent and cached outside the clone: a second run rebuilds and pushes nothing (~1 s).
set -euo pipefail
source "$(dirname "$0")/../lib.sh"

IMAGES_DIR="${CONTAINERS_IMAGES_DIR:-/opt/gpuportal/images}"
REGISTRY_STATE="$GPUPORTAL_STATE/registry"
REGISTRY_ADDR="${CONTAINERS_REGISTRY_ADDR:-127.0.0.1:5000}"
REGISTRY_USER=docker-registry                 # Debian's package makes this unprivileged account
REGISTRY_LOGIN='$oauthtoken'                  # NGC's literal user name; the password is the API key
REGISTRY_PIDFILE="$RUN/registry.pid"
# NGC-style name, honest content: Debian 12's python3 (3.11, the same as the portal's venv).
IMAGE_NAME=gpuportal/python:3.11-bookworm

# shellcheck source=../packages.sh
source "$ROOT/scripts/packages.sh"

registry_running() {
  [[ -f $REGISTRY_PIDFILE ]] && kill -0 "$(cat "$REGISTRY_PIDFILE")" 2>/dev/null \
    && [[ $(awk '{print $3}' "/proc/$(cat "$REGISTRY_PIDFILE")/stat" 2>/dev/null) != Z ]]
}

registry_ready() { [[ $(curl -s -o /dev/null -w '%{http_code}' "https://$REGISTRY_ADDR/v2/") == 401 ]]; }

registry_stop() {
  registry_running || return 0
  say "stopping the registry"
  kill "$(cat "$REGISTRY_PIDFILE")"
  for _ in $(seq 50); do registry_running || break; sleep 0.1; done
  rm -f "$REGISTRY_PIDFILE"
}

registry_start() {
  mkdir -p "$RUN" "$LOG"
  if ! registry_running; then
    say "starting the registry on https://$REGISTRY_ADDR (as $REGISTRY_USER)"
    touch "$LOG/registry.log"
    chown "$REGISTRY_USER" "$LOG/registry.log"
    setsid setpriv --reuid="$REGISTRY_USER" --regid="$(id -g "$REGISTRY_USER")" --init-groups \
      --inh-caps=-all -- /usr/bin/docker-registry serve "$REGISTRY_STATE/config.yml" \
      </dev/null >>"$LOG/registry.log" 2>&1 &
    echo $! >"$REGISTRY_PIDFILE"
  fi
  for _ in $(seq 100); do registry_ready && return; sleep 0.1; done
  die "the registry did not answer on https://$REGISTRY_ADDR; see $LOG/registry.log"
}

tls_setup() {  # a CA of the bed's own, trusted by the system (ch-image's requests) and by podman
  local tls=$REGISTRY_STATE/tls
  install -d -m 0750 -o root -g "$(id -g "$REGISTRY_USER")" "$tls"
  if [[ ! -s $tls/server.crt ]]; then
    say "registry: making a local CA and a certificate for ${REGISTRY_ADDR%:*}"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=gpuportal test-bed registry CA" \
      -keyout "$tls/ca.key" -out "$tls/ca.crt" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=${REGISTRY_ADDR%:*}" \
      -keyout "$tls/server.key" -out "$tls/server.csr" 2>/dev/null
    openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" -CAcreateserial \
      -days 3650 -extfile <(printf 'subjectAltName=IP:%s\n' "${REGISTRY_ADDR%:*}") -out "$tls/server.crt" 2>/dev/null
    chmod 0600 "$tls/ca.key"
    chgrp "$(id -g "$REGISTRY_USER")" "$tls/server.key"
    chmod 0640 "$tls/server.key"
  fi
  if ! cmp -s "$tls/ca.crt" /usr/local/share/ca-certificates/gpuportal-registry.crt; then
    install -m 0644 "$tls/ca.crt" /usr/local/share/ca-certificates/gpuportal-registry.crt
    update-ca-certificates >/dev/null 2>&1
  fi
  install -d -m 0755 "/etc/containers/certs.d/$REGISTRY_ADDR"
  cmp -s "$tls/ca.crt" "/etc/containers/certs.d/$REGISTRY_ADDR/ca.crt" \
    || install -m 0644 "$tls/ca.crt" "/etc/containers/certs.d/$REGISTRY_ADDR/ca.crt"
}

registry_setup() {
  install -d -m 0755 "$REGISTRY_STATE"
  install -d -m 0750 -o "$REGISTRY_USER" -g "$(id -g "$REGISTRY_USER")" "$REGISTRY_STATE/data"
  tls_setup
  # The API key of the test bed's registry account: generated once, readable by root only (tests
  # and the demo read it from here; the portal never sees it unless a user stores it).
  if [[ ! -s $REGISTRY_STATE/api-key ]]; then
    say "registry: generating its API key ($REGISTRY_STATE/api-key)"
    (umask 077; openssl rand -hex 24 >"$REGISTRY_STATE/api-key")
  fi
  chmod 0600 "$REGISTRY_STATE/api-key"
  local htpasswd=$REGISTRY_STATE/htpasswd
  if [[ ! -s $htpasswd ]] || ! htpasswd -vib "$htpasswd" "$REGISTRY_LOGIN" "$(cat "$REGISTRY_STATE/api-key")" 2>/dev/null; then
    # -i: the key goes through stdin, never argv.
    htpasswd -ciB "$htpasswd" "$REGISTRY_LOGIN" <"$REGISTRY_STATE/api-key" 2>/dev/null
    chgrp "$(id -g "$REGISTRY_USER")" "$htpasswd"
    chmod 0640 "$htpasswd"
  fi
  local tmp
  tmp=$(mktemp)
  cat >"$tmp" <<YAML
# Written by scripts/containers/setup.sh.
version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: $REGISTRY_STATE/data
  delete:
    enabled: true
http:
  addr: $REGISTRY_ADDR
  tls:
    certificate: $REGISTRY_STATE/tls/server.crt
    key: $REGISTRY_STATE/tls/server.key
auth:
  htpasswd:
    realm: gpuportal-registry
    path: $htpasswd
YAML
  if ! cmp -s "$tmp" "$REGISTRY_STATE/config.yml"; then
    install -m 0644 "$tmp" "$REGISTRY_STATE/config.yml"
    registry_stop
  fi
  rm -f "$tmp"
}

image_build() {  # a Debian root file system with python3, as a layer tarball (cached)
  install -d -m 0755 "$IMAGES_DIR"
  # Keyed by this function's own text: a changed recipe builds anew (make purge keeps the cache).
  local key
  key=$(declare -f image_build | sha1sum | cut -c1-12)
  ROOTFS="$IMAGES_DIR/python-3.11-bookworm-$key.tar"
  [[ -s $ROOTFS ]] && return
  rm -f "$IMAGES_DIR"/python-3.11-bookworm*.tar
  say "building the image $IMAGE_NAME from Debian packages (mmdebstrap, ~1 min)"
  local tmp="$ROOTFS.tmp.tar"
  # No docs, man pages or locales: a third smaller, nothing a program needs.
  mmdebstrap --quiet --variant=minbase --include=python3,ca-certificates \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias' \
    --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/*' \
    --customize-hook="echo $IMAGE_NAME >\"\$1/etc/gpuportal-image\"" \
    bookworm "$tmp" http://deb.debian.org/debian >/dev/null
  mv -f "$tmp" "$ROOTFS"
}

image_push() {  # once per built tarball: a stamp holds the tarball's checksum
  local stamp="$REGISTRY_STATE/pushed" sum auth
  sum="$(stat -c %s:%Y "$ROOTFS")"
  [[ -f $stamp && $(cat "$stamp") == "$sum" ]] && return
  say "pushing $IMAGE_NAME to $REGISTRY_ADDR"
  # The credentials go through a 0600 auth file, never argv.
  auth=$(mktemp)
  printf '{"auths":{"%s":{"auth":"%s"}}}\n' "$REGISTRY_ADDR" \
    "$(printf '%s:%s' "$REGISTRY_LOGIN" "$(cat "$REGISTRY_STATE/api-key")" | base64 -w0)" >"$auth"
  skopeo copy --quiet --authfile "$auth" tarball:"$ROOTFS" "docker://$REGISTRY_ADDR/$IMAGE_NAME" </dev/null \
    || { rm -f "$auth"; die "skopeo could not push $IMAGE_NAME"; }
  rm -f "$auth"
  echo "$sum" >"$stamp"
}

portal_key() {  # the key registry API keys are encrypted with at rest: a file, never the database
  local key=$PORTAL_HOME/containers.key
  [[ -s $key ]] && return
  say "generating the portal's registry-key encryption key ($key)"
  # A Fernet key: 32 random bytes, URL-safe base64.
  (umask 077; openssl rand 32 | base64 -w0 | tr '+/' '-_' >"$key")
  chown "$PORTAL_USER:$PORTAL_USER" "$key"
}

podman_state_reset() {
  # Rootless Podman keeps each user's run state in /tmp/podman-run-<uid>. Where it outlived its
  # processes (a reboot that kept /tmp, a job Slurm killed), its pause.pid and "alive" marker make
  # every podman call fail ("invalid internal status", "cannot re-exec process to join the
  # existing user namespace"). Without them podman sets the state up afresh, as after a boot.
  # Jobs do the same for themselves (portal/containers/runtimes.py, _PODMAN_STALE_STATE).
  local run pidfile live
  # A pid counts only while it is still that program of that user (pids are reused after a boot).
  alive() { [ -n "$1" ] && [ "$(stat -c %u "/proc/$1" 2>/dev/null)" = "$3" ] \
    && [ "$(cat "/proc/$1/comm" 2>/dev/null)" = "$2" ]; }
  for run in /tmp/podman-run-*; do
    # Root deletes here: only a folder its user owns, and no link on the way (/tmp is anybody's, and
    # a user's link could otherwise aim root's rm elsewhere).
    [ ! -L "$run" ] && [ ! -L "$run/libpod" ] && [ ! -L "$run/libpod/tmp" ] && [ -d "$run/libpod/tmp" ] \
      && [ "$(stat -c %u "$run")" = "${run##*-}" ] || continue
    if alive "$(cat "$run/libpod/tmp/pause.pid" 2>/dev/null)" "podman pause" "${run##*-}"; then continue; fi
    live=
    for pidfile in "$run"/containers/*-containers/*/userdata/conmon.pid; do
      [ -f "$pidfile" ] && alive "$(cat "$pidfile")" conmon "${run##*-}" && live=1
    done
    [ -n "$live" ] || rm -f "$run/libpod/tmp/pause.pid" "$run/libpod/tmp/alive"
  done
}

case ${1:-up} in
  stop) registry_stop; exit ;;
  start) registry_start; exit ;;
  up) ;;
  *) echo "usage: $0 [up|start|stop]" >&2; exit 2 ;;
esac

# Runtimes: Charliecloud (ch-run, ch-image, ch-convert) and rootless Podman (runc: crun refuses
# hybrid cgroups; uidmap for the users' /etc/subuid ranges). The registry and the tools to fill it.
apt_groups containers
portal_key
podman_state_reset
registry_setup
registry_start
image_build
image_push
