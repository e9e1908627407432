#!/usr/bin/env python3
"""The apps harness's report (benchmarks/apps/run.sh): from the runs' table (app, way,
run, seconds, directory; each directory holding the run's `result` and `profile.json`),
checks that every run of an application has the same result as its first native run,
and writes OUT/apps.md (the table) and OUT/apps.svg (the ratios), printing the table.

    report.py RUNS_TSV OUT NODES PER_NODE TINY

Exits 1 if results disagree or an application has no run of one way."""
import json
import os
import statistics
import subprocess
import sys
from datetime import date
from pathlib import Path

runs_tsv, out, nodes, per_node, tiny = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
runs = {}
for line in open(runs_tsv):
    app, way, r, secs, d = line.rstrip("\n").split("\t")
    runs.setdefault(app, {"native": [], "topo": []})[way].append((int(r), float(secs), Path(d)))


def numbers_agree(a, b, rel=1e-9):
    """Whether two results are the same text, or the same words with numbers equal to
    `rel` (a sum whose terms are added in another order may differ in its last bits)."""
    if a == b:
        return "identical"
    wa, wb = a.split(), b.split()
    if len(wa) != len(wb):
        return None
    for x, y in zip(wa, wb):
        if x == y:
            continue
        try:
            fx, fy = float(x), float(y)
        except ValueError:
            return None
        if abs(fx - fy) > rel * max(abs(fx), abs(fy), 1e-300):
            return None
    return f"equal to {rel:g}"


ROOT = Path(__file__).resolve().parents[2]
# The cluster the profiles are replayed on (not with --tiny: the test command has no time
# for 2,048 simulated ranks).
JOB, MAP = "examples/jobs/cluster-64x32.yaml", "examples/maps/cluster-64.yaml"


def predict(profile):
    """topo-run simulate --profile on 64 nodes x 32 ranks: (topo-run us, flat us, caveats)."""
    if tiny or not os.environ.get("TOPO_RUN"):
        return None
    r = subprocess.run([os.environ["TOPO_RUN"], "simulate", "--format", "json", "--job", JOB,
                        "--network-map", MAP, "--profile", str(profile)],
                       cwd=ROOT, capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        print(f"apps: topo-run simulate --profile {profile}: {r.stderr.strip()[:300]}")
        return None
    rep = json.loads(r.stdout)["replay"]
    return rep["topo_run_us"], rep["flat_us"], rep["rows"]


def profile_of(d):
    return json.load(open(d / "profile.json"))


rows, bad = [], False
for app, ways in runs.items():
    if not ways["native"] or not ways["topo"]:
        print(f"apps: {app}: no {'native' if not ways['native'] else 'topo-run'} run")
        bad = True
        continue
    ref = (ways["native"][0][2] / "result").read_text()
    if not ref.strip():
        print(f"apps: {app}: the native run has no result")
        bad = True
        continue
    agree = "identical"
    for way in ("native", "topo"):
        for r, _, d in ways[way]:
            how = numbers_agree(ref, (d / "result").read_text())
            if how is None:
                print(f"apps: FAIL {app}: run {r} {way}'s result differs from run 1 native's:\n"
                      f"{(d / 'result').read_text()[:600]}\n--- against ---\n{ref[:600]}")
                bad = True
            elif how != "identical":
                agree = how
    med = {w: statistics.median(s for _, s, _ in ways[w]) for w in ("native", "topo")}
    coll = {w: statistics.median(profile_of(d)["collective_seconds"]["max"] for _, _, d in ways[w])
            for w in ("native", "topo")}
    p = profile_of(ways["topo"][0][2])
    calls = sum(c["calls"] for c in p["collectives"])
    ours = sum(c["topo_run"] for c in p["collectives"])
    top = sorted(p["collectives"], key=lambda c: -c["seconds"]["max"])[:2]
    spread = {w: (min(s for _, s, _ in ways[w]), max(s for _, s, _ in ways[w])) for w in ("native", "topo")}
    predicted = predict(ways["topo"][0][2] / "profile.json")
    rows.append({
        "predicted": predicted,
        "app": app, "runs": len(ways["topo"]), "native": med["native"], "topo": med["topo"],
        "ratio": med["topo"] / med["native"], "spread": spread, "calls": calls, "ours": ours,
        "coll_native": coll["native"], "coll_topo": coll["topo"], "agree": agree,
        "top": ", ".join(f"{c['call']} on {c['comm']}" for c in top),
    })

ranks = nodes * per_node
lines = [
    f"# Real applications, {nodes} node{'s' if nodes > 1 else ''} x {per_node} ranks"
    f"{' (tiny inputs)' if tiny else ''}, {date.today().isoformat()}",
    "",
    "`bash benchmarks/apps/run.sh" + (" --tiny" if tiny else "") + f" --nodes {nodes} --per-node {per_node}`: "
    "each run natively (`topo-run --native`, the PMPI library loaded, MPI's own collectives) and "
    "under topo-run, alternating, both with `--profile`. Times are whole runs (srun to exit), "
    "medians; the collective time is the profile's (the slowest rank's), medians.",
    "",
    "| application | runs | native (s) | topo-run (s) | ratio | spread native / topo-run (s) | collective calls on topo-run's path | collective time native / topo-run (ms) | costliest collectives | results |",
    "|---|---|---|---|---|---|---|---|---|---|",
]
for r in rows:
    (n0, n1), (t0, t1) = r["spread"]["native"], r["spread"]["topo"]
    lines.append(
        f"| {r['app']} | {r['runs']} | {r['native']:.2f} | {r['topo']:.2f} | {r['ratio']:.3f} | "
        f"{n0:.2f}-{n1:.2f} / {t0:.2f}-{t1:.2f} | {r['ours']} of {r['calls']} "
        f"({100 * r['ours'] / max(r['calls'], 1):.0f} %) | {r['coll_native'] * 1e3:.2f} / {r['coll_topo'] * 1e3:.2f} | "
        f"{r['top']} | {r['agree']} |")
if any(r["predicted"] for r in rows):
    lines += [
        "",
        "Predicted on 64 nodes x 32 ranks (2 sockets x 16 cores, 16 nodes per leaf switch: "
        f"`topo-run simulate --profile` of each application's first topo-run profile, `--job {JOB} "
        f"--network-map {MAP}`, the default cost model): the same calls at the same sizes, "
        "each communicator as the whole job (docs/simulate.md, \"Replaying an application\").",
        "",
        "| application | topo-run (ms) | flat algorithms (ms) | ratio | ratio without Alltoall(v) | where topo-run loses |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        if not r["predicted"]:
            continue
        t, f, prow = r["predicted"]
        not_a2a = [x for x in prow if x["op"] != "alltoall"]
        t2, f2 = sum(x["topo_run_us"] for x in not_a2a), sum(x["flat_us"] for x in not_a2a)
        loses = [f"{x['call']} on {x['comm']} ({x['topo_run_us'] / x['flat_us']:.2f}"
                 f"{', schedule for blocking' if x['schedule_for_blocking'] else ''})"
                 for x in prow if x["flat_us"] > 0 and x["topo_run_us"] > 1.02 * x["flat_us"]]
        lines.append(f"| {r['app']} | {t / 1e3:.1f} | {f / 1e3:.1f} | {t / f:.2f} | "
                     f"{(t2 / f2 if f2 else 0):.2f} | {', '.join(loses) or '-'} |")
lines += [
    "",
    f"These machines have 2 cores: {ranks} ranks compute most of the time, and whole runs "
    "vary by more than their collectives take (the spread). A whole-run ratio inside the "
    "spread is parity; the profiles' collective time is the part topo-run changes, and "
    "`topo-run simulate --profile` predicts it on larger clusters.",
]
text = "\n".join(lines) + "\n"
out.mkdir(parents=True, exist_ok=True)
(out / "apps.md").write_text(text)
print(text)

# The plot: the median ratio per application (whole run, and collective time).
w, h, left, top_m, bar = 760, 80 + 60 * max(len(rows), 1), 150, 50, 18
xmax = max([1.5] + [r["ratio"] for r in rows] + [r["coll_topo"] / r["coll_native"] for r in rows if r["coll_native"] > 0])
scale = (w - left - 40) / xmax
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="13">',
       f'<rect width="{w}" height="{h}" fill="white"/>',
       f'<text x="{left}" y="24" font-size="15">topo-run / native, medians ({nodes} x {per_node} ranks; below 1: topo-run faster)</text>']
for i, r in enumerate(rows):
    y = top_m + 60 * i
    coll = r["coll_topo"] / r["coll_native"] if r["coll_native"] > 0 else 0
    svg.append(f'<text x="10" y="{y + 22}">{r["app"]}</text>')
    svg.append(f'<rect x="{left}" y="{y}" width="{r["ratio"] * scale:.1f}" height="{bar}" fill="#4a7ab5"/>')
    svg.append(f'<text x="{left + r["ratio"] * scale + 4:.1f}" y="{y + 14}">run {r["ratio"]:.3f}</text>')
    svg.append(f'<rect x="{left}" y="{y + bar + 2}" width="{coll * scale:.1f}" height="{bar}" fill="#e08a2c"/>')
    svg.append(f'<text x="{left + coll * scale + 4:.1f}" y="{y + bar + 16}">collectives {coll:.3f}</text>')
one = left + scale
svg.append(f'<line x1="{one:.1f}" y1="{top_m - 8}" x2="{one:.1f}" y2="{h - 10}" stroke="black" stroke-dasharray="4"/>')
svg.append("</svg>")
(out / "apps.svg").write_text("\n".join(svg) + "\n")
sys.exit(1 if bad or not rows else 0)
