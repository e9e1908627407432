//! The launcher driven by a fake Slurm task environment (no PMIx server), with a synthetic
//! hwloc topology (`HWLOC_SYNTHETIC`) and the task pinned to CPU 0 with `taskset`, so the
//! outcome does not depend on the test machine.

use std::process::{Command, Output};

use super::{stderr, stdout};

/// Two sockets of two single-threaded cores: CPUs 0-1 on socket 0, 2-3 on socket 1.
const TWO_SOCKETS: &str = "pack:2 core:2 pu:1";

/// Runs `taskset -c 0 topo-run ARGS` as task `rank` (local id `local`) of a 2-node,
/// 4-tasks-per-node step with one core per task, plus `extra` variables.
fn fake_task(
    rank: u32,
    local: u32,
    topology: &str,
    extra: &[(&str, &str)],
    args: &[&str],
) -> Output {
    let node = if rank < 4 { "node1" } else { "node2" };
    let mut cmd = Command::new("taskset");
    cmd.args(["-c", "0", env!("CARGO_BIN_EXE_topo-run")])
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HWLOC_SYNTHETIC", topology)
        .env("SLURM_PROCID", rank.to_string())
        .env("SLURM_NTASKS", "8")
        .env("SLURM_LOCALID", local.to_string())
        .env("SLURMD_NODENAME", node)
        .env("SLURM_STEP_NODELIST", "node[1-2]")
        .env("SLURM_STEP_TASKS_PER_NODE", "4(x2)")
        .env("SLURM_JOB_ID", "42")
        .env("SLURM_STEP_ID", "3")
        .env("SLURM_CPU_BIND_TYPE", "mask_cpu:")
        .env("SLURM_CPU_BIND_LIST", "0x1,0x2,0x4,0x8");
    for (k, v) in extra {
        cmd.env(k, v);
    }
    cmd.output().expect("run taskset topo-run")
}

const SHOW: [&str; 4] = ["--", env!("CARGO_BIN_EXE_topo-run"), "show", "--format"];

fn show_json(rank: u32, local: u32) -> String {
    let mut args = SHOW.to_vec();
    args.push("json");
    let out = fake_task(rank, local, TWO_SOCKETS, &[], &args);
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out)
}

#[test]
fn localities_come_from_the_binding_list_and_hwloc() {
    // Local task 0 of each node is on socket 0 with local task 1.
    assert_eq!(
        show_json(0, 0).trim(),
        r#"{"rank":0,"size":8,"node":"node1","groups":[{"level":"socket","members":[0,1]},{"level":"node","members":[0,2]},{"level":"world","members":[0,4]}]}"#
    );
    assert_eq!(
        show_json(4, 0).trim(),
        r#"{"rank":4,"size":8,"node":"node2","groups":[{"level":"socket","members":[4,5]},{"level":"node","members":[4,6]},{"level":"world","members":[0,4]}]}"#
    );
}

#[test]
fn the_exported_plan_names_job_step_and_node() {
    let out = fake_task(
        0,
        0,
        TWO_SOCKETS,
        &[],
        &["--", "sh", "-c", "echo \"$TOPO_RUN_PLAN|$PMIX_MCA_gds\""],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with(
            "v4;rank=0;size=8;node=node1;local=0/4;peers=0-3;shm=/topo-run.42.3.node1;"
        ),
        "{text}"
    );
    assert!(
        text.trim_end().ends_with("|hash"),
        "PMIX_MCA_gds=hash is set: {text}"
    );
}

#[test]
fn a_mask_that_differs_from_slurms_stops_the_task() {
    // Local task 1 should be on CPU 1, but taskset put it on CPU 0.
    let out = fake_task(1, 1, TWO_SOCKETS, &[], &["--", "sh", "-c", "echo APP-RAN"]);
    assert_eq!(out.status.code(), Some(12), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("rank 1 on node node1 runs on CPUs 0"), "{err}");
    assert!(err.contains("gives local task 1 the CPUs 1"), "{err}");
    assert!(!stdout(&out).contains("APP-RAN"));

    let out = fake_task(
        1,
        1,
        TWO_SOCKETS,
        &[],
        &["--allow-unbound", "--", "sh", "-c", "echo APP-RAN"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("warning"));
    assert!(stdout(&out).contains("APP-RAN"));
}

#[test]
fn a_task_bound_to_the_whole_node_is_unbound() {
    // One CPU in the machine: a task on CPU 0 has the whole node.
    let out = fake_task(
        0,
        0,
        "pack:1 core:1 pu:1",
        &[("SLURM_CPU_BIND_TYPE", "none")],
        &["--", "true"],
    );
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("rank 0 on node node1 is not bound"), "{err}");
    assert!(
        err.contains("--cpu-bind=cores") && err.contains("--allow-unbound"),
        "{err}"
    );
}

#[test]
fn unknown_peer_binding_is_an_error_unless_allowed() {
    let none = [("SLURM_CPU_BIND_TYPE", "none")];
    let out = fake_task(0, 0, TWO_SOCKETS, &none, &["--", "true"]);
    assert_eq!(out.status.code(), Some(11), "{}", stderr(&out));
    assert!(stderr(&out).contains("SLURM_CPU_BIND_LIST is not set"));
    let out = fake_task(0, 0, TWO_SOCKETS, &none, &["--allow-unbound", "--", "true"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn a_task_alone_on_its_node_may_be_bound_outside_slurm() {
    // --cpu-bind=none, and a wrapper pinned the only task of node1 to CPU 0 (taskset):
    // nobody else's binding matters.
    let alone = [
        ("SLURM_CPU_BIND_TYPE", "none"),
        ("SLURM_NTASKS", "2"),
        ("SLURM_STEP_TASKS_PER_NODE", "1(x2)"),
        ("SLURM_CPU_BIND_LIST", ""),
    ];
    let out = fake_task(0, 0, TWO_SOCKETS, &alone, &["-v", "--", "true"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("alone on the node, bound outside Slurm to CPUs 0"),
        "{}",
        stderr(&out)
    );
    // Slurm gave it CPU 1 (its node's only CPU as Slurm sees it), the wrapper CPU 0.
    let repinned = [
        ("SLURM_NTASKS", "2"),
        ("SLURM_STEP_TASKS_PER_NODE", "1(x2)"),
        ("SLURM_CPU_BIND_LIST", "0x2"),
    ];
    let out = fake_task(0, 0, TWO_SOCKETS, &repinned, &["-v", "--", "true"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("(Slurm says 1)"), "{}", stderr(&out));
}

#[test]
fn bad_slurm_environments_are_named() {
    for (extra, needle) in [
        (("SLURM_CPU_BIND_LIST", "0xZZ"), "0xZZ"),
        (("SLURM_CPU_BIND_TYPE", "map_ldom:"), "map_ldom"),
        (
            ("SLURM_STEP_TASKS_PER_NODE", "4"),
            "SLURM_STEP_TASKS_PER_NODE",
        ),
        (("SLURM_STEP_NODELIST", "node[1-"), "SLURM_STEP_NODELIST"),
        (("SLURM_DISTRIBUTION", "arbitrary"), "arbitrary"),
        (("SLURMD_NODENAME", "node2"), "started it on node2"),
    ] {
        let out = fake_task(0, 0, TWO_SOCKETS, &[extra], &["--", "true"]);
        assert_eq!(out.status.code(), Some(11), "{extra:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{extra:?}: {}", stderr(&out));
    }
}

#[test]
fn a_missing_node_in_the_map_stops_the_task() {
    let map = super::temp_file("fake-partial.yaml", "switches:\n  leaf1: {nodes: node1}\n");
    let out = fake_task(
        0,
        0,
        TWO_SOCKETS,
        &[],
        &["--network-map", &map, "--", "true"],
    );
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    assert!(stderr(&out).contains("node2"));
}

/// A topology.conf that puts each of `n` nodes (`n1`..) under one of two leaf switches at
/// random, so that a leaf switch's group of node leaders forms no regular ranges.
fn scattered_map(n: u32) -> std::path::PathBuf {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut sw = [Vec::new(), Vec::new()];
    for i in 1..=n {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        sw[(seed % 2) as usize].push(format!("n{i}"));
    }
    let path = std::env::temp_dir().join(format!("topo-run-scattered-{}.conf", std::process::id()));
    let text = format!(
        "SwitchName=s0 Nodes={}\nSwitchName=s1 Nodes={}\nSwitchName=top Switches=s[0-1]\n",
        sw[0].join(","),
        sw[1].join(",")
    );
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_plan_too_large_for_the_environment_is_refused_before_exec() {
    let n = 90_000;
    let map = scattered_map(n);
    let tasks = format!("1(x{n})");
    let out = fake_task(
        0,
        0,
        TWO_SOCKETS,
        &[
            ("SLURM_NTASKS", &n.to_string()),
            ("SLURMD_NODENAME", "n1"),
            ("SLURM_STEP_NODELIST", &format!("n[1-{n}]")),
            ("SLURM_STEP_TASKS_PER_NODE", &tasks),
            ("SLURM_CPU_BIND_LIST", "0x1"),
            ("TOPO_RUN_NETWORK_MAP", map.to_str().unwrap()),
        ],
        &["--", "true"],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(15), "{err}");
    assert!(
        err.contains("rank 0's plan takes") && err.contains("131072 bytes"),
        "{err}"
    );
    // `topo-run plan --format env` warns about the same rank.
    let job = std::env::temp_dir().join(format!("topo-run-scattered-{}.yaml", std::process::id()));
    std::fs::write(
        &job,
        format!("layout: {{nodes: 'n[1-{n}]', ranks_per_node: 1, hardware: {{sockets: 1, cores_per_numa: 1}}}}"),
    )
    .unwrap();
    let plan = Command::new(env!("CARGO_BIN_EXE_topo-run"))
        .args(["plan", "--job", job.to_str().unwrap(), "--network-map"])
        .arg(&map)
        .args(["--rank", "0", "--format", "env"])
        .output()
        .unwrap();
    assert!(plan.status.success(), "{}", stderr(&plan));
    assert!(
        stderr(&plan).contains("warning: rank 0's plan takes"),
        "{}",
        stderr(&plan)
    );
    let _ = std::fs::remove_file(map);
    let _ = std::fs::remove_file(job);
}
