#!/usr/bin/env bash
# Installs the Firefox Profiler's command-line client (its own import and symbolication code) for the tests,
# from the npm registry, into tests/.profiler-cli. Idempotent.
set -euo pipefail
dir="$1"
version=0.10.0
bin="$dir/node_modules/.bin/profiler-cli"
[[ -x "$bin" ]] && grep -q "\"version\": \"$version\"" "$dir/node_modules/@firefox-devtools/profiler-cli/package.json" 2>/dev/null && exit 0
command -v npm >/dev/null || "$(dirname "$0")/install-deps.sh" npm
mkdir -p "$dir"
npm install --silent --no-audit --no-fund --prefix "$dir" "@firefox-devtools/profiler-cli@$version" >/dev/null
