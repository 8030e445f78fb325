# shellcheck shell=bash
# The package manifest (scripts/packages.txt) and the one apt step every install script uses.
# Sourced, never executed.

PACKAGES_FILE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/packages.txt"

# manifest KIND GROUP...: the names of KIND (debian, pypi, npm, site) in those groups, one a line.
manifest() {
  local kind=$1; shift
  awk -v kind="$kind" -v groups=" $* " '$1 == kind && index(groups, " " $2 " ") { print $3 }' "$PACKAGES_FILE"
}

# apt_groups GROUP...: installs the manifest's Debian packages of those groups that are missing; apt
# runs only then, so a warm run never touches it.
apt_groups() {
  local missing=() pkg
  for pkg in $(manifest debian "$@" | sort -u); do
    [[ $(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null) == installed ]] || missing+=("$pkg")
  done
  ((${#missing[@]})) || return 0
  printf '\033[1m==> apt: installing %s\033[0m\n' "${missing[*]}"
  # Without a policy-rc.d that says "no", the maintainer scripts would start every daemon with
  # Debian's defaults (default ports, default datadirs).
  if [[ ! -x /usr/sbin/policy-rc.d ]] || ! grep -q 'exit 101' /usr/sbin/policy-rc.d; then
    printf '#!/bin/sh\n# gpuportal dev bed: never let apt start daemons.\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
  fi
  # No default slapd database: the bed runs slapd with its own slapd.conf.
  echo 'slapd slapd/no_configuration boolean true' | debconf-set-selections
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  for pkg in "${missing[@]}"; do
    [[ $(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null) == installed ]] \
      || { echo "error: $pkg still missing after apt-get" >&2; return 1; }
  done
}
