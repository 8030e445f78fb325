# shellcheck shell=bash
# OpenLDAP slapd with its own slapd.conf (no cn=config), seeded once with the
# demo users and groups; plus matching local Unix accounts so Slurm jobs can run as them.

LDAP_DIR=$STATE/ldap
LDAP_URI=ldap://127.0.0.1:$LDAP_PORT
LDAP_PIDFILE=$LDAP_DIR/slapd.pid
# Primary group of the demo users (gidNumber in LDAP). Not `gpuportal`: that name belongs to the
# portal's service account and its own group (scripts/install.sh), which no user may share.
UNIX_GROUP=cluster-users
UNIX_GID=10000
# Whom the portal and the hub may act as (deploy/sudoers.d/gpuportal): the Unix side of LDAP's
# portal-users (alice, bob, ada), never eve, never root.
PORTAL_UNIX_GROUP=gpuportal-users
PORTAL_UNIX_GID=10100

LDAP_GROUPS=(portal-users portal-admins)
# The demo projects' groups (portal.projects; scripts/up.sh maps them to Slurm accounts with budgets).
# Added to a directory seeded before they existed too (ldap_up).
LDAP_PROJECT_GROUPS=(vision nlp)
# Their Unix side (gids from here on) and shared folders, the Files roots project:<name> (#37), in the
# folder scripts/install.sh names in /etc/gpuportal/user-files.conf (the same default).
PROJECT_UNIX_GID=10200
PROJECTS_DIR=${GPUPORTAL_PROJECTS_DIR-/srv/projects}

ldap_admin() { "$@" -x -H "$LDAP_URI" -D "$LDAP_ROOTDN" -w "$LDAP_ROOTPW"; }
ldap_ping() { ldapsearch -x -H "$LDAP_URI" -b '' -s base namingContexts >/dev/null; }

ldap_seed_ldif() {
  local line uid num given sn pw groups g
  printf 'dn: %s\nobjectClass: dcObject\nobjectClass: organization\ndc: gpuportal\no: gpuportal\n\n' "$LDAP_SUFFIX"
  printf 'dn: ou=people,%s\nobjectClass: organizationalUnit\nou: people\n\n' "$LDAP_SUFFIX"
  printf 'dn: ou=groups,%s\nobjectClass: organizationalUnit\nou: groups\n\n' "$LDAP_SUFFIX"
  for line in "${DEMO_USERS[@]}"; do
    read -r uid num given sn pw groups <<<"$line"
    cat <<LDIF
dn: uid=$uid,ou=people,$LDAP_SUFFIX
objectClass: inetOrgPerson
objectClass: posixAccount
objectClass: shadowAccount
uid: $uid
cn: $given $sn
givenName: $given
sn: $sn
mail: $uid@gpuportal.test
uidNumber: $num
gidNumber: $UNIX_GID
homeDirectory: /home/$uid
loginShell: /bin/bash
userPassword: $(slappasswd -h '{SSHA}' -s "$pw")

LDIF
  done
  # Groups after users, so the memberof overlay sets memberOf on each user.
  for g in "${LDAP_GROUPS[@]}"; do ldap_group_ldif "$g"; done
}

ldap_group_ldif() {
  local g=$1 line uid num given sn pw groups
  printf 'dn: cn=%s,ou=groups,%s\nobjectClass: groupOfNames\ncn: %s\n' "$g" "$LDAP_SUFFIX" "$g"
  for line in "${DEMO_USERS[@]}"; do
    read -r uid num given sn pw groups <<<"$line"
    if [[ ,$groups, == *,$g,* ]]; then printf 'member: uid=%s,ou=people,%s\n' "$uid" "$LDAP_SUFFIX"; fi
  done
  echo
}

ldap_up() {
  local rc=0
  mkdir -p "$LDAP_DIR/data"
  chmod 700 "$LDAP_DIR" # holds the hashed root password
  # Hash the root password once, so the rendered slapd.conf stays byte-identical
  # between runs (SSHA uses a random salt) and slapd is not restarted needlessly.
  [[ -s $LDAP_DIR/rootpw.hash ]] || slappasswd -h '{SSHA}' -s "$LDAP_ROOTPW" >"$LDAP_DIR/rootpw.hash"
  LDAP_ROOTPW_HASH=$(cat "$LDAP_DIR/rootpw.hash")
  export LDAP_ROOTPW_HASH
  RENDER_CHANGED=0
  render "$DEV_DIR/conf/slapd.conf.in" "$LDAP_DIR/slapd.conf" 600
  if ((RENDER_CHANGED)) && running "$LDAP_PIDFILE" slapd; then
    log "ldap: config changed, restarting slapd"
    ldap_down
  fi
  if ! running "$LDAP_PIDFILE" slapd; then
    log "ldap: starting slapd on $LDAP_URI"
    slaptest -Q -u -f "$LDAP_DIR/slapd.conf" || die "slaptest rejected $LDAP_DIR/slapd.conf"
    # -d keeps slapd in the foreground (it then logs to stderr): detach it ourselves.
    setsid -f slapd -d stats -h "$LDAP_URI/" -f "$LDAP_DIR/slapd.conf" </dev/null >>"$LOG/slapd.log" 2>&1
  fi
  wait_for "slapd on $LDAP_URI" 30 ldap_ping

  # The last entry of the seed is cn=portal-admins: if it exists, all of it does.
  if ! ldap_admin ldapsearch -b "cn=portal-admins,ou=groups,$LDAP_SUFFIX" -s base dn >/dev/null 2>&1; then
    log "ldap: seeding $LDAP_SUFFIX"
    # -c: continue past entries that already exist (68) after a partial seed.
    ldap_seed_ldif | ldap_admin ldapadd -c >>"$LOG/ldap-seed.log" 2>&1 || rc=$?
    [[ $rc == 0 || $rc == 68 ]] || die "ldapadd failed (rc $rc), see $LOG/ldap-seed.log"
  fi
  ldap_project_groups
}

ldap_project_groups() {
  local g
  for g in "${LDAP_PROJECT_GROUPS[@]}"; do
    ldap_admin ldapsearch -b "cn=$g,ou=groups,$LDAP_SUFFIX" -s base dn >/dev/null 2>&1 && continue
    log "ldap: adding project group $g"
    ldap_group_ldif "$g" | ldap_admin ldapadd >>"$LOG/ldap-seed.log" 2>&1 || die "ldapadd of group $g failed"
  done
}

ldap_down() {
  stop_pidfile slapd "$LDAP_PIDFILE" slapd
}

# Local accounts with the LDAP uid numbers: slurmd runs jobs as real Unix users.
unix_users_up() {
  local line uid num groups members=() have
  # Beds made before the portal had its own account called this group `gpuportal`.
  if [[ $(getent group gpuportal | cut -d: -f3) == "$UNIX_GID" ]] && ! getent group "$UNIX_GROUP" >/dev/null; then
    log "renaming Unix group gpuportal ($UNIX_GID) to $UNIX_GROUP"
    groupmod -n "$UNIX_GROUP" gpuportal
  fi
  if ! getent group "$UNIX_GROUP" >/dev/null; then
    groupadd -g "$UNIX_GID" "$UNIX_GROUP"
  fi
  [[ $(getent group "$UNIX_GROUP" | cut -d: -f3) == "$UNIX_GID" ]] ||
    die "Unix group $UNIX_GROUP exists with a gid other than $UNIX_GID"
  for line in "${DEMO_USERS[@]}"; do
    read -r uid num _ _ _ groups <<<"$line"
    if ! getent passwd "$uid" >/dev/null; then
      log "creating Unix user $uid ($num)"
      useradd -u "$num" -g "$UNIX_GID" -d "/home/$uid" -m -s /bin/bash "$uid"
    fi
    [[ $(id -u "$uid") == "$num" ]] || die "Unix user $uid exists with a uid other than $num"
    mkdir_owned "/home/$uid" "$uid:$UNIX_GROUP" 755
    if [[ ,$groups, == *,portal-users,* ]]; then members+=("$uid"); fi
  done
  if ! getent group "$PORTAL_UNIX_GROUP" >/dev/null; then
    groupadd -g "$PORTAL_UNIX_GID" "$PORTAL_UNIX_GROUP"
  fi
  # Exactly the portal users: anybody else added by hand (eve) is taken out again.
  have=$(getent group "$PORTAL_UNIX_GROUP" | cut -d: -f4)
  if [[ $have != "$(IFS=,; echo "${members[*]}")" ]]; then
    log "Unix group $PORTAL_UNIX_GROUP: ${members[*]}"
    gpasswd -M "$(IFS=,; echo "${members[*]}")" "$PORTAL_UNIX_GROUP" >/dev/null
  fi
  unix_project_groups_up
}

# Each demo project: a Unix group of its LDAP group's demo members (bob), and its shared folder,
# root's and the group's, setgid, for members only.
unix_project_groups_up() {
  local g line uid groups members gid=$PROJECT_UNIX_GID
  for g in "${LDAP_PROJECT_GROUPS[@]}"; do
    members=()
    for line in "${DEMO_USERS[@]}"; do
      read -r uid _ _ _ _ groups <<<"$line"
      if [[ ,$groups, == *,$g,* ]]; then members+=("$uid"); fi
    done
    getent group "$g" >/dev/null || groupadd -g "$gid" "$g"
    gid=$((gid + 1))
    if [[ $(getent group "$g" | cut -d: -f4) != "$(IFS=,; echo "${members[*]}")" ]]; then
      log "Unix group $g: ${members[*]}"
      gpasswd -M "$(IFS=,; echo "${members[*]}")" "$g" >/dev/null
    fi
    if [[ -n $PROJECTS_DIR ]]; then install -d -o root -g "$g" -m 2770 "$PROJECTS_DIR/$g"; fi
  done
}
