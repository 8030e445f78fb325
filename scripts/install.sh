#!/usr/bin/env bash
# Installs the portal's Python environment (and, with --dev, what the tests need: Chromium).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

dev=0
[[ "${1:-}" == "--dev" ]] && dev=1

# Debian packages from the manifest (scripts/packages.txt): the portal's, what job templates run on
# the compute nodes (this host), and with --dev what the tests need.
# shellcheck source=packages.sh
source "$ROOT/scripts/packages.sh"
apt_groups portal compute
command -v npm >/dev/null || apt_groups npm  # NodeSource's nodejs brings its own npm
((dev)) && apt_groups dev

mkdir -p "$GPUPORTAL_STATE"
chmod 755 "$GPUPORTAL_STATE"

# The hub's account and users' servers read the checkout (the hub config, the spawner, the servers'
# settings): a clone made in a private folder (`mktemp -d` is 0700) is opened to them. The code is
# no secret; the secrets live in the state directory, in 0600 files.
chmod o+rx "$ROOT"
runuser -u nobody -- test -r "$ROOT/spawners/jupyterhub_config.py" \
  || die "the service accounts cannot read $ROOT: every folder above it must be traversable (o+x)"

# system_account NAME HOME: an unprivileged system account (no login shell, locked password) with
# a group of its own. A regular group of that name would share the account's files with its
# members, so that is refused (the local cluster renames its old `gpuportal` users' group).
system_account() {
  local name=$1 home=$2 gid
  if ! getent passwd "$name" >/dev/null; then
    say "creating system account $name"
    if gid=$(getent group "$name" | cut -d: -f3) && [[ -n $gid ]]; then
      ((gid < 1000)) || die "group $name (gid $gid) is a regular group; rename it before the account $name is made"
      useradd --system --gid "$name" --home-dir "$home" --no-create-home --shell /usr/sbin/nologin \
        --comment "gpuportal service" "$name"
    else
      useradd --system --user-group --home-dir "$home" --no-create-home --shell /usr/sbin/nologin \
        --comment "gpuportal service" "$name"
    fi
  fi
  (($(id -u "$name") < 1000)) || die "account $name exists but is not a system account (uid $(id -u "$name"))"
  [[ $(getent passwd "$name" | cut -d: -f7) == /usr/sbin/nologin ]] || usermod --shell /usr/sbin/nologin "$name"
}
system_account "$PORTAL_USER" "$PORTAL_HOME"
system_account "$HUB_USER" "$GPUPORTAL_STATE/hub"
system_account "$APPS_USER" "$APPS_HOME"

# The job-files and sbatch-batch helpers (root-owned, run as the user through sudo) and the sudoers
# fragment; a fragment is checked with visudo before it replaces the installed one, so a bad edit
# never leaves sudo broken.
install -d -o root -g root -m 0755 "$(dirname "$JOB_FILES")"
if ! cmp -s "$ROOT/deploy/libexec/job-files" "$JOB_FILES"; then
  say "installing $JOB_FILES"
  install -o root -g root -m 0755 "$ROOT/deploy/libexec/job-files" "$JOB_FILES"
fi
# sbatch-batch: several jobs of one user under one sudo (a batch's submissions), run as the user.
if ! cmp -s "$ROOT/deploy/libexec/sbatch-batch" "$SBATCH_BATCH"; then
  say "installing $SBATCH_BATCH"
  install -o root -g root -m 0755 "$ROOT/deploy/libexec/sbatch-batch" "$SBATCH_BATCH"
fi
# user-files: the Files page (#37), run as the user. Its data and scratch roots come from a root-owned
# file, never from the caller (who could otherwise name any folder as a root): written here from the
# portal's own settings.
if ! cmp -s "$ROOT/deploy/libexec/user-files" "$USER_FILES"; then
  say "installing $USER_FILES"
  install -o root -g root -m 0755 "$ROOT/deploy/libexec/user-files" "$USER_FILES"
fi
install -d -o root -g root -m 0755 "$(dirname "$USER_FILES_CONF")"
# Projects' shared folders (the Files root project:<name>): <projects>/<name>, each made by an admin,
# owned by root and the project's Unix group, mode 2770 (docs/admin/files.md). Only the folder that
# holds them is made here, with --dev (the bed's); empty: no project roots.
projects_dir=${GPUPORTAL_PROJECTS_DIR-/srv/projects}
if ((dev)) && [[ -n $projects_dir && ! -d $projects_dir ]]; then
  install -d -o root -g root -m 0755 "$projects_dir"
fi
user_files_conf="$(printf 'data=%s\nscratch=%s\nprojects=%s\n' "$DATA_DIR" "${GPUPORTAL_SCRATCH_DIR:-}" "$projects_dir")"
if [[ ! -f $USER_FILES_CONF || $(cat "$USER_FILES_CONF") != "$user_files_conf" ]]; then
  say "writing $USER_FILES_CONF"
  printf '%s\n' "$user_files_conf" | install -o root -g root -m 0644 /dev/stdin "$USER_FILES_CONF"
fi
# With --dev: the bed's cluster files (scripts/bed-clusters.sh; scripts/up.sh writes them too).
((dev)) && "$ROOT/scripts/bed-clusters.sh"
# sudoers_install NAME DESTINATION: deploy/sudoers.d/NAME as DESTINATION, root, 0440, once visudo
# accepts it.
sudoers_install() {
  local source="$ROOT/deploy/sudoers.d/$1" destination=$2 staged
  if cmp -s "$source" "$destination" && [[ $(stat -c %a:%U:%G "$destination") == 440:root:root ]]; then
    return
  fi
  say "installing $destination"
  staged=$(mktemp /etc/sudoers.d/.gpuportal.XXXXXX)  # a dot file: sudo's includedir skips it
  install -o root -g root -m 0440 "$source" "$staged"
  visudo -cqf "$staged" || { rm -f "$staged"; die "visudo rejected deploy/sudoers.d/$1"; }
  mv -f "$staged" "$destination"
}
# user-shell (#37, run as the user through sudo: the browser's Shell) and its page's scripts
# (xterm.js), which it serves from this fixed folder.
USER_SHELL=/usr/local/libexec/gpuportal/user-shell SHELL_ASSETS=/usr/local/share/gpuportal/shell
if ! cmp -s "$ROOT/deploy/libexec/user-shell" "$USER_SHELL"; then
  say "installing $USER_SHELL"
  install -o root -g root -m 0755 "$ROOT/deploy/libexec/user-shell" "$USER_SHELL"
fi
install -d -o root -g root -m 0755 "$SHELL_ASSETS"
install -o root -g root -m 0644 "$ROOT"/deploy/share/shell/*.{js,css} "$SHELL_ASSETS/"
sudoers_install gpuportal "$SUDOERS_FILE"
# slurm-token and its root rule: the portal's short-lived slurmrestd tokens, `scontrol token` run as
# root (see the helper's header). Only where the slurmrestd adapter is configured (--dev: the tests
# run both adapters); anywhere else a root rule nothing uses is removed.
if [[ ${SLURM_ADAPTER:-} == slurmrestd ]] || ((dev)); then
  if ! cmp -s "$ROOT/deploy/libexec/slurm-token" "$SLURM_TOKEN"; then
    say "installing $SLURM_TOKEN"
    install -o root -g root -m 0755 "$ROOT/deploy/libexec/slurm-token" "$SLURM_TOKEN"
  fi
  sudoers_install gpuportal-slurmrestd "$SUDOERS_TOKEN_FILE"
elif [[ -e $SUDOERS_TOKEN_FILE || -e $SLURM_TOKEN ]]; then
  say "removing $SLURM_TOKEN and $SUDOERS_TOKEN_FILE (SLURM_ADAPTER is not slurmrestd)"
  rm -f "$SUDOERS_TOKEN_FILE" "$SLURM_TOKEN"  # the rule first: it never names a missing helper
fi
if [[ ! -x "$VENV/bin/python" ]]; then
  say "creating venv $VENV"
  /usr/bin/python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
fi
# Reinstall only when pyproject.toml or the checkout (editable install) changed.
extras=""; ((dev)) && extras="[dev]"
# One stamp holding the last install's key: another checkout installing into the same venv (a CI
# clone) changes the key, so coming back to this checkout reinstalls it.
# An install with the dev extras also serves a plain one.
key="$( (cat "$ROOT/pyproject.toml"; echo "$ROOT") | sha1sum | cut -c1-12)"
installed="$(cat "$VENV/.installed" 2>/dev/null || true)"
if [[ "$installed" != "$key$extras" && "$installed" != "$key[dev]" ]]; then
  say "pip: installing gpuportal$extras"
  # Quiet unless it fails: setuptools' build chatter is no news.
  "$VENV/bin/pip" install -q --disable-pip-version-check -e "$ROOT$extras" >"$VENV/pip.log" 2>&1 \
    || { cat "$VENV/pip.log" >&2; exit 1; }
  rm -f "$VENV"/.installed-*
  echo "$key$extras" >"$VENV/.installed"
fi
# The command-line client on every user's PATH (login shells, notebooks' terminals, jobs): a link to
# the venv's entry point, which every user may read (docs/deploy.md "The CLI on users' PATH").
if [[ $(readlink /usr/local/bin/gpuportal 2>/dev/null) != "$VENV/bin/gpuportal" ]]; then
  say "linking /usr/local/bin/gpuportal -> $VENV/bin/gpuportal"
  ln -sfn "$VENV/bin/gpuportal" /usr/local/bin/gpuportal
fi

# npm packages exactly as locked: every lock file the manifest names (the hub's proxy, the charts).
for lockfile in $(manifest npm portal); do
  dir="$ROOT/$(dirname "$lockfile")"
  stamp="$dir/node_modules/.installed-$(sha1sum <"$ROOT/$lockfile" | cut -c1-12)"
  if [[ ! -e "$stamp" ]]; then
    say "npm: installing $(dirname "$lockfile")"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
    touch "$stamp"
  fi
done
# code-server (VS Code in the browser) for the VS Code app and JupyterLab's VS Code tile, outside the
# clone in /opt/gpuportal/code-server; skipped when that version is there (about 45 s the first time).
"$ROOT/scripts/code-server.sh"
# With --dev: the real MLflow client (mlflow-skinny) and MLflow's own server (mlflow), pinned, each in
# its own venv outside the clone, for tests/tracking; skipped when that version is there.
((dev)) && "$ROOT/scripts/mlflow-client.sh"
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
# Framework environments (PyTorch, TensorFlow, JAX) as kernels for every user, built outside the
# clone and only when their requirements change, and the digits in MNIST format under /data/mnist.
"$ROOT/scripts/envs/build.sh"
