#!/usr/bin/env bash
# Sets up what the tests and the multi-process checkpoint store need beyond Rust:
# a Redis server (Debian's redis-server) listening on 127.0.0.1:6379.
# Idempotent: installs only what is missing, starts Redis only if nothing answers there.
set -euo pipefail

redis_port="${CLASP_REDIS_PORT:-6379}"

if ! command -v redis-server >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
        sudo_cmd=""
        [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
        $sudo_cmd apt-get update -qq
        $sudo_cmd apt-get install -y -qq redis-server
    else
        echo "setup: redis-server is missing and apt-get is not available; install Redis 6 or later" >&2
        exit 1
    fi
fi

if redis-cli -p "$redis_port" ping >/dev/null 2>&1; then
    echo "setup: Redis already answers on 127.0.0.1:$redis_port"
else
    # No persistence: checkpoints in tests are scratch data.
    redis-server --daemonize yes --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no
    for _ in $(seq 50); do
        redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break
        sleep 0.1
    done
    redis-cli -p "$redis_port" ping >/dev/null
    echo "setup: started Redis on 127.0.0.1:$redis_port"
fi
