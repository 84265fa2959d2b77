#!/usr/bin/env bash
# Installs the tools the tests use beyond the Rust toolchain: from Debian, chromium (the
# dashboard test loads the page in headless Chromium) and prometheus (for `promtool check
# metrics` and `promtool check config`), running apt-get as root or through sudo; from
# crates.io, tansu, the Kafka-protocol broker of the Kafka tests (scripts/kafka-broker.sh),
# with its in-memory storage (feature `dynostore`). An installed tansu of that version is kept:
# its first install compiles it, the longest step here.
set -euo pipefail
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
packages=(chromium prometheus)
tansu_version=0.6.0
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
if ! tansu --version 2>/dev/null | grep -qF "$tansu_version"; then
  echo "setup.sh: installing tansu $tansu_version from crates.io (compiles it: minutes)" >&2
  cargo install tansu --version "$tansu_version" --locked --features dynostore
fi
for tool in chromium promtool tansu; do
  command -v "$tool" >/dev/null || { echo "setup.sh: \`$tool\` is not on PATH after installing" >&2; exit 1; }
done
