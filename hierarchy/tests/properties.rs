//! Property tests: parsers round-trip, and every built hierarchy satisfies its invariants.

use proptest::prelude::*;
use topo_hierarchy::{
    Digest, Hierarchy, IndexList, Job, LevelFilter, LevelName, LocalityString, ObjectKind,
    PlanGroup, RankPlan, build, domains_at, hostlist, job_from_str, ranges, restrict,
    union_of_levels,
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

/// The network map of the random jobs: two leaf switches of two nodes each, under a top.
fn two_switches() -> topo_hierarchy::NetworkMap {
    topo_hierarchy::NetworkMap::from_str(
        "SwitchName=a Nodes=n[1-2]\nSwitchName=b Nodes=n[3-4]\nSwitchName=top Switches=a,b",
    )
    .unwrap()
}

fn levels_filter(levels: &Option<Vec<&str>>) -> LevelFilter {
    levels.as_ref().map_or_else(LevelFilter::all, |l| {
        LevelFilter::parse(&l.join(",")).unwrap()
    })
}

/// A job of `nodes` nodes of `sockets` x `numa` x `cores` cores (two threads each) with
/// `l3` choosing the L3 caches per socket, filled to `rpn_frac` with `mapping` and
/// block or cyclic distribution, and its hierarchy under [`two_switches`] with `levels`.
#[allow(clippy::too_many_arguments)]
fn random_job(
    sockets: u32,
    numa: u32,
    cores: u32,
    l3: usize,
    nodes: u32,
    rpn_frac: f64,
    mapping: usize,
    cyclic: bool,
    levels: &Option<Vec<&str>>,
) -> (Job, Hierarchy) {
    let cps = numa * cores;
    let l3_per_socket = [1, numa, cps][l3];
    let capacity = sockets * cps * 2;
    let rpn = ((f64::from(capacity) * rpn_frac) as u32).max(1);
    let mapping = ["by-core", "by-hwthread", "by-numa", "by-socket", "by-l3"][mapping];
    let rpn = if mapping == "by-hwthread" {
        rpn
    } else {
        rpn.min(sockets * cps)
    };
    let job = format!(
        "layout: {{nodes: 'n[1-{nodes}]', ranks_per_node: {rpn}, mapping: {mapping},
           distribution: {}, hardware: {{sockets: {sockets}, numa_per_socket: {numa},
           cores_per_numa: {cores}, l3_per_socket: {l3_per_socket}, threads_per_core: 2}}}}",
        if cyclic { "cyclic" } else { "block" }
    );
    let job = job_from_str(&job).unwrap();
    let h = build(&job, Some(&two_switches()), &levels_filter(levels)).unwrap();
    (job, h)
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
        let (job, h) = random_job(sockets, numa, cores, l3, nodes, rpn_frac, mapping, cyclic, &levels);
        let map = two_switches();
        let filter = levels_filter(&levels);
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
    fn restricted_hierarchies_unite_exactly_the_ranks_that_share_a_domain(
        sockets in 1u32..3, numa in 1u32..3, cores in 1u32..5, l3 in 0usize..3,
        nodes in 1u32..5, rpn_frac in 0.1f64..1.0, mapping in 0usize..5, cyclic: bool,
        levels in prop::option::of(prop::sample::subsequence(
            vec!["core", "l1", "l2", "l3", "numa", "socket", "node", "switch1", "switch2"], 1..6)),
        seed: u64, keep in 0.05f64..1.0,
    ) {
        let (_, h) = random_job(sockets, numa, cores, l3, nodes, rpn_frac, mapping, cyclic, &levels);
        let domains: Vec<Vec<u32>> = (0..h.size()).map(|r| h.domains_of(r)).collect();
        // World in world's order: world's own groups.
        let world = restrict(h.levels(), &domains).unwrap();
        prop_assert_eq!(world.levels(), h.levels());
        for rank in 0..h.size() {
            prop_assert_eq!(world.plan_groups(rank), h.plan_groups(rank));
        }
        // A random subset in a random order.
        let comm = random_members(h.size(), seed, keep);
        let d: Vec<Vec<u32>> = comm.iter().map(|&w| domains[w as usize].clone()).collect();
        let r = restrict(h.levels(), &d).unwrap();
        check_restricted(&r, h.levels(), &d)?;
    }

    #[test]
    fn members_whose_plans_list_different_levels_restrict_as_one_job(
        sockets in 1u32..3, numa in 1u32..3, cores in 1u32..5, l3 in 0usize..3,
        nodes in 1u32..5, rpn_frac in 0.1f64..1.0, mapping in 0usize..5, cyclic: bool,
        seed: u64, keep in 0.05f64..1.0,
    ) {
        // The launcher plans a node from its own bindings: an intra-node level where every
        // group of the node has one member is not in that node's plans.
        let (job, h) = random_job(sockets, numa, cores, l3, nodes, rpn_frac, mapping, cyclic, &None);
        let full: Vec<Vec<u32>> = (0..h.size()).map(|r| h.domains_of(r)).collect();
        let node_has = |rank: u32, level: LevelName| {
            !matches!(level, LevelName::Intra(_))
                || (0..h.size()).any(|o| {
                    job.node_of(o) == job.node_of(rank) && h.groups_of(o).any(|g| g.level == level)
                })
        };
        let own: Vec<Vec<(LevelName, u32)>> = (0..h.size())
            .map(|r| {
                h.levels()
                    .iter()
                    .zip(&full[r as usize])
                    .filter(|(l, _)| node_has(r, **l))
                    .map(|(l, d)| (*l, *d))
                    .collect()
            })
            .collect();
        let comm = random_members(h.size(), seed, keep);
        let lists: Vec<Vec<LevelName>> = comm
            .iter()
            .map(|&w| own[w as usize].iter().map(|(l, _)| *l).collect())
            .collect();
        let union = union_of_levels(lists.iter().map(Vec::as_slice));
        let d: Vec<Vec<u32>> = comm.iter().map(|&w| domains_at(&own[w as usize], w, &union)).collect();
        let r = restrict(&union, &d).unwrap();
        check_restricted(&r, &union, &d)?;
        // The same groups as from the job-wide levels.
        let whole: Vec<Vec<u32>> = comm.iter().map(|&w| full[w as usize].clone()).collect();
        let expected = restrict(h.levels(), &whole).unwrap();
        for rank in 0..comm.len() as u32 {
            prop_assert_eq!(r.plan_groups(rank), expected.plan_groups(rank));
        }
        // Every level's code reads back.
        for l in h.levels() {
            prop_assert_eq!(LevelName::from_code(l.code()), Some(*l));
        }
    }

    #[test]
    fn decode_never_panics(text in "v4;[ -~]{0,120}") {
        let _ = RankPlan::decode(&text);
    }
}

/// A random subset of `0..size` (each rank kept with probability about `keep`, at least
/// one), in a random order.
fn random_members(size: u32, seed: u64, keep: f64) -> Vec<u32> {
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut comm: Vec<u32> = (0..size)
        .filter(|_| (next() % 1000) as f64 / 1000.0 < keep)
        .collect();
    if comm.is_empty() {
        comm.push((next() % u64::from(size)) as u32);
    }
    for i in (1..comm.len()).rev() {
        comm.swap(i, (next() % (i as u64 + 1)) as usize);
    }
    comm
}

/// The restriction's invariants, checked against the domains alone: groups of two or more
/// members, ascending (the lowest communicator rank leads), one per domain and level; and
/// after each level, two members are united (have the same representative) exactly when
/// they share that level's domain.
fn check_restricted(
    r: &topo_hierarchy::Restricted,
    levels: &[topo_hierarchy::LevelName],
    d: &[Vec<u32>],
) -> Result<(), TestCaseError> {
    let n = d.len();
    let mut rep: Vec<u32> = (0..n as u32).collect();
    let mut kept = Vec::new();
    for (l, &level) in levels.iter().enumerate() {
        let here: Vec<_> = r.groups().iter().filter(|g| g.level == level).collect();
        if !here.is_empty() {
            kept.push(level);
        }
        let mut seen = std::collections::HashSet::new();
        for g in &here {
            prop_assert!(g.members.len() >= 2, "a group of one at {}", level);
            prop_assert!(g.members.windows(2).all(|w| w[0] < w[1]), "{:?}", g.members);
            let domain = d[g.members[0] as usize][l];
            for &m in &g.members {
                prop_assert!(rep.contains(&m), "member {} does not represent anyone", m);
                prop_assert!(seen.insert(m), "member {} twice at {}", m, level);
                prop_assert_eq!(d[m as usize][l], domain);
            }
        }
        for x in rep.iter_mut() {
            if let Some(g) = here.iter().find(|g| g.members.contains(x)) {
                *x = g.members[0];
            }
        }
        for i in 0..n {
            for j in i + 1..n {
                prop_assert_eq!(
                    d[i][l] == d[j][l],
                    rep[i] == rep[j],
                    "ranks {} and {} at {}",
                    i,
                    j,
                    level
                );
            }
        }
    }
    prop_assert_eq!(r.levels(), &kept[..]);
    prop_assert!(rep.iter().all(|&x| x == 0), "not one tree: {:?}", rep);
    for rank in 0..n as u32 {
        let mine: Vec<_> = r.groups_of(rank).collect();
        prop_assert!(mine.iter().all(|g| g.members.contains(&rank)));
        prop_assert_eq!(
            mine.len(),
            r.groups()
                .iter()
                .filter(|g| g.members.contains(&rank))
                .count()
        );
    }
    Ok(())
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
        domains: vec![("numa".parse().unwrap(), 2), ("node".parse().unwrap(), 0)],
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
        (text.replace("v4;", "v3;"), "version"),
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
    let mut wrong = plan.clone();
    wrong.domains[0].1 = 3;
    let e = RankPlan::decode(&wrong.encode()).unwrap_err().to_string();
    assert!(e.contains("leader"), "{e}");
    let mut wrong = plan.clone();
    wrong.domains.reverse();
    let e = RankPlan::decode(&wrong.encode()).unwrap_err().to_string();
    assert!(e.contains("not bottom-up"), "{e}");
    let mut wrong = plan.clone();
    wrong.domains[1].1 = 3;
    let e = RankPlan::decode(&wrong.encode()).unwrap_err().to_string();
    assert!(e.contains("above rank"), "{e}");
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
