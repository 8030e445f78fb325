#!/usr/bin/env bash
# Builds the framework environments notebook servers and batch jobs use, outside the clone:
#   ${GPUPORTAL_ENVS:-/opt/gpuportal/envs}/<name>   one venv per scripts/envs/<name>.txt
# and registers each as a Jupyter kernel for every user (/usr/local/share/jupyter/kernels/<name>).
# An env is rebuilt from scratch only when its requirements file changed (its hash is stamped inside
# the env), so a second run does nothing. Then writes the MNIST-format digits into the data mount.
# A rebuild deletes the old env first: kernels still running from it break, so rebuild when idle.
# Run it as root: pip takes torch from this machine's local wheel indexes (root's pip config).
#
#   scripts/envs/build.sh                 # every env
#   scripts/envs/build.sh pytorch jax     # just these
#   GPUPORTAL_ENVS_NO_DATA=1 ...          # skip writing ${GPUPORTAL_DATA_DIR:-/data}/mnist
set -euo pipefail
umask 022  # Servers run as the end user: everything built here must be world-readable.

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ENVS="${GPUPORTAL_ENVS:-/opt/gpuportal/envs}"
KERNELS="${GPUPORTAL_KERNELS_DIR:-/usr/local/share/jupyter/kernels}"
DATA_DIR="${GPUPORTAL_DATA_DIR:-/data}"
# Debian's interpreter, not a pyenv one under /root (unreadable by users). The torch wheels on this
# disk are for CPython 3.11 only.
BASE_PYTHON="${GPUPORTAL_ENVS_PYTHON:-/usr/bin/python3}"
PIP_VERSION=26.3

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
die() { echo "build.sh: $*" >&2; exit 1; }

base_version=$("$BASE_PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
[[ $base_version == 3.11 ]] || die "$BASE_PYTHON is Python $base_version; these envs need 3.11"

if (($#)); then names=("$@"); else
  names=()
  for file in "$HERE"/*.txt; do names+=("$(basename "$file" .txt)"); done
fi
for name in "${names[@]}"; do
  [[ -f "$HERE/$name.txt" ]] || die "no such env: $name (no $HERE/$name.txt)"
done

mkdir -p "$ENVS" "$KERNELS"
chmod 755 "$ENVS"
[[ $(dirname "$ENVS") == /opt/gpuportal ]] && chmod 755 /opt/gpuportal

kernel_write() {  # name env requirements: detect versions, write the manifest and the kernelspec
  # Frameworks log on import (TensorFlow's absl ignores TF_CPP_MIN_LOG_LEVEL that early): keep it out
  # of the summary, show it when something fails.
  if ! "$2/bin/python" "$HERE/manifest.py" --name "$1" --requirements "$3" --kernels-dir "$KERNELS" \
       >>"$2/.build.log" 2>&1; then
    tail -n 20 "$2/.build.log" >&2
    return 1
  fi
}

lock_write() {  # env: the build's package list, which each job's provenance records (portal.provenance)
  "$1/bin/pip" freeze --all --disable-pip-version-check >"$1/gpuportal-env.lock.part" \
    && chmod 644 "$1/gpuportal-env.lock.part" && mv "$1/gpuportal-env.lock.part" "$1/gpuportal-env.lock"
}

build() {  # name
  local name=$1 req="$HERE/$1.txt" env="$ENVS/$1"
  local stamp="$env/.gpuportal-stamp" hash
  hash=$(sha256sum <"$req" | cut -d' ' -f1)
  if [[ -f "$stamp" && $(head -n1 "$stamp") == "$hash" ]]; then
    # The kernelspec lives outside the env: put it back if someone removed it.
    [[ -f "$KERNELS/$name/kernel.json" ]] || kernel_write "$name" "$env" "$req"
    [[ -f "$env/gpuportal-env.lock" ]] || lock_write "$env"
    local size seconds
    { read -r _; read -r size; read -r seconds; } <"$stamp"
    printf '%-11s up to date  %6s  %s  (built in %ss)\n' "$name" "$size" "$env" "$seconds"
    return
  fi

  say "$name: building $env from $(basename "$req")"
  local start log
  start=$SECONDS
  # No half-built env behind a visible kernel: the kernelspec comes back only once all worked.
  rm -rf "$KERNELS/$name" "$env"
  "$BASE_PYTHON" -m venv "$env"
  log="$env/.build.log"
  if ! { "$env/bin/python" -m pip install --disable-pip-version-check "pip==$PIP_VERSION" \
         && "$env/bin/pip" install --disable-pip-version-check -r "$req"; } >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    die "$name: pip failed (whole log: $log)"
  fi
  kernel_write "$name" "$env" "$req" || die "$name: importing its frameworks failed"
  lock_write "$env" || die "$name: pip freeze failed"
  chmod -R a+rX "$env"
  local size seconds
  size=$(du -sh "$env" | cut -f1)
  seconds=$((SECONDS - start))
  # Last: a build that died before this line is redone by the next run.
  printf '%s\n%s\n%s\n' "$hash" "$size" "$seconds" >"$stamp"
  printf '%-11s built       %6s  %s  in %ss  %s\n' "$name" "$size" "$env" "$seconds" \
    "$("$env/bin/python" -c 'import json,sys; m=json.load(open(sys.argv[1])); print(m["display_name"], m["frameworks"])' "$env/gpuportal-env.json")"
}

for name in "${names[@]}"; do
  # One build per env at a time; different envs may build side by side.
  exec {lock}>"$ENVS/.$name.lock"
  flock "$lock"
  build "$name"
  exec {lock}>&-
done

# The notebooks' data: any env with scikit-learn can write it (a no-op when it is already there).
if [[ -z "${GPUPORTAL_ENVS_NO_DATA:-}" ]]; then
  for name in "${names[@]}"; do
    if [[ -x "$ENVS/$name/bin/python" ]] && grep -q '^scikit-learn' "$HERE/$name.txt"; then
      "$ENVS/$name/bin/python" "$HERE/mnist.py" --out "$DATA_DIR/mnist"
      break
    fi
  done
fi
