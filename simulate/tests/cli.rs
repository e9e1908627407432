//! `topo-run-simulate` from the command line: its output, and a clear message with the
//! documented exit code for each kind of bad input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn simulate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_topo-run-simulate"))
        .args(args)
        .current_dir(root())
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A scratch file with `content`, named for the test.
fn file(name: &str, content: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("topo-simulate-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    p
}

#[test]
fn the_paper_job_gets_both_tables() {
    let out = simulate(&[
        "--job",
        "examples/jobs/paper.yaml",
        "--network-map",
        "examples/maps/paper.yaml",
        "--ops",
        "bcast,allreduce",
        "--sizes",
        "8,1M",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(
        s.starts_with("topo-run simulate: 108 ranks on 3 nodes"),
        "{s}"
    );
    for line in [
        "bcast                 8  topo-run",
        "bcast                 8  binomial",
        "allreduce            1M  rabenseifner",
        "Traffic per link class",
    ] {
        assert!(s.contains(line), "no {line:?} in\n{s}");
    }
}

#[test]
fn json_carries_every_prediction() {
    let out = simulate(&[
        "--job",
        "examples/jobs/paper.yaml",
        "--ops",
        "barrier,allgather",
        "--sizes",
        "64",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["ranks"], 108);
    let preds = doc["predictions"].as_array().unwrap();
    // barrier: topo-run, its blocking form, dissemination; allgather: topo-run, its
    // blocking form, 2 flat.
    assert_eq!(preds.len(), 7, "{doc}");
    assert_eq!(preds[1]["algorithm"], "topo-run blocking", "{doc}");
    assert!(
        preds
            .iter()
            .all(|p| p["outcome"]["time_us"].as_f64().unwrap() > 0.0)
    );
}

/// Every collective of `--ops all`, the v-forms and Exscan among them, is predicted for
/// topo-run (both forms) and for each of its flat algorithms.
#[test]
fn every_collective_is_predicted() {
    let out = simulate(&[
        "--job",
        "examples/jobs/paper.yaml",
        "--ops",
        "all",
        "--sizes",
        "1K",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let preds = doc["predictions"].as_array().unwrap();
    for op in [
        "bcast",
        "reduce",
        "allreduce",
        "barrier",
        "allgather",
        "gather",
        "scatter",
        "alltoall",
        "reduce_scatter",
        "scan",
        "gatherv",
        "scatterv",
        "allgatherv",
        "alltoallv",
        "reduce_scatter_v",
        "exscan",
    ] {
        let of: Vec<_> = preds.iter().filter(|p| p["op"] == op).collect();
        assert!(of.len() >= 3, "{op}: {of:?}");
        for p in of {
            assert!(p["outcome"]["time_us"].as_f64().unwrap() > 0.0, "{p}");
        }
    }
}

#[test]
fn the_plot_has_a_line_per_collective() {
    let svg = file("plot.svg", "");
    let out = simulate(&[
        "--job",
        "examples/jobs/paper.yaml",
        "--ops",
        "bcast,allreduce,barrier",
        "--sizes",
        "8,64K,1M",
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(plot.starts_with("<svg"));
    let legend = |label: &str| plot.lines().any(|l| l.trim() == label);
    for label in ["bcast", "allreduce"] {
        assert!(legend(label), "no legend {label}");
    }
    assert!(!legend("barrier"), "the barrier has no size to plot");
}

#[test]
fn the_printed_model_is_a_valid_model() {
    let out = simulate(&["--print-model"]);
    assert!(out.status.success());
    let model = file("printed.model", &text(&out.stdout));
    let out = simulate(&[
        "--job",
        "examples/jobs/paper.yaml",
        "--model",
        model.to_str().unwrap(),
        "--ops",
        "barrier",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn bad_inputs_get_their_exit_codes() {
    let bad_model = file("bad.model", "version 1\nlink node alpha=fast\n");
    let bad_job = file("bad.yaml", "layout: {nodes: 'n[1-2]'}\n");
    let small_map = file("small.yaml", "switches:\n  s1:\n    nodes: node[1-2]\n");
    let job = "examples/jobs/paper.yaml";
    for (args, code, says) in [
        (
            vec!["--job", job, "--model", bad_model.to_str().unwrap()],
            17,
            "line 2",
        ),
        (
            vec!["--job", "/nonexistent/job.yaml"],
            3,
            "cannot read the job description",
        ),
        (vec!["--job", bad_job.to_str().unwrap()], 4, "job"),
        (
            vec!["--job", job, "--network-map", small_map.to_str().unwrap()],
            6,
            "not in",
        ),
        (
            vec!["--job", job, "--ops", "igatherv"],
            2,
            "unknown collective \"igatherv\"",
        ),
        (vec!["--job", job, "--sizes", "lots"], 2, "--sizes"),
        (vec![], 2, "--job"),
    ] {
        let out = simulate(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// A profile recorded on the dev cluster (examples/c/profile-known.c, 2 nodes x 2 ranks)
/// replays on the paper's cluster: a row per (call, communicator kind), the total, the
/// model and how far it was validated, and what the replay assumed.
#[test]
fn a_profile_replays_on_another_cluster() {
    let out = simulate(&[
        "--job",
        "examples/jobs/paper.yaml",
        "--network-map",
        "examples/maps/paper.yaml",
        "--profile",
        "examples/profiles/profile-known-2x2.json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(
        s.starts_with(
            "topo-run simulate: the collectives of examples/profiles/profile-known-2x2.json \
             (recorded on 4 ranks on 2 nodes, topo-run's collectives, Open MPI"
        ),
        "{s}"
    );
    assert!(s.contains("replayed on 108 ranks on 3 nodes"), "{s}");
    assert!(
        s.contains("checked against measurements on 1 node x 2"),
        "{s}"
    );
    assert!(s.contains("7 calls were on smaller communicators"), "{s}");
    for (call, comm, calls) in [
        ("MPI_Allreduce", "world", 103),
        ("MPI_Allreduce", "split", 7),
        ("MPI_Bcast", "world", 10),
        ("MPI_Barrier", "world", 5),
        ("MPI_Iallreduce", "world", 4),
        ("MPI_Alltoall", "world", 2),
        ("MPI_Reduce", "world", 1),
    ] {
        let row = s
            .lines()
            .find(|l| l.starts_with(call) && l.split_whitespace().nth(1) == Some(comm))
            .unwrap_or_else(|| panic!("no row for {call} on {comm} in\n{s}"));
        assert_eq!(
            row.split_whitespace().nth(2),
            Some(calls.to_string().as_str()),
            "{row}"
        );
    }
    let total = s.lines().find(|l| l.starts_with("total")).expect("a total");
    let words: Vec<&str> = total.split_whitespace().collect();
    assert_eq!(words[1], "132", "{total}");
    let (topo, flat): (f64, f64) = (words[2].parse().unwrap(), words[3].parse().unwrap());
    assert!(topo > 0.0 && flat > 0.0, "{total}");

    let out = simulate(&[
        "--job",
        "examples/jobs/paper.yaml",
        "--profile",
        "examples/profiles/profile-known-2x2.json",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["replay"]["rows"].as_array().unwrap().len(), 7);
    assert!(doc["replay"]["topo_run_us"].as_f64().unwrap() > 0.0);
}

#[test]
fn a_file_that_is_no_profile_is_named_with_exit_code_3() {
    let bad = file("not-a-profile.json", "{\"ranks\": 4}");
    let out = simulate(&[
        "--job",
        "examples/jobs/paper.yaml",
        "--profile",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(3));
    let e = text(&out.stderr);
    assert!(e.contains("is not a topo-run profile"), "{e}");
    let out = simulate(&[
        "--job",
        "examples/jobs/paper.yaml",
        "--profile",
        "examples/profiles/profile-known-2x2.json",
        "--ops",
        "bcast",
    ]);
    assert_eq!(out.status.code(), Some(2), "--profile with --ops");
}
