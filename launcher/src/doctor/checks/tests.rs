use std::collections::BTreeMap;

use super::super::Status;
use super::*;

#[test]
fn reads_slurms_answers() {
    let list = "MPI plugin types are...\n\tpmix\n\tnone\n\tcray_shasta\n\tpmi2\n\
                specific pmix plugin versions available: pmix_v4\n";
    let (plugins, versions) = parse_mpi_list(list);
    assert_eq!(plugins, ["pmix", "none", "cray_shasta", "pmi2"]);
    assert_eq!(versions, ["pmix_v4"]);

    let conf = "Configuration data as of 2026-11-25T08:00:00\nMpiDefault              = pmix\n\
                TaskPlugin              = task/affinity\nTaskPluginParam         = (null type)\n\
                SLURM_CONF              = /etc/slurm/slurm.conf\n\nCgroup Support Configuration:\n";
    let c = parse_config(conf);
    assert_eq!(c["TaskPlugin"], "task/affinity");
    assert_eq!(c["TaskPluginParam"], "(null type)");
    assert_eq!(c["SLURM_CONF"], "/etc/slurm/slurm.conf");
    assert!(!c.contains_key("Configuration data as of 2026-11-25T08:00:00"));
}

#[test]
fn binding_policies() {
    let with = |plugin: &str, param: &str| {
        let mut c = BTreeMap::new();
        c.insert("TaskPlugin".to_string(), plugin.to_string());
        c.insert("TaskPluginParam".to_string(), param.to_string());
        binding_policy(&Some(c)).status
    };
    assert_eq!(with("task/affinity", "(null type)"), Status::Ok);
    assert_eq!(with("task/affinity,task/cgroup", "Cores"), Status::Ok);
    assert_eq!(with("task/affinity", "None"), Status::Warn);
    assert_eq!(with("task/affinity", "none,Verbose"), Status::Warn);
    assert_eq!(with("task/cgroup", "(null type)"), Status::Warn);
    assert_eq!(with("task/none", "(null type)"), Status::Fail);
    assert_eq!(binding_policy(&None).status, Status::Warn);
}

#[test]
fn finds_mpi_libraries_in_the_linker_cache() {
    let text = "1234 libs found in cache `/etc/ld.so.cache'\n\
        \tlibmpich.so.12 (libc6,x86-64) => /lib/x86_64-linux-gnu/libmpich.so.12\n\
        \tlibmpi.so.40 (libc6,x86-64) => /lib/x86_64-linux-gnu/libmpi.so.40\n\
        \tlibmpi.so.12 (libc6,x86-64) => /lib/x86_64-linux-gnu/libmpi.so.12\n\
        \tlibmpi_mpifh.so.40 (libc6,x86-64) => /lib/x86_64-linux-gnu/libmpi_mpifh.so.40\n\
        \tlibmpi.so.40 (libc6) => /lib32/libmpi.so.40\n";
    let found = parse_ldconfig(text);
    let names: Vec<&str> = found.iter().map(|(s, _)| s.as_str()).collect();
    assert_eq!(names, ["libmpi.so.40", "libmpi.so.12"]);
    assert_eq!(found[0].1, "/lib/x86_64-linux-gnu/libmpi.so.40");
    let mpich_only = "\tlibmpich.so.12 (libc6,x86-64) => /usr/lib/libmpich.so.12\n";
    assert_eq!(parse_ldconfig(mpich_only)[0].0, "libmpich.so.12");
}

#[test]
fn ptrace_scopes() {
    assert!(ptrace_scope_meaning(None).1);
    assert!(ptrace_scope_meaning(Some(0)).1);
    for s in [1, 2, 3] {
        assert!(!ptrace_scope_meaning(Some(s)).1, "{s}");
    }
}

#[test]
fn a_missing_map_warns_and_a_map_missing_nodes_fails() {
    let dir = std::env::temp_dir().join(format!("doctor-map-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("slurm.conf");
    let nodes = Ok(vec![
        "node1".to_string(),
        "node2".to_string(),
        "node9".to_string(),
    ]);
    let f = network_map(None, &conf, &nodes);
    assert_eq!(f.status, Status::Warn, "{f:?}");
    assert!(f.text.contains("no topology.conf or topology.yaml"));
    std::fs::write(
        dir.join("topology.conf"),
        "SwitchName=leaf1 Nodes=node[1-2]\n",
    )
    .unwrap();
    let f = network_map(None, &conf, &nodes);
    assert_eq!(f.status, Status::Fail, "{f:?}");
    assert!(f.text.contains("1 of the cluster's 3 nodes are missing") && f.text.contains("node9"));
    let f = network_map(None, &conf, &Ok(vec!["node2".to_string()]));
    assert_eq!(f.status, Status::Ok, "{f:?}");
    std::fs::write(
        dir.join("topology.conf"),
        "SwitchName=leaf1 Switches=nowhere\n",
    )
    .unwrap();
    assert_eq!(network_map(None, &conf, &nodes).status, Status::Fail);
    // Slurm 23.11's topology.yaml, when there is no topology.conf.
    std::fs::remove_file(dir.join("topology.conf")).unwrap();
    let yaml = include_str!("../../../../slurm/maps/topology.yaml");
    std::fs::write(dir.join("topology.yaml"), yaml).unwrap();
    let two = Ok(vec!["node1".to_string(), "node2".to_string()]);
    let f = network_map(None, &conf, &two);
    assert_eq!(f.status, Status::Ok, "{f:?}");
    assert!(f.text.contains("topology.yaml"), "{}", f.text);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sizes_read_well() {
    assert_eq!(human(512), "512 B");
    assert_eq!(human(16 * 1024), "16.0 KiB");
    assert_eq!(human(3 << 30), "3.0 GiB");
}
