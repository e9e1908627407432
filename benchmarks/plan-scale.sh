#!/usr/bin/env bash
# Planning at scale: 1,048,576 ranks (8192 nodes x 128 ranks, 2 sockets x 4 NUMA x 16 cores,
# 32 nodes per leaf switch, 16 leaves per spine), described compactly (`layout:`) and
# written out rank by rank in JSON (68 MB, generated here). Reports wall time and peak
# memory of planning and printing one rank's plan, and the largest encoded plan of any rank
# against the kernel's 128 KiB limit for one environment string.
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
# measure NAME ARGS...: RUNS timed runs of `topo-run ARGS`, then the median.
measure() {
    local name=$1; shift
    local walls=()
    for _ in $(seq "$runs"); do
        /usr/bin/time -f "%e %M" -o /tmp/topo-run-plan-scale.$$ \
            "$bin" "$@" --rank 0 --format json >/dev/null
        read -r wall rss < /tmp/topo-run-plan-scale.$$
        walls+=("$wall")
        echo "$name: wall ${wall}s, peak RSS ${rss} KiB"
    done
    rm -f /tmp/topo-run-plan-scale.$$
    median=$(printf '%s\n' "${walls[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    echo "$name: median wall time over $runs runs: ${median}s"
}

measure "layout" "${args[@]}"

# The same job, every rank written out in JSON.
json=${TMPDIR:-/tmp}/topo-run-scale-1m.json
if [ ! -s "$json" ]; then
    python3 - "$json" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write('{"ranks":[')
    for n in range(8192):
        for c in range(128):
            s, nm = c // 64, (c // 64) * 4 + (c % 64) // 16
            sep = "," if n or c else ""
            f.write(f'{sep}{{"node":"node{n + 1:04d}","locality":"SK{s}:L3{s}:L2{c}:L1{c}:CR{c}:HT{c}:NM{nm}"}}')
    f.write("]}")
PY
fi
echo "explicit JSON job: $(stat -c %s "$json") bytes"
measure "explicit JSON" plan --job "$json" --network-map examples/maps/scale-1m.conf

for job in examples/jobs/scale-1m.yaml examples/jobs/paper.yaml; do
    map=examples/maps/scale-1m.conf
    [[ $job == *paper* ]] && map=examples/maps/paper.yaml
    longest=$("$bin" plan --job "$job" --network-map "$map" --format env | awk '{ n = length($0) + 1;
        if (n > max) max = n } END { print max }')
    echo "$job: largest TOPO_RUN_PLAN of any rank: ${longest} bytes (kernel limit 131072)"
done
