#!/usr/bin/env bash
# Installs the portal's Python environment (and, with --dev, what the tests need: Chromium).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

dev=0
[[ "${1:-}" == "--dev" ]] && dev=1

apt_missing() {
  local missing=()
  for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
  if ((${#missing[@]})); then
    say "apt: installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

apt_missing python3 python3-venv python3-dev curl
((dev)) && apt_missing chromium fonts-dejavu-core

mkdir -p "$GPUPORTAL_STATE"
chmod 755 "$GPUPORTAL_STATE"
if [[ ! -x "$VENV/bin/python" ]]; then
  say "creating venv $VENV"
  /usr/bin/python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
fi
# Reinstall only when pyproject.toml or the checkout (editable install) changed.
extras=""; ((dev)) && extras="[dev]"
stamp="$VENV/.installed-$( (cat "$ROOT/pyproject.toml"; echo "$ROOT") | sha1sum | cut -c1-12)${extras}"
if [[ ! -e "$stamp" ]]; then
  say "pip: installing gpuportal$extras"
  # Quiet unless it fails: setuptools' build chatter is no news.
  "$VENV/bin/pip" install -q --disable-pip-version-check -e "$ROOT$extras" >"$VENV/pip.log" 2>&1 \
    || { cat "$VENV/pip.log" >&2; exit 1; }
  touch "$stamp"
fi
