#!/usr/bin/env bash
# Planning at scale: 1,048,576 ranks (8192 nodes x 128 ranks, 2 sockets x 4 NUMA x 16 cores,
# 32 nodes per leaf switch, 16 leaves per spine). Reports wall time and peak memory of
# planning and printing one rank's plan, and the largest encoded plan of any rank.
# Not part of the test suite; run: bash benchmarks/plan-scale.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
cargo build --release --locked -p topo-run >/dev/null 2>&1
bin=./target/release/topo-run
args=(plan --job examples/jobs/scale-1m.yaml --network-map examples/maps/scale-1m.conf)

if [ ! -x /usr/bin/time ]; then
    echo "plan-scale: /usr/bin/time is missing (apt-get install time)" >&2
    exit 1
fi
walls=()
for _ in $(seq "$runs"); do
    /usr/bin/time -f "%e %M" -o /tmp/topo-run-plan-scale.$$ \
        "$bin" "${args[@]}" --rank 0 --format json >/dev/null
    read -r wall rss < /tmp/topo-run-plan-scale.$$
    walls+=("$wall")
    echo "run: wall ${wall}s, peak RSS ${rss} KiB"
done
rm -f /tmp/topo-run-plan-scale.$$
median=$(printf '%s\n' "${walls[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
echo "median wall time over $runs runs: ${median}s"

longest=$("$bin" "${args[@]}" --format env | awk '{ n = length($0) - length("TOPO_RUN_PLAN=");
    if (n > max) max = n } END { print max }')
echo "largest encoded plan of any rank: ${longest} bytes (limit 4096)"
