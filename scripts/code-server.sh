#!/usr/bin/env bash
# Installs code-server (VS Code in the browser) from npm into /opt/gpuportal/code-server, for the
# VS Code web app and JupyterLab's VS Code tile; does nothing when that version is already there.
# The newest code-server wants Node 24; 4.100.x is the last line that declares Node 20 (this host's).
# Its own postinstall downloads ripgrep from GitHub, which a cluster without a route out cannot do,
# so its steps are done here by hand with Debian's `rg` copied in (packages: ripgrep, libkrb5-dev for
# the kerberos module, from the compute group of scripts/packages.txt). Run as root by install.sh.
# The program for users: /opt/gpuportal/code-server/bin/code-server (readable by every user).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

VERSION="${CODE_SERVER_VERSION:-4.100.3}"
PREFIX="${CODE_SERVER_PREFIX:-/opt/gpuportal/code-server}"
stamp="$PREFIX/.installed-$VERSION"
[[ -e $stamp && -x $PREFIX/bin/code-server ]] && exit 0

say "npm: installing code-server $VERSION into $PREFIX"
started=$SECONDS
# Built in a staging folder beside the target, then swapped in: a failed build leaves the old one.
staging="$PREFIX.new"
rm -rf "$staging"
mkdir -p "$staging"
export npm_config_unsafe_perm=true npm_config_yes=true npm_config_audit=false npm_config_fund=false \
  npm_config_loglevel=error npm_config_update_notifier=false
(
  cd "$staging"
  # 1. the package and its dependencies, without their install scripts
  npm install --ignore-scripts "code-server@$VERSION" >/dev/null
  # 2. VS Code's own dependencies
  cd node_modules/code-server/lib/vscode
  npm install --omit=dev --ignore-scripts >/dev/null
  # 3. Debian's ripgrep where @vscode/ripgrep's postinstall would download one (it skips when bin/ exists)
  mkdir -p node_modules/@vscode/ripgrep/bin
  cp /usr/bin/rg node_modules/@vscode/ripgrep/bin/rg
  # 4. the native modules (node-pty's install runs `npx node-gyp`: npm_config_yes answers it)
  npm rebuild >/dev/null
  # 5. what code-server's postinstall.sh does after its install: the asar folder, the helper scripts
  ln -sfn node_modules node_modules.asar
  ln -sfn code-linux.sh bin/remote-cli/code-server
  ln -sfn browser-linux.sh bin/helpers/browser.sh
  # 6. the built-in extensions' dependencies
  cd extensions
  npm install --omit=dev --ignore-scripts >/dev/null
  # 7. code-server's password hashing (argon2 is hoisted to the top node_modules)
  cd "$staging"
  npm rebuild argon2 >/dev/null
)
mkdir -p "$staging/bin"
cat >"$staging/bin/code-server" <<EOF
#!/bin/sh
# code-server $VERSION, installed by scripts/code-server.sh
exec node "$PREFIX/node_modules/code-server/out/node/entry.js" "\$@"
EOF
chmod 755 "$staging/bin/code-server"
chmod -R a+rX "$staging"
touch "$staging/.installed-$VERSION"
rm -rf "$PREFIX.old"
[[ -e $PREFIX ]] && mv "$PREFIX" "$PREFIX.old"
mv "$staging" "$PREFIX"
rm -rf "$PREFIX.old"
seconds=$((SECONDS - started))
say "code-server $VERSION installed in $seconds s"
