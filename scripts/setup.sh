#!/usr/bin/env bash
# Sets up what the tests use beyond the Rust toolchain: from Debian, chromium (the dashboard
# test loads the page in headless Chromium), prometheus (for `promtool check metrics` and
# `promtool check config`) and redis-server (the checkpoint-store and recovery tests, and the
# multi-process checkpoint store); from crates.io, tansu, the Kafka-protocol broker of the Kafka
# tests (scripts/kafka-broker.sh), with its in-memory storage (feature `dynostore`). Then starts
# Redis on 127.0.0.1:$CLASP_REDIS_PORT (default 6379) unless something already answers there.
# Idempotent: a tansu on PATH or in ~/.cargo/bin is kept (its first install compiles it, the
# longest step here); runs apt-get as root, or through sudo.
set -euo pipefail
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
redis_port="${CLASP_REDIS_PORT:-6379}"
packages=(chromium prometheus redis-server)
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
if command -v tansu >/dev/null; then
  echo "setup.sh: tansu already installed ($(tansu --version 2>/dev/null || echo "version unknown"))"
else
  echo "setup.sh: installing tansu $tansu_version from crates.io (compiles it: minutes)" >&2
  cargo install tansu --version "$tansu_version" --locked --features dynostore
fi
for tool in chromium promtool redis-server redis-cli tansu; do
  command -v "$tool" >/dev/null || { echo "setup.sh: \`$tool\` is not on PATH after installing" >&2; exit 1; }
done

if redis-cli -p "$redis_port" ping >/dev/null 2>&1; then
  echo "setup.sh: Redis already answers on 127.0.0.1:$redis_port"
else
  # No persistence: checkpoints in tests are scratch data.
  redis-server --daemonize yes --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no
  for _ in $(seq 50); do
    redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break
    sleep 0.1
  done
  redis-cli -p "$redis_port" ping >/dev/null || { echo "setup.sh: Redis did not answer on 127.0.0.1:$redis_port" >&2; exit 1; }
  echo "setup.sh: started Redis on 127.0.0.1:$redis_port"
fi
