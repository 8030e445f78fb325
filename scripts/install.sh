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
# Notebook servers: node for configurable-http-proxy, R for the IRkernel kernel.
apt_missing nodejs r-base-core r-cran-irkernel
command -v npm >/dev/null || apt_missing npm  # NodeSource's nodejs brings its own npm
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

# configurable-http-proxy, exactly as locked in spawners/package-lock.json.
lock="$ROOT/spawners/node_modules/.installed-$(sha1sum <"$ROOT/spawners/package-lock.json" | cut -c1-12)"
if [[ ! -e "$lock" ]]; then
  say "npm: installing configurable-http-proxy"
  (cd "$ROOT/spawners" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  touch "$lock"
fi
# The R kernel, visible to every user's JupyterLab (/usr/local/share/jupyter/kernels/ir).
if [[ ! -e /usr/local/share/jupyter/kernels/ir/kernel.json ]]; then
  say "jupyter: registering the R kernel"
  JUPYTER_PATH="$VENV/share/jupyter" PATH="$VENV/bin:$PATH" R --quiet --no-save -e "IRkernel::installspec(user = FALSE)" >/dev/null
fi
# The shared data mount users see next to their templates.
if [[ ! -d "$DATA_DIR" ]]; then
  mkdir -p "$DATA_DIR"
  chmod 755 "$DATA_DIR"
fi
