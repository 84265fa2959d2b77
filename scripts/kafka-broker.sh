#!/usr/bin/env bash
# A Kafka-protocol broker for the Kafka tests: tansu (installed by scripts/setup.sh), keeping
# its records in memory, listening on loopback only.
#
#   scripts/kafka-broker.sh start [PORT]   starts it in the background (PORT: a free one), waits
#                                          until it answers Kafka requests, and prints
#                                          `export CLASP_KAFKA_BROKERS=127.0.0.1:PORT` for eval
#   scripts/kafka-broker.sh stop [PORT]    stops the broker started on PORT (default: every one
#                                          this script started)
#
# Its log and pid file are in ${CLASP_KAFKA_DIR:-/tmp/clasp-kafka}/PORT/.
set -euo pipefail
dir_root=${CLASP_KAFKA_DIR:-/tmp/clasp-kafka}
command=${1:-}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

stop_one() {
  local pidfile=$1/pid
  [[ -f $pidfile ]] || return 0
  local pid
  pid=$(<"$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$pidfile"
}

case $command in
  start)
    command -v tansu >/dev/null || { echo "kafka-broker.sh: \`tansu\` is not on PATH; run scripts/setup.sh" >&2; exit 1; }
    port=${2:-$(free_port)}
    dir=$dir_root/$port
    mkdir -p "$dir"
    stop_one "$dir"
    url=tcp://127.0.0.1:$port
    tansu broker --listener-url "$url" --advertised-listener-url "$url" \
      --storage-engine memory://tansu/ >"$dir/log" 2>&1 </dev/null &
    echo $! >"$dir/pid"
    # Ready once a Kafka request is answered: listing the topics goes through the protocol.
    for _ in $(seq 300); do
      if ! kill -0 "$(<"$dir/pid")" 2>/dev/null; then
        echo "kafka-broker.sh: tansu exited; its log ($dir/log):" >&2
        cat "$dir/log" >&2
        exit 1
      fi
      if tansu topic list --broker "$url" >/dev/null 2>&1; then
        echo "export CLASP_KAFKA_BROKERS=127.0.0.1:$port"
        exit 0
      fi
      sleep 0.1
    done
    echo "kafka-broker.sh: tansu did not answer on 127.0.0.1:$port within 30 s; its log ($dir/log):" >&2
    cat "$dir/log" >&2
    stop_one "$dir"
    exit 1
    ;;
  stop)
    if [[ -n ${2:-} ]]; then
      stop_one "$dir_root/$2"
    else
      for d in "$dir_root"/*/; do [[ -d $d ]] && stop_one "${d%/}"; done
    fi
    ;;
  *)
    echo "usage: scripts/kafka-broker.sh start [PORT] | stop [PORT]" >&2
    exit 2
    ;;
esac
