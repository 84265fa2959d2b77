#!/usr/bin/env bash
# Writes a pipeline of N no-op operators (default 20): a head of two, four branches, a tail
# of two. Usage: scripts/wide-pipeline.sh [N] > wide.toml
set -euo pipefail
n=${1:-20}
if (( n < 8 || (n - 4) % 4 != 0 )); then echo "N must be 8, 12, 16, 20, ..." >&2; exit 2; fi
per=$(( (n - 4) / 4 ))
printf '[pipeline]\nname = "wide"\ndescription = "no-op operators in four branches"\n\n[[source]]\nname = "input"\n\n[[sink]]\nname = "out"\n'
op() { printf '\n[[operator]]\nname = "%s"\nkind = "map"\nfunction = "syn.noop"\n' "$1"; }
stream() { printf '\n[[stream]]\nfrom = "%s"\nto = "%s"\n' "$1" "$2"; }
op head1; op head2
for b in 1 2 3 4; do for i in $(seq 1 "$per"); do op "b${b}s${i}"; done; done
op tail1; op tail2
stream input head1; stream head1 head2
for b in 1 2 3 4; do
  stream head2 "b${b}s1"
  for i in $(seq 1 $((per - 1))); do stream "b${b}s${i}" "b${b}s$((i + 1))"; done
  stream "b${b}s${per}" tail1
done
stream tail1 tail2; stream tail2 out
