#!/usr/bin/env bash
# install_packages.sh [--optional] PACKAGE...: installs the Debian packages
# that are missing (as root, with apt-get). Not root, or apt-get failing:
# says which are missing (and how to install them, or apt-get's last words)
# and fails, or with --optional carries on (what needs them is then skipped,
# or does less, and says so).
set -euo pipefail
optional=0
if [ "${1:-}" = --optional ]; then
  optional=1
  shift
fi
missing=()
for p in "$@"; do
  # (no pipe into grep -q: under pipefail its early exit can fail dpkg-query;
  # a package of two architectures prints its status twice, unseparated)
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) || status=
  [[ $status == *"install ok installed"* ]] || missing+=("$p")
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
# apt-get's own words are kept and shown when it fails (its status ends the script).
log=$(mktemp /tmp/vgpu-apt.XXXXXX)
if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  tail -20 "$log" >&2
  echo "install_packages.sh: apt-get failed to install ${missing[*]} (log: $log)" >&2
  # Optional ones: what needs them is skipped, or does less, and says so.
  [ $optional = 1 ] && exit 0
  exit 1
fi
rm -f "$log"
