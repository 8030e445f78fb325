# shellcheck shell=bash
# Debian packages the bed needs: the manifest's `bed` group (scripts/packages.txt).
# shellcheck source=../../../scripts/packages.sh
source "$DEV_DIR/../../scripts/packages.sh"

packages_ensure() { apt_groups bed; }
