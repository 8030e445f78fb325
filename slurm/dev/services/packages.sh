# shellcheck shell=bash
# Debian packages the bed needs. apt runs only when something is missing, so a
# warm `up.sh` never touches apt.

PACKAGES=(
  munge
  slurmctld slurmd slurmdbd slurm-client
  mariadb-server mariadb-client
  slapd ldap-utils
  redis-server redis-tools
  postgresql-15 postgresql-client-15
  gettext-base # envsubst, for conf/*.in
)

packages_missing() {
  # One dpkg-query for all (it exits 1 when some package is unknown: fine).
  local installed
  installed=$(dpkg-query -W -f='${Package} ${db:Status-Status}\n' "${PACKAGES[@]}" 2>/dev/null |
    awk '$2 == "installed" { print $1 }' || true)
  printf '%s\n' "${PACKAGES[@]}" | grep -vxF -f <(echo "$installed") || true
}

packages_ensure() {
  local missing
  mapfile -t missing < <(packages_missing)
  ((${#missing[@]})) || return 0
  log "installing: ${missing[*]}"
  # Without a policy-rc.d that says "no", the maintainer scripts would start
  # every daemon with Debian's defaults (default ports, default datadirs).
  if [[ ! -x /usr/sbin/policy-rc.d ]] || ! grep -q 'exit 101' /usr/sbin/policy-rc.d; then
    printf '#!/bin/sh\n# gpuportal dev bed: never let apt start daemons.\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
  fi
  # No default slapd database: we run slapd with our own slapd.conf.
  echo 'slapd slapd/no_configuration boolean true' | debconf-set-selections
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
  [[ -z $(packages_missing) ]] || die "packages still missing after apt-get: $(packages_missing | xargs)"
}
