#!/usr/bin/env bash
# Installs the system packages the tests use beyond the Rust toolchain, from Debian:
# chromium (the dashboard test loads the page in headless Chromium) and prometheus (for
# `promtool check metrics` and `promtool check config`). Runs apt-get as root, or through sudo.
set -euo pipefail
packages=(chromium prometheus)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  as_root=()
  if ((EUID != 0)); then
    command -v sudo >/dev/null || { echo "setup.sh: installing ${missing[*]} needs root or sudo" >&2; exit 1; }
    as_root=(sudo)
  fi
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
for tool in chromium promtool; do
  command -v "$tool" >/dev/null || { echo "setup.sh: \`$tool\` is not on PATH after installing" >&2; exit 1; }
done
