//! End-to-end tests of the `topo-run` binary: outputs and every bad input's message and
//! exit code.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod fake_slurm;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn topo_run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_topo-run"))
        .args(args)
        .current_dir(root())
        .env_remove("TOPO_RUN_NETWORK_MAP")
        .env_remove("TOPO_RUN_LEVELS")
        .output()
        .expect("run topo-run")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Writes `text` to a fresh file under the target directory and returns its path.
fn temp_file(name: &str, text: &str) -> String {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("launcher-tests");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

const PAPER: [&str; 4] = [
    "--job",
    "examples/jobs/paper.yaml",
    "--network-map",
    "examples/maps/paper.yaml",
];

#[test]
fn paper_example_json() {
    let mut args = vec!["plan"];
    args.extend(PAPER);
    args.extend(["--format", "json", "--rank", "0"]);
    let o = topo_run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["version"], 1);
    assert_eq!(v["size"], 108);
    assert_eq!(
        v["levels"],
        serde_json::json!(["numa", "node", "switch1", "world"])
    );
    let ranks = v["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 1);
    assert_eq!(ranks[0]["rank"], 0);
    assert_eq!(ranks[0]["node"], "node01");
    let groups = ranks[0]["groups"].as_array().unwrap();
    let got: Vec<(String, Vec<u64>)> = groups
        .iter()
        .map(|g| {
            (
                g["level"].as_str().unwrap().to_string(),
                g["members"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|m| m.as_u64().unwrap())
                    .collect(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("numa".to_string(), (0..18).collect()),
            ("node".to_string(), vec![0, 18]),
            ("switch1".to_string(), vec![0, 36]),
            ("world".to_string(), vec![0, 72]),
        ]
    );
}

#[test]
fn all_ranks_json_lists_every_rank() {
    let mut args = vec!["plan"];
    args.extend(PAPER);
    args.extend(["--format", "json"]);
    let o = topo_run(&args);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let ranks = v["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 108);
    assert_eq!(ranks[1]["groups"][0]["members"][0], 0);
    assert_eq!(ranks[1]["groups"].as_array().unwrap().len(), 1);
    assert_eq!(
        ranks[36]["groups"][2]["members"],
        serde_json::json!([0, 36])
    );
}

#[test]
fn text_and_dot_formats() {
    let mut args = vec!["plan"];
    args.extend(PAPER);
    let o = topo_run(&args);
    let text = stdout(&o);
    assert!(o.status.success());
    for line in [
        "108 ranks on 3 nodes; levels bottom-up: numa -> node -> switch1 -> world",
        "node48: ranks 72-107 (36), leaf switch sw13",
        "    numa 1: ranks 18-35",
        "  node node01 [0,18] leader 0",
        "switch1 sw11 [0,36] leader 0",
        "world [0,72] leader 0",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }
    args.extend(["--format", "dot"]);
    let dot = stdout(&topo_run(&args));
    assert!(dot.starts_with("digraph topo_run_plan {"), "{dot}");
    assert!(dot.contains("label=\"node48\""), "{dot}");
    assert!(dot.trim_end().ends_with('}'));
}

#[test]
fn env_format_is_the_decodable_plan() {
    let mut args = vec!["plan"];
    args.extend(PAPER);
    args.extend(["--format", "env", "--rank", "36"]);
    let out = stdout(&topo_run(&args));
    let value = out.trim().strip_prefix("TOPO_RUN_PLAN=").unwrap();
    let plan = topo_hierarchy::RankPlan::decode(value).unwrap();
    assert_eq!(plan.rank, 36);
    assert_eq!(plan.node, "node02");
    assert_eq!((plan.local_rank, plan.local_size), (0, 36));
    assert_eq!(plan.groups.len(), 3);
}

#[test]
fn levels_option_and_environment() {
    let mut args = vec!["plan"];
    args.extend(PAPER);
    args.extend([
        "--format",
        "json",
        "--rank",
        "0",
        "--levels",
        "node,switch1",
    ]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&topo_run(&args))).unwrap();
    assert_eq!(v["levels"], serde_json::json!(["node", "switch1", "world"]));
    let o = Command::new(env!("CARGO_BIN_EXE_topo-run"))
        .args([
            "plan",
            "--job",
            "examples/jobs/paper.yaml",
            "--format",
            "json",
            "--rank",
            "0",
        ])
        .env("TOPO_RUN_LEVELS", "numa,switch1")
        .env("TOPO_RUN_NETWORK_MAP", "examples/maps/paper.yaml")
        .current_dir(root())
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["levels"], serde_json::json!(["numa", "switch1", "world"]));
}

/// Runs `plan` and checks the exit code and that stderr holds one clear line with `needle`.
fn fails(args: &[&str], code: i32, needle: &str) {
    let mut all = vec!["plan"];
    all.extend(args);
    let o = topo_run(&all);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: {err}");
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "{err}"
    );
    assert!(stdout(&o).is_empty(), "{args:?} printed to stdout");
}

#[test]
fn bad_inputs_fail_cleanly() {
    let job = "examples/jobs/paper.yaml";
    fails(
        &["--job", "no/such/job.yaml"],
        3,
        "cannot read job description no/such/job.yaml",
    );
    fails(
        &["--job", job, "--network-map", "no/such/map"],
        3,
        "cannot read network map",
    );
    let bad_job = temp_file(
        "bad-job.yaml",
        "layout: {nodes: 'n[1-2', ranks_per_node: 1}",
    );
    fails(&["--job", &bad_job], 4, "bad-job.yaml");
    let bad_loc = temp_file("bad-loc.yaml", "ranks: [{node: n1, locality: 'SK0:QQ1'}]");
    fails(&["--job", &bad_loc], 4, "bad token \"QQ1\"");
    for (name, map, needle) in [
        (
            "syntax.conf",
            "SwitchName=s1 Nodes=node[01-64] Speed=9\n",
            "line 1: unknown key \"Speed\"",
        ),
        (
            "two-parents.conf",
            "SwitchName=a Nodes=node[01-48]\nSwitchName=b Nodes=node48\n",
            "node \"node48\" is attached to two switches, \"a\" and \"b\"",
        ),
        (
            "switch-two-parents.conf",
            "SwitchName=a Nodes=node[01-48]\nSwitchName=t1 Switches=a\nSwitchName=t2 Switches=a\n",
            "switch \"a\" has two parents",
        ),
        (
            "cycle.conf",
            "SwitchName=a Nodes=node[01-48]\nSwitchName=b Switches=c\nSwitchName=c Switches=b\n",
            "cycle",
        ),
        (
            "mixed.conf",
            "SwitchName=a Nodes=node[01-48] Switches=b\nSwitchName=b Nodes=x\n",
            "\"a\" lists both nodes and switches",
        ),
        (
            "unknown.conf",
            "SwitchName=a Switches=ghost\n",
            "child switch \"ghost\"",
        ),
        (
            "duplicate.yaml",
            "switches:\n  a: {nodes: 'node[01-48]'}\n  a: {nodes: x}\n",
            "switch \"a\" is defined twice",
        ),
    ] {
        let path = temp_file(name, map);
        fails(&["--job", job, "--network-map", &path], 5, needle);
    }
    let partial = temp_file("partial.conf", "SwitchName=a Nodes=node[01-02]\n");
    fails(
        &["--job", job, "--network-map", &partial],
        6,
        "node \"node48\" of the job is not in the network map",
    );
    fails(
        &["--job", job, "--levels", "numa,rack"],
        7,
        "unknown level \"rack\"",
    );
    fails(
        &["--job", job, "--rank", "108"],
        2,
        "--rank 108 is out of range",
    );
    fails(&["--job", job, "--format", "xml"], 2, "xml");
}

#[test]
fn help_documents_examples_and_exit_codes() {
    let o = topo_run(&["plan", "--help"]);
    let help = stdout(&o);
    assert!(
        help.contains("Examples:") && help.contains("Exit codes:"),
        "{help}"
    );
    assert!(
        help.contains("TOPO_RUN_NETWORK_MAP") && help.contains("TOPO_RUN_LEVELS"),
        "{help}"
    );
    let o = topo_run(&["--version"]);
    assert!(stdout(&o).starts_with("topo-run "));
}

#[test]
fn show_prints_the_plan_that_plan_predicts() {
    let env = topo_run(&[
        "plan", PAPER[0], PAPER[1], PAPER[2], PAPER[3], "--rank", "36", "--format", "env",
    ]);
    assert!(env.status.success(), "{}", stderr(&env));
    let value = stdout(&env)
        .trim()
        .strip_prefix("TOPO_RUN_PLAN=")
        .unwrap()
        .to_string();
    let show = |plan: Option<&str>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_topo-run"));
        cmd.args(["show", "--format", "json"]);
        match plan {
            Some(p) => cmd.env("TOPO_RUN_PLAN", p),
            None => cmd.env_remove("TOPO_RUN_PLAN"),
        };
        cmd.output().unwrap()
    };
    let out = show(Some(&value));
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(json["rank"], 36);
    assert_eq!(json["size"], 108);
    assert_eq!(json["node"], "node02");
    let levels: Vec<&str> = json["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["level"].as_str().unwrap())
        .collect();
    assert_eq!(levels, ["numa", "node", "switch1"]);
    assert_eq!(json["groups"][2]["members"], serde_json::json!([0, 36]));

    let missing = show(None);
    assert_eq!(missing.status.code(), Some(9));
    assert!(stderr(&missing).contains("TOPO_RUN_PLAN is not set"));
    let tampered = show(Some(&value.replace("rank=36", "rank=37")));
    assert_eq!(tampered.status.code(), Some(9));
    assert!(stderr(&tampered).contains("TOPO_RUN_PLAN is invalid"));
}

#[test]
fn plan_takes_the_runtime_settings_into_the_plan_and_digest() {
    let job = "examples/jobs/paper.yaml";
    let base = ["plan", "--job", job, "--rank", "0", "--format", "env"];
    let plain = topo_run(&base);
    assert!(plain.status.success(), "{}", stderr(&plain));
    let mut args = base.to_vec();
    args.extend([
        "--single-copy",
        "0",
        "--reduce",
        "node=reduce-scatter-gather",
    ]);
    let o = topo_run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let line = stdout(&o);
    assert!(
        line.contains("settings=single-copy:0,reduce:node%3Dreduce-scatter-gather;"),
        "{line}"
    );
    let digest = |s: &str| s.split(";digest=").nth(1).map(|d| d[..32].to_string());
    assert_ne!(digest(&line), digest(&stdout(&plain)));
    // The barrier's form is a setting like the others: in the plan, and in its digest.
    let mut rf = base.to_vec();
    rf.extend(["--barrier", "root-first"]);
    let o = topo_run(&rf);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("settings=barrier:root-first;"),
        "{}",
        stdout(&o)
    );
    assert_ne!(digest(&stdout(&o)), digest(&stdout(&plain)));
    args.extend(["--bcast", "reduce-scatter-gather"]);
    let bad = topo_run(&args);
    assert_eq!(bad.status.code(), Some(13), "{}", stderr(&bad));
    assert!(
        stderr(&bad).contains("scatter-allgather"),
        "{}",
        stderr(&bad)
    );
}

#[test]
fn the_progress_thread_flag_wins_over_the_environment() {
    let base = ["plan", "--job", "examples/jobs/paper.yaml", "--rank", "0"];
    let plan = |args: &[&str], env: Option<&str>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_topo-run"));
        c.args(base).args(["--format", "env"]).args(args);
        c.current_dir(root()).env_remove("TOPO_RUN_NETWORK_MAP");
        c.env_remove("TOPO_RUN_LEVELS")
            .env_remove("TOPO_RUN_PROGRESS");
        if let Some(v) = env {
            c.env("TOPO_RUN_PROGRESS", v);
        }
        let o = c.output().expect("run topo-run");
        assert!(o.status.success(), "{args:?} {env:?}: {}", stderr(&o));
        stdout(&o)
    };
    assert!(plan(&["--progress-thread"], Some("none")).contains("settings=progress:thread"));
    assert!(plan(&[], Some("thread")).contains("settings=progress:thread"));
    assert!(plan(&["--progress", "none"], None).contains("settings=progress:none"));
    assert!(!plan(&[], None).contains("progress:"));
}

#[test]
fn bad_runtime_settings_stop_the_launch_with_exit_13() {
    for (args, needle) in [
        (
            ["--bcast", "numa=ring"],
            "invalid setting bcast=\"numa=ring\": rule \"numa=ring\": unknown algorithm",
        ),
        (["--fragment", "100"], "multiple of 64"),
        (["--slots", "1"], "2 to 1024"),
        (
            ["--allreduce", "fast"],
            "rb, rab:rd, rab:ring, ring, \
             rabenseifner[:PIECE] or rd",
        ),
        (["--progress", "threads"], "must be none or thread"),
        (
            ["--barrier", "tree"],
            "use dissemination, root-first or flat",
        ),
    ] {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--", "sh", "-c", "echo APP-RAN"]);
        let o = topo_run(&all);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(13), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!stdout(&o).contains("APP-RAN"));
    }
}

#[test]
fn a_rules_file_goes_into_the_plan_and_digest_after_the_options() {
    let dir = std::env::temp_dir().join(format!("topo-run-rules-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let good = file(
        "good.rules",
        "topo-run-rules 1\nbcast inter<64K knomial:4\nfragment 16K\nsingle-copy 32K\n",
    );
    let job = "examples/jobs/paper.yaml";
    let base = ["plan", "--job", job, "--rank", "0", "--format", "env"];
    let with = |extra: &[&str]| {
        let mut args = base.to_vec();
        args.extend(extra);
        topo_run(&args)
    };
    let plain = with(&[]);
    let o = with(&["--rules", &good]);
    assert!(o.status.success(), "{}", stderr(&o));
    let line = stdout(&o);
    assert!(
        line.contains("settings=fragment:16K,single-copy:32K,bcast:inter%3C64K%3Dknomial%3A4;"),
        "{line}"
    );
    let digest = |s: &str| s.split(";digest=").nth(1).map(|d| d[..32].to_string());
    assert_ne!(digest(&line), digest(&stdout(&plain)));
    // The options come first: their value wins, their rules are tried first.
    let o = with(&["--rules", &good, "--fragment", "4K", "--bcast", "numa=flat"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let line = stdout(&o);
    assert!(
        line.contains("fragment:4K,bcast:numa%3Dflat%2Cinter%3C64K%3Dknomial%3A4,single-copy:32K;"),
        "{line}"
    );
    // A bad file: exit 13, the file and the line named; the program does not run.
    let bad = file(
        "bad.rules",
        "topo-run-rules 1\n# fine so far\nfragment 100\n",
    );
    let mut args = vec!["--rules", bad.as_str(), "--", "sh", "-c", "echo APP-RAN"];
    let o = topo_run(&args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(13), "{err}");
    assert!(
        err.contains("bad.rules: line 3: ") && err.contains("multiple of 64"),
        "{err}"
    );
    assert!(!stdout(&o).contains("APP-RAN"));
    // A missing file: exit 3.
    let missing = dir.join("missing.rules");
    args[1] = missing.to_str().unwrap();
    let o = topo_run(&args);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("cannot read rules file"),
        "{}",
        stderr(&o)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_mistyped_option_is_reported_as_one() {
    // Without `--`, an option topo-run does not know would be taken for the program.
    let o = topo_run(&["--levl", "node", "./app"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("unknown option `--levl`"), "{err}");
    assert!(err.contains("did you mean `--levels`?"), "{err}");
    // After `--` the program may look like an option: it is launched (and fails here
    // only for want of a launcher).
    let o = topo_run(&["--", "-weird"]);
    assert!(!stderr(&o).contains("unknown option"), "{}", stderr(&o));
}

#[test]
fn tune_checks_its_options_before_launching() {
    for (args, needle) in [
        (
            &["tune", "--ops", "bcast,frob"][..],
            "unknown collective \"frob\"",
        ),
        (&["tune", "--max", "12Q"][..], "--max"),
        (&["tune", "--min", "x"][..], "--min"),
        (&["tune", "--fragment", "100"][..], "multiple of 64"),
    ] {
        let o = topo_run(args);
        let err = stderr(&o);
        let code = if needle == "multiple of 64" { 13 } else { 2 };
        assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let o = topo_run(&["tune", "--help"]);
    let help = stdout(&o);
    for needle in [
        "--budget",
        "--output",
        "Examples:",
        "Exit codes:",
        "--rules",
    ] {
        assert!(help.contains(needle), "{needle}: {help}");
    }
}

#[test]
fn generate_writes_man_pages_and_completions() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("generated-man");
    let _ = std::fs::remove_dir_all(&dir);
    let o = topo_run(&["generate", "man", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    for page in [
        "topo-run.1",
        "topo-run-plan.1",
        "topo-run-tune.1",
        "topo-run.7",
    ] {
        let text = std::fs::read_to_string(dir.join(page)).unwrap();
        assert!(text.starts_with(".TH") || text.contains("\n.TH "), "{page}");
        assert!(stdout(&o).contains(page), "{page} not listed");
    }
    // The launch page carries --help's examples; section 7 the exit codes and variables.
    let one = std::fs::read_to_string(dir.join("topo-run.1")).unwrap();
    assert!(one.contains("cpu\\-bind=cores"), "{one}");
    let seven = std::fs::read_to_string(dir.join("topo-run.7")).unwrap();
    assert!(seven.contains("TOPO_RUN_PRELOAD_LIB") && seven.contains("EXIT STATUS"));

    for (shell, needle) in [
        ("bash", "_topo__run()"),
        ("zsh", "#compdef topo-run"),
        ("fish", "complete -c topo-run"),
    ] {
        let o = topo_run(&["generate", "completion", shell]);
        assert!(o.status.success(), "{shell}: {}", stderr(&o));
        assert!(stdout(&o).contains(needle), "{shell}");
        assert!(stdout(&o).contains("network-map"), "{shell}");
    }
    let o = topo_run(&["generate", "completion", "tcsh"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("invalid value 'tcsh'"),
        "{}",
        stderr(&o)
    );
}
