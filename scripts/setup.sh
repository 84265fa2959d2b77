#!/usr/bin/env bash
# Installs the system packages the tests use beyond the Rust toolchain, from Debian:
# chromium (the dashboard test loads the page in headless Chromium) and prometheus (for
# `promtool check metrics` and `promtool check config`). Run as root (or with sudo).
set -euo pipefail
packages=(chromium prometheus)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
command -v chromium >/dev/null && command -v promtool >/dev/null
