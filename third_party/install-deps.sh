#!/usr/bin/env bash
# Installs the Debian packages named on the command line that are missing. Idempotent and quiet when all are
# there; runs `apt-get update` only when something is missing; not root: prints the exact command and fails.
set -euo pipefail
missing=()
for pkg in "$@"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0
cmd="apt-get install -y --no-install-recommends ${missing[*]}"
if [[ $(id -u) -ne 0 ]]; then
  echo "fxprof: missing Debian packages; run as root: apt-get update && $cmd" >&2
  exit 1
fi
echo "fxprof: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
$cmd -qq >/dev/null
