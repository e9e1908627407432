#!/usr/bin/env python3
"""Checks a profile of examples/c/profile-known.c (tests/e2e/preload.sh):

    profile_check.py FILE RANKS NODES topo|native

Every (call, communicator kind) the program makes is in the file with its calls summed
over the ranks, its size class, the share on topo-run's path (all but the user-defined
operation's and MPI_COMM_SELF's under topo-run, none with --native) and a time; nothing
else is. Prints one
line, and exits 1 with the differences if there are any."""
import json
import sys

path, ranks, nodes, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
p = json.load(open(path))
native = mode == "native"
user_op = "user-defined or MINLOC/MAXLOC operation"
native_why = "MPI's own asked for (--native)"
half = ranks // 2
# (call, comm) -> (calls per rank, {min_bytes: calls per rank}, calls per rank handed and why)
want = {
    ("MPI_Allreduce", "world"): (103, {8: 103}, {user_op: 3}),
    ("MPI_Bcast", "world"): (10, {4096: 10}, {}),
    ("MPI_Barrier", "world"): (5, {0: 5}, {}),
    ("MPI_Iallreduce", "world"): (4, {8: 4}, {}),
    ("MPI_Alltoall", "world"): (2, {4: 2}, {}),
    ("MPI_Reduce", "world"): (1, {4: 1}, {}),
    ("MPI_Allreduce", "split" if not native else "other"): (7, {16: 7}, {}),
    ("MPI_Bcast", "other"): (6, {8: 6}, {"communicator of one rank": 6}),
}
errors = []


def check(what, got, expected):
    if got != expected:
        errors.append(f"{what}: {got!r}, expected {expected!r}")


check("format", p["format"], "topo-run-profile 1")
check("native", p["native"], native)
check("ranks", p["ranks"], ranks)
check("nodes", p["nodes"], nodes)
if not p["mpi"]:
    errors.append("no MPI library named")
if not 0 < p["collective_seconds"]["max"] <= p["wall_seconds"]["max"]:
    errors.append(f"collective time {p['collective_seconds']} against wall {p['wall_seconds']}")
got = {(c["call"], c["comm"]): c for c in p["collectives"]}
check("(call, comm) entries", sorted(got), sorted(want))
for key, (per_rank, classes, handed) in want.items():
    c = got.get(key)
    if c is None:
        continue
    check(f"{key} calls", c["calls"], per_rank * ranks)
    check(f"{key} calls_max", c["calls_max"], per_rank)
    check(f"{key} classes", {b["min_bytes"]: b["calls"] for b in c["bytes"]},
          {k: v * ranks for k, v in classes.items()})
    if native:
        check(f"{key} topo_run", c["topo_run"], 0)
        check(f"{key} handed", c["mpi"], {native_why: per_rank * ranks})
    else:
        check(f"{key} topo_run", c["topo_run"], (per_rank - sum(handed.values())) * ranks)
        check(f"{key} handed", c["mpi"], {k: v * ranks for k, v in handed.items()})
    if not c["seconds"]["max"] > 0 or c["seconds"]["mean"] > c["seconds"]["max"]:
        errors.append(f"{key} time {c['seconds']}")
split = got.get(("MPI_Allreduce", "split"))
if split is not None:
    check("the split's ranks", split["ranks"], half)
if errors:
    print(f"profile {path}: " + "; ".join(errors))
    sys.exit(1)
ar = got[("MPI_Allreduce", "world")]
print(f"{len(got)} entries as the program made them; MPI_Allreduce on world "
      f"{ar['calls_max']} calls, {ar['seconds']['max'] * 1e3:.3f} ms (most of one rank)")
