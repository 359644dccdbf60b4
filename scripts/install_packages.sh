#!/usr/bin/env bash
# install_packages.sh [--optional] PACKAGE...: installs the Debian packages
# that are missing (as root, with apt-get). Not root: says which are missing
# and the command that installs them, and fails, or with --optional carries
# on (what needs them is then skipped and says so).
set -euo pipefail
optional=0
if [ "${1:-}" = --optional ]; then
  optional=1
  shift
fi
missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "install_packages.sh: missing packages: ${missing[*]}" >&2
  echo "install_packages.sh: install them as root:  sudo apt-get install -y ${missing[*]}" >&2
  [ $optional = 1 ] && exit 0
  exit 1
fi
echo "install_packages.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
