//! Hand-checked cluster shapes. Every expected plan below was worked out by hand from
//! DESIGN §4.

use topo_hierarchy::{Hierarchy, LevelFilter, NetworkMap, build, job_from_str};

/// The plan of `rank` as `["level:members", ...]`, members compacted.
fn plan(h: &Hierarchy, rank: u32) -> Vec<String> {
    h.groups_of(rank)
        .map(|g| format!("{}:{}", g.level, topo_hierarchy::ranges::encode(&g.members)))
        .collect()
}

fn hier(job: &str, map: Option<&str>, levels: Option<&str>) -> Hierarchy {
    let job = job_from_str(job).unwrap();
    let map = map.map(|m| NetworkMap::from_str(m).unwrap());
    let filter = levels.map_or_else(LevelFilter::all, |l| LevelFilter::parse(l).unwrap());
    build(&job, map.as_ref(), &filter).unwrap()
}

const PAPER_JOB: &str = "
layout:
  nodes: node[01-02,48]
  ranks_per_node: 36
  hardware: {sockets: 2, numa_per_socket: 1, cores_per_numa: 18}
";
const PAPER_MAP: &str = "
switches:
  sw11: {nodes: 'node[01-16]'}
  sw12: {nodes: 'node[17-32]'}
  sw13: {nodes: 'node[33-48]'}
  sw14: {nodes: 'node[49-64]'}
";

#[test]
fn paper_worked_example() {
    let h = hier(PAPER_JOB, Some(PAPER_MAP), None);
    assert_eq!(h.size(), 108);
    assert_eq!(
        plan(&h, 0),
        ["numa:0-17", "node:0,18", "switch1:0,36", "world:0,72"]
    );
    assert_eq!(plan(&h, 1), ["numa:0-17"]);
    assert_eq!(plan(&h, 36), ["numa:36-53", "node:36,54", "switch1:0,36"]);
    assert_eq!(plan(&h, 72), ["numa:72-89", "node:72,90", "world:0,72"]);
    assert_eq!(plan(&h, 90), ["numa:90-107", "node:72,90"]);
    let levels: Vec<String> = h.levels().iter().map(ToString::to_string).collect();
    assert_eq!(levels, ["numa", "node", "switch1", "world"]);
}

#[test]
fn paper_example_with_levels_switched_off() {
    let h = hier(PAPER_JOB, Some(PAPER_MAP), Some("node,switch1"));
    assert_eq!(plan(&h, 0), ["node:0-35", "switch1:0,36", "world:0,72"]);
    // Without `node`, the NUMA groups' leaders meet at the leaf switch.
    let h = hier(PAPER_JOB, Some(PAPER_MAP), Some("numa,switch1"));
    assert_eq!(plan(&h, 18), ["numa:18-35", "switch1:0-54:18"]);
    assert_eq!(plan(&h, 0), ["numa:0-17", "switch1:0-54:18", "world:0,72"]);
    // Only `world`: one flat group.
    let h = hier(PAPER_JOB, Some(PAPER_MAP), Some("world"));
    assert_eq!(plan(&h, 5), ["world:0-107"]);
}

#[test]
fn map_by_numa() {
    let h = hier(
        "layout: {nodes: n1, ranks_per_node: 8, mapping: by-numa,
                  hardware: {sockets: 2, numa_per_socket: 2, cores_per_numa: 2}}",
        None,
        None,
    );
    assert_eq!(plan(&h, 0), ["numa:0,4", "socket:0,1", "node:0,2"]);
    assert_eq!(plan(&h, 1), ["numa:1,5", "socket:0,1"]);
    assert_eq!(plan(&h, 2), ["numa:2,6", "socket:2,3", "node:0,2"]);
    assert_eq!(plan(&h, 4), ["numa:0,4"]);
}

#[test]
fn amd_l3_per_ccx() {
    let h = hier(
        "layout: {nodes: 'n[1-2]', ranks_per_node: 16,
                  hardware: {sockets: 1, cores_per_numa: 16, l3_per_socket: 4}}",
        None,
        None,
    );
    // numa == socket == the whole node: dropped in favour of `node`.
    assert_eq!(plan(&h, 0), ["l3:0-3", "node:0-12:4", "world:0,16"]);
    assert_eq!(plan(&h, 5), ["l3:4-7"]);
    assert_eq!(plan(&h, 20), ["l3:20-23", "node:16-28:4"]);
}

#[test]
fn intel_sub_numa_clustering() {
    let h = hier(
        "layout: {nodes: n1, ranks_per_node: 16,
                  hardware: {sockets: 2, numa_per_socket: 2, cores_per_numa: 4}}",
        None,
        None,
    );
    // L3 spans the socket, so l3 == socket and the name `socket` wins.
    assert_eq!(plan(&h, 0), ["numa:0-3", "socket:0,4", "node:0,8"]);
    assert_eq!(plan(&h, 12), ["numa:12-15", "socket:8,12"]);
    let levels: Vec<String> = h.levels().iter().map(ToString::to_string).collect();
    assert_eq!(levels, ["numa", "socket", "node"]);
}

#[test]
fn smt_ranks_on_hardware_threads() {
    let h = hier(
        "layout: {nodes: n1, ranks_per_node: 4, mapping: by-hwthread,
                  hardware: {sockets: 1, cores_per_numa: 2, threads_per_core: 2}}",
        None,
        None,
    );
    // core == l2 == l1 here; `core` names the partition.
    assert_eq!(plan(&h, 0), ["core:0,1", "node:0,2"]);
    assert_eq!(plan(&h, 1), ["core:0,1"]);
    assert_eq!(plan(&h, 3), ["core:2,3"]);
}

#[test]
fn multi_tier_topology_conf() {
    let map = "SwitchName=l1 Nodes=n[1-2]\nSwitchName=l2 Nodes=n[3-4]\nSwitchName=l3 Nodes=n[5-6]\n\
               SwitchName=agg1 Switches=l[1-2]\nSwitchName=agg2 Switches=l3\n\
               SwitchName=core Switches=agg[1-2]\n";
    let h = hier(
        "layout: {nodes: 'n[1-6]', ranks_per_node: 2,
                  hardware: {sockets: 1, cores_per_numa: 2}}",
        Some(map),
        None,
    );
    assert_eq!(
        plan(&h, 0),
        ["node:0,1", "switch1:0,2", "switch2:0,4", "switch3:0,8"]
    );
    assert_eq!(plan(&h, 8), ["node:8,9", "switch1:8,10", "switch3:0,8"]);
    assert_eq!(plan(&h, 4), ["node:4,5", "switch1:4,6", "switch2:0,4"]);
    assert_eq!(plan(&h, 11), ["node:10,11"]);
    // Keeping only the spine: leaf and aggregation levels vanish, world is not needed.
    let h = hier(
        "layout: {nodes: 'n[1-6]', ranks_per_node: 2, hardware: {sockets: 1, cores_per_numa: 2}}",
        Some(map),
        Some("node,switch3"),
    );
    assert_eq!(plan(&h, 0), ["node:0,1", "switch3:0-10:2"]);
}

#[test]
fn cyclic_placement_over_nodes() {
    let h = hier(
        "layout: {nodes: 'a,b', ranks_per_node: 4, distribution: cyclic,
                  hardware: {sockets: 2, cores_per_numa: 2}}",
        None,
        None,
    );
    assert_eq!(plan(&h, 0), ["numa:0,2", "node:0,4", "world:0,1"]);
    assert_eq!(plan(&h, 1), ["numa:1,3", "node:1,5", "world:0,1"]);
    assert_eq!(plan(&h, 6), ["numa:4,6"]);
}

#[test]
fn rank_bound_to_two_cores() {
    let h = hier(
        "ranks:
          - {node: n1, locality: 'SK0:L30:L20-1:L10-1:CR0-1:HT0-1:NM0'}
          - {node: n1, locality: 'SK0:L30:L22:L12:CR2:HT2:NM0'}
          - {node: n1, locality: 'SK1:L31:L24:L14:CR4:HT4:NM1'}
          - {node: n1, locality: 'SK1:L31:L25:L15:CR5:HT5:NM1'}",
        None,
        None,
    );
    // core, l1 and l2 are unusable (rank 0 spans two); l3 == numa == socket.
    assert_eq!(plan(&h, 0), ["numa:0,1", "node:0,2"]);
    assert_eq!(plan(&h, 3), ["numa:2,3"]);
}

#[test]
fn node_of_unbound_ranks() {
    let h = hier(
        "ranks:
          - {node: n1, locality: 'SK0:CR0:NM0'}
          - {node: n1, locality: 'SK0:CR1:NM0'}
          - {node: n1, locality: 'SK1:CR2:NM1'}
          - {node: n1, locality: 'SK1:CR3:NM1'}
          - {node: n2}
          - {node: n2}
          - {node: n2, locality: 'SK0:CR0:NM0'}
          - {node: n2}",
        None,
        None,
    );
    assert_eq!(plan(&h, 0), ["numa:0,1", "node:0,2", "world:0,4"]);
    assert_eq!(plan(&h, 4), ["node:4-7", "world:0,4"]);
    assert_eq!(plan(&h, 6), ["node:4-7"]);
}

#[test]
fn node_switched_off_keeps_whole_node_level() {
    let h = hier(
        "layout: {nodes: 'n[1-2]', ranks_per_node: 4, hardware: {sockets: 1, cores_per_numa: 4}}",
        None,
        Some("numa"),
    );
    assert_eq!(plan(&h, 0), ["numa:0-3", "world:0,4"]);
    // And `--levels numa,node` where NUMA == socket still groups by NUMA.
    let h = hier(PAPER_JOB, None, Some("numa,node"));
    assert_eq!(plan(&h, 0), ["numa:0-17", "node:0,18", "world:0-72:36"]);
    let h = hier(PAPER_JOB, None, Some("socket,node"));
    assert_eq!(plan(&h, 0), ["socket:0-17", "node:0,18", "world:0-72:36"]);
}

#[test]
fn heterogeneous_nodes_merge_level_lists() {
    let h = hier(
        "ranks:
          - {node: a, locality: 'SK0:L30:NM0:CR0'}
          - {node: a, locality: 'SK0:L30:NM0:CR1'}
          - {node: a, locality: 'SK0:L31:NM0:CR2'}
          - {node: a, locality: 'SK0:L31:NM0:CR3'}
          - {node: a, locality: 'SK1:L32:NM1:CR4'}
          - {node: a, locality: 'SK1:L32:NM1:CR5'}
          - {node: b, locality: 'SK0:L30:NM0:CR0'}
          - {node: b, locality: 'SK0:L30:NM1:CR1'}
          - {node: b, locality: 'SK1:L31:NM2:CR2'}
          - {node: b, locality: 'SK1:L31:NM3:CR3'}",
        None,
        None,
    );
    // Node a: l3 (3 groups) below numa (2). Node b: numa (4, singletons: dropped), l3 == socket.
    assert_eq!(plan(&h, 0), ["l3:0,1", "numa:0,2", "node:0,4", "world:0,6"]);
    assert_eq!(plan(&h, 6), ["socket:6,7", "node:6,8", "world:0,6"]);
    let levels: Vec<String> = h.levels().iter().map(ToString::to_string).collect();
    assert_eq!(levels, ["l3", "numa", "socket", "node", "world"]);
}

#[test]
fn missing_node_is_an_error() {
    let job = job_from_str(PAPER_JOB).unwrap();
    let map = NetworkMap::from_str("SwitchName=s Nodes=node[01-02]").unwrap();
    let e = build(&job, Some(&map), &LevelFilter::all()).unwrap_err();
    assert_eq!(
        e,
        topo_hierarchy::Error::NodeNotInMap {
            node: "node48".into(),
            others: 0
        }
    );
    assert!(e.to_string().contains("node48"), "{e}");
}

#[test]
fn bad_job_descriptions() {
    for (text, needle) in [
        ("ranks: []", "empty"),
        ("{}", "expected a `ranks:`"),
        ("ranks: [{node: 'bad name'}]", "invalid node name"),
        ("ranks: [{node: n1, locality: 'SK0:ZZ1'}]", "rank 0"),
        ("ranks: [{node: n1, colour: red}]", "colour"),
        (
            "layout: {nodes: 'n[1-2]', ranks_per_node: 5, hardware: {sockets: 1, cores_per_numa: 4}}",
            "exceeds",
        ),
        (
            "layout: {nodes: 'n[1-', ranks_per_node: 1, hardware: {sockets: 1, cores_per_numa: 4}}",
            "nodes",
        ),
        (
            "layout: {nodes: 'n1,n1', ranks_per_node: 1, hardware: {sockets: 1, cores_per_numa: 4}}",
            "twice",
        ),
        (
            "layout: {nodes: n1, ranks_per_node: 1, hardware: {sockets: 0, cores_per_numa: 4}}",
            "sockets",
        ),
        (
            "layout: {nodes: n1, ranks_per_node: 1, mapping: by-magic, hardware: {sockets: 1, cores_per_numa: 4}}",
            "by-magic",
        ),
        (
            "layout: {nodes: n1, ranks_per_node: 2, ntasks: 3, hardware: {sockets: 1, cores_per_numa: 4}}",
            "ntasks",
        ),
        ("ranks: [", ""),
        // Limits, checked before anything is expanded or allocated.
        (
            "layout: {nodes: 'n[00000001-16777216]', ranks_per_node: 127, hardware: {sockets: 2, cores_per_numa: 64}}",
            "at most 1048576",
        ),
        (
            "layout: {nodes: 'n[1-1048576]', ranks_per_node: 17, hardware: {sockets: 1, cores_per_numa: 32}}",
            "at most 16777216",
        ),
        (
            r#"{"ranks": [{"node": "n1"}, {"node": "bad name"}]}"#,
            "rank 1",
        ),
        (r#"{"ranks": [{"node": "n1", "colour": 1}]}"#, "colour"),
        (r#"{"ranks": []}"#, "empty"),
        (r#"{"ranks": [{"node": "n1"}"#, "EOF"),
    ] {
        let e = job_from_str(text).unwrap_err();
        assert_eq!(e.kind(), topo_hierarchy::ErrorKind::Job, "{text}");
        assert!(e.to_string().contains(needle), "{text}: {e}");
    }
}

#[test]
fn json_job_files_parse() {
    let job = job_from_str(
        r#"{"ranks": [{"node": "n1", "locality": "SK0:CR0:NM0"}, {"node": "n1", "locality": "SK0:CR1:NM0"}]}"#,
    )
    .unwrap();
    assert_eq!(job.size(), 2);
    // JSON and YAML describe the same job alike.
    let json = r#" {"ranks": [{"node": "n1", "locality": "SK0:CR0:NM0"}, {"node": "n2"}]}"#;
    let yaml = "ranks:\n  - {node: n1, locality: 'SK0:CR0:NM0'}\n  - {node: n2}\n";
    let (a, b) = (job_from_str(json).unwrap(), job_from_str(yaml).unwrap());
    assert_eq!(a.size(), b.size());
    assert_eq!(
        topo_hierarchy::Digest::of_job(&a, None, &LevelFilter::all(), ""),
        topo_hierarchy::Digest::of_job(&b, None, &LevelFilter::all(), "")
    );
}

#[test]
fn a_job_file_listing_more_yaml_nodes_than_the_parser_default_is_read() {
    // 60,000 ranks are some 300,000 YAML nodes, past the YAML parser's default budget of
    // 250,000 that stopped explicit job files of real size.
    let mut yaml = String::from("ranks:\n");
    for r in 0..60_000 {
        yaml.push_str(&format!(
            "  - {{node: n{}, locality: 'SK0:CR{}:NM0'}}\n",
            r / 64,
            r % 64
        ));
    }
    assert_eq!(job_from_str(&yaml).unwrap().size(), 60_000);
}

#[test]
fn million_rank_job_plans_stay_under_4_kib() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples");
    let job = std::fs::read_to_string(format!("{root}/jobs/scale-1m.yaml")).unwrap();
    let map = std::fs::read_to_string(format!("{root}/maps/scale-1m.conf")).unwrap();
    let job = job_from_str(&job).unwrap();
    let map = NetworkMap::from_str(&map).unwrap();
    let h = build(&job, Some(&map), &LevelFilter::all()).unwrap();
    assert_eq!(h.size(), 1 << 20);
    assert_eq!(
        plan(&h, 0),
        [
            "numa:0-15",
            "socket:0-48:16",
            "node:0,64",
            "switch1:0-3968:128",
            "switch2:0-61440:4096",
            "world:0-983040:65536"
        ]
    );
    let digest = topo_hierarchy::Digest::of_job(&job, Some(&map), &LevelFilter::all(), "");
    // Leaders carry the most groups; every 16th rank leads a NUMA group.
    let longest = (0..h.size())
        .step_by(16)
        .map(|rank| {
            h.rank_plan(
                &job,
                rank,
                "/topo-run.4294967295.4294967295.node8192",
                digest,
                Vec::new(),
            )
            .encode()
            .len()
        })
        .max()
        .unwrap();
    assert!(longest < 4096, "longest encoded plan is {longest} bytes");
}

/// `near_peers` of `rank`, as the ranks it marks near.
fn near(job: &str, rank: u32) -> Vec<u32> {
    let j = job_from_str(job).unwrap();
    let h = build(&j, None, &LevelFilter::all()).unwrap();
    let digest = topo_hierarchy::Digest::of_job(&j, None, &LevelFilter::all(), "");
    let p = h.rank_plan(&j, rank, "/shm", digest, Vec::new());
    p.peers
        .iter()
        .zip(p.near_peers())
        .filter_map(|(&r, near)| near.then_some(r))
        .collect()
}

#[test]
fn near_peers_are_the_lowest_group_inside_the_node() {
    let numa = "layout: {nodes: 'n[1-2]', ranks_per_node: 16,
                hardware: {sockets: 2, numa_per_socket: 2, cores_per_numa: 4}}";
    assert_eq!(near(numa, 0), [0, 1, 2, 3]);
    assert_eq!(near(numa, 6), [4, 5, 6, 7]);
    assert_eq!(near(numa, 29), [28, 29, 30, 31]);
    // One socket, one NUMA node, one L3: no level below `node`, every rank is near.
    let flat = "layout: {nodes: n1, ranks_per_node: 2, hardware: {sockets: 1, cores_per_numa: 2}}";
    assert_eq!(near(flat, 1), [0, 1]);
    // A rank alone at the levels below `node` (its group of one is not recorded): near
    // only itself, told apart from a node without such levels by `node`'s members.
    let alone = topo_hierarchy::RankPlan {
        rank: 2,
        peers: vec![0, 1, 2],
        groups: vec![topo_hierarchy::PlanGroup {
            level: topo_hierarchy::LevelName::Node,
            members: vec![0, 2],
        }],
        domains: vec![(topo_hierarchy::LevelName::Node, 0)],
        ..topo_hierarchy::RankPlan::decode(&flat_plan()).unwrap()
    };
    assert_eq!(alone.near_peers(), [false, false, true]);
}

/// Any valid encoded plan, to fill the fields a test does not set.
fn flat_plan() -> String {
    let j = job_from_str(
        "layout: {nodes: n1, ranks_per_node: 1, hardware: {sockets: 1, cores_per_numa: 1}}",
    )
    .unwrap();
    let h = build(&j, None, &LevelFilter::all()).unwrap();
    let digest = topo_hierarchy::Digest::of_job(&j, None, &LevelFilter::all(), "");
    h.rank_plan(&j, 0, "/shm", digest, Vec::new()).encode()
}

/// 5 ranks on 2 nodes of 2 cores each, 3 and 2 ranks (`srun -O`): node1's plans list
/// `core` (ranks 0 and 2 share core 0), node2's do not. A communicator over both nodes, in
/// reversed order, unites the members' lists and restricts as one job.
#[test]
fn members_with_different_level_lists_restrict_together() {
    use topo_hierarchy::{LevelName, domains_at, restrict, union_of_levels};
    let core = LevelName::Intra(topo_hierarchy::IntraLevel::Core);
    let (node, world) = (LevelName::Node, LevelName::World);
    let own: Vec<Vec<(LevelName, u32)>> = vec![
        vec![(core, 0), (node, 0), (world, 0)],
        vec![(core, 1), (node, 0), (world, 0)],
        vec![(core, 0), (node, 0), (world, 0)],
        vec![(node, 3), (world, 0)],
        vec![(node, 3), (world, 0)],
    ];
    let comm = [4u32, 3, 2, 1, 0];
    let lists: Vec<Vec<LevelName>> = comm
        .iter()
        .map(|&w| own[w as usize].iter().map(|&(l, _)| l).collect())
        .collect();
    let levels = union_of_levels(lists.iter().map(Vec::as_slice));
    assert_eq!(levels, [core, node, world]);
    let domains: Vec<Vec<u32>> = comm
        .iter()
        .map(|&w| domains_at(&own[w as usize], w, &levels))
        .collect();
    assert_eq!(
        domains[0],
        [4, 3, 0],
        "a level its plan lacks: its own rank below"
    );
    let r = restrict(&levels, &domains).unwrap();
    let groups: Vec<(LevelName, Vec<u32>)> = r
        .groups()
        .iter()
        .map(|g| (g.level, g.members.clone()))
        .collect();
    assert_eq!(
        groups,
        [
            (core, vec![2, 4]),
            (node, vec![0, 1]),
            (node, vec![2, 3]),
            (world, vec![0, 2]),
        ]
    );
    // The old way (every member's own list) could not even line the rows up.
    let mixed: Vec<Vec<u32>> = comm
        .iter()
        .map(|&w| own[w as usize].iter().map(|&(_, d)| d).collect())
        .collect();
    assert!(restrict(&levels, &mixed).is_err());
}
