//! Property tests: parsers round-trip, and every built hierarchy satisfies its invariants.

use proptest::prelude::*;
use topo_hierarchy::{
    Digest, IndexList, LevelFilter, LocalityString, ObjectKind, PlanGroup, RankPlan, build,
    hostlist, job_from_str, ranges,
};

fn index_list() -> impl Strategy<Value = IndexList> {
    prop::collection::vec(0u32..300, 1..6).prop_map(IndexList::from_indices)
}

fn locality() -> impl Strategy<Value = LocalityString> {
    prop::collection::vec(prop::option::of(index_list()), 7).prop_map(|sets| {
        let mut l = LocalityString::new();
        for (kind, set) in ObjectKind::ALL.into_iter().zip(sets) {
            if let Some(set) = set {
                l.set(kind, set);
            }
        }
        l
    })
}

fn host_name() -> impl Strategy<Value = String> {
    (
        "[a-c]{1,2}(-[a-c])?",
        prop::option::of((0u32..40, 0usize..4)),
    )
        .prop_map(|(p, n)| match n {
            None => p,
            Some((n, w)) => format!("{p}{n:0w$}"),
        })
}

proptest! {
    #[test]
    fn locality_round_trips(l in locality()) {
        let text = l.to_string();
        prop_assume!(!text.is_empty());
        prop_assert_eq!(LocalityString::parse(&text).unwrap(), l.clone());
        prop_assert_eq!(LocalityString::parse(&format!("hwloc:{text}")).unwrap(), l);
    }

    #[test]
    fn hostlist_compress_expand_round_trips(names in prop::collection::vec(host_name(), 1..40)) {
        let expr = hostlist::compress(&names);
        prop_assert_eq!(hostlist::expand(&expr).unwrap(), names, "{}", expr);
    }

    #[test]
    fn ranges_round_trip(mut v in prop::collection::vec(0u32..5000, 0..200)) {
        v.sort_unstable();
        v.dedup();
        let text = ranges::encode(&v);
        if v.is_empty() {
            prop_assert_eq!(text, "");
        } else {
            prop_assert_eq!(ranges::decode(&text, 1000).unwrap(), v);
        }
    }

    #[test]
    fn plans_round_trip_and_connect_every_rank(
        sockets in 1u32..3, numa in 1u32..3, cores in 1u32..5, l3 in 0usize..3,
        nodes in 1u32..5, rpn_frac in 0.1f64..1.0, mapping in 0usize..5, cyclic: bool,
        levels in prop::option::of(prop::sample::subsequence(
            vec!["core", "l1", "l2", "l3", "numa", "socket", "node", "switch1", "switch2"], 1..6)),
        setting in "[ -~]{0,12}",
    ) {
        let cps = numa * cores;
        let l3_per_socket = [1, numa, cps][l3];
        let capacity = sockets * cps * 2;
        let rpn = ((f64::from(capacity) * rpn_frac) as u32).max(1);
        let mapping = ["by-core", "by-hwthread", "by-numa", "by-socket", "by-l3"][mapping];
        let rpn = if mapping == "by-hwthread" { rpn } else { rpn.min(sockets * cps) };
        let job = format!(
            "layout: {{nodes: 'n[1-{nodes}]', ranks_per_node: {rpn}, mapping: {mapping},
               distribution: {}, hardware: {{sockets: {sockets}, numa_per_socket: {numa},
               cores_per_numa: {cores}, l3_per_socket: {l3_per_socket}, threads_per_core: 2}}}}",
            if cyclic { "cyclic" } else { "block" });
        let job = job_from_str(&job).unwrap();
        let map = topo_hierarchy::NetworkMap::from_str(
            "SwitchName=a Nodes=n[1-2]\nSwitchName=b Nodes=n[3-4]\nSwitchName=top Switches=a,b").unwrap();
        let filter = levels.map_or_else(LevelFilter::all, |l| LevelFilter::parse(&l.join(",")).unwrap());
        let h = build(&job, Some(&map), &filter).unwrap();
        let digest = Digest::of_job(&job, Some(&map), &filter, "");
        for rank in 0..h.size() {
            let shm = format!("/topo-run.1.0.{}", job.node_name(job.node_of(rank)));
            let plan = h.rank_plan(&job, rank, &shm, digest, vec![("k".into(), setting.clone())]);
            plan.validate().unwrap();
            let text = plan.encode();
            prop_assert_eq!(RankPlan::decode(&text).unwrap(), plan.clone());
            // Following leaders upwards reaches rank 0, the root of everything.
            let mut cur = rank;
            let mut steps = 0;
            while cur != 0 {
                let g = h.groups_of(cur).last();
                prop_assert!(g.is_some(), "rank {} is cut off", cur);
                let g = g.unwrap();
                prop_assert!(g.members[0] < cur, "rank {} leads its top group", cur);
                cur = g.members[0];
                steps += 1;
                prop_assert!(steps < 64);
            }
        }
    }

    #[test]
    fn decode_never_panics(text in "v3;[ -~]{0,120}") {
        let _ = RankPlan::decode(&text);
    }
}

#[test]
fn tampered_plans_are_rejected() {
    let plan = RankPlan {
        rank: 3,
        size: 8,
        node: "n1".into(),
        local_rank: 3,
        local_size: 4,
        peers: vec![0, 1, 2, 3],
        shm_name: "/topo-run.9.0.n1".into(),
        digest: "00112233445566778899aabbccddeeff".parse().unwrap(),
        node_plan: 0x0123_4567_89ab_cdef,
        settings: vec![("reduce".into(), "numa=knomial:4,node=flat".into())],
        groups: vec![PlanGroup {
            level: "numa".parse().unwrap(),
            members: vec![2, 3],
        }],
        top: Some("node".parse().unwrap()),
    };
    let text = plan.encode();
    assert!(
        text.contains("reduce:numa%3Dknomial%3A4%2Cnode%3Dflat"),
        "{text}"
    );
    assert_eq!(RankPlan::decode(&text).unwrap(), plan);
    let cases = [
        (text.replace("rank=3", "rank=2"), "checksum"),
        (text[..text.len() - 3].to_string(), "checksum"),
        (text.replace("v3;", "v2;"), "version"),
        ("garbage".to_string(), "version"),
        (text.split(";check=").next().unwrap().to_string(), "check"),
    ];
    for (bad, needle) in cases {
        let e = RankPlan::decode(&bad).unwrap_err().to_string();
        assert!(e.contains(needle), "{bad}: {e}");
    }
    // Structurally wrong but correctly checksummed plans.
    let mut wrong = plan.clone();
    wrong.groups[0].members = vec![2, 4];
    let e = RankPlan::decode(&wrong.encode()).unwrap_err().to_string();
    assert!(e.contains("not a member"), "{e}");
    let mut wrong = plan.clone();
    wrong.groups.push(PlanGroup {
        level: "node".parse().unwrap(),
        members: vec![0, 3],
    });
    let e = RankPlan::decode(&wrong.encode()).unwrap_err().to_string();
    assert!(e.contains("does not lead"), "{e}");
    let mut wrong = plan.clone();
    wrong.peers = vec![0, 1, 2, 4];
    let e = RankPlan::decode(&wrong.encode()).unwrap_err().to_string();
    assert!(e.contains("rank list"), "{e}");
    let mut wrong = plan;
    wrong.rank = 9;
    let e = RankPlan::decode(&wrong.encode()).unwrap_err().to_string();
    assert!(e.contains("below size"), "{e}");
}

#[test]
fn ranks_of_a_node_planned_from_different_localities_have_different_node_plans() {
    use topo_hierarchy::{Digest, Job, LevelFilter, build};
    let job = |locs: &[Option<&str>]| {
        let mut j = Job::new();
        for l in locs {
            j.push_rank("n1", l.map(|l| l.parse().unwrap())).unwrap();
        }
        j
    };
    let bound = [
        Some("SK0:NM0:CR0"),
        Some("SK0:NM0:CR1"),
        Some("SK1:NM1:CR2"),
        Some("SK1:NM1:CR3"),
    ];
    let a = job(&bound);
    let b = job(&[None, None, None, None]);
    let plan = |j: &Job, r: u32| {
        let h = build(j, None, &LevelFilter::default()).unwrap();
        h.rank_plan(j, r, "/x", Digest([0; 16]), vec![])
    };
    // Every rank of a node computes the same node plan from the same localities (rank 1
    // is in no intra-node group of its own leadership, yet agrees with rank 0).
    assert_eq!(plan(&a, 0).node_plan, plan(&a, 1).node_plan);
    assert_eq!(plan(&a, 1).node_plan, plan(&a, 3).node_plan);
    // A task that dropped the intra-node levels (unbound) disagrees with its neighbours.
    assert_ne!(plan(&a, 0).node_plan, plan(&b, 0).node_plan);
}
