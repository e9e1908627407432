//! The algorithms over the `sim` transport: random hierarchies of 1..64 ranks, random
//! per-level algorithms and pipeline chunks, every result against a simple reference.

use std::sync::Arc;
use std::thread;

use proptest::prelude::*;
use topo_hierarchy::remap::partition::Placement;
use topo_hierarchy::settings::TopAlg;
use topo_hierarchy::{
    Digest, Job, LevelFilter, NetworkMap, RankPlan, Settings, build, job_from_str,
};
use topo_runtime::combine::sum_i64;
use topo_runtime::nonblocking::{Engine, iallgather};
use topo_runtime::reduce::Scratch;
use topo_runtime::transport::sim::{INTER_NODE, INTER_SWITCH, SimFabric, SimNet, Traffic};
use topo_runtime::view::View;
use topo_runtime::{allgather, allreduce, barrier, bcast, reduce};

use crate::nonblocking::{finish, schedule};

/// Every rank's plan for a generated layout.
pub(crate) fn plans(
    nodes: u32,
    rpn: u32,
    sockets: u32,
    levels: &str,
    cyclic: bool,
) -> Vec<RankPlan> {
    let job = job_from_str(&format!(
        "layout: {{nodes: 'n[1-{nodes}]', ranks_per_node: {rpn}, mapping: by-core, \
         distribution: {}, hardware: {{sockets: {sockets}, numa_per_socket: 2, \
         cores_per_numa: 4, l3_per_socket: 1, threads_per_core: 1}}}}",
        if cyclic { "cyclic" } else { "block" }
    ))
    .unwrap();
    let map = NetworkMap::from_str(
        "SwitchName=a Nodes=n[1-2]\nSwitchName=b Nodes=n[3-4]\nSwitchName=top Switches=a,b",
    )
    .unwrap();
    plans_of(&job, Some(&map), levels)
}

/// Every rank's plan of `job`, with `map` and the `levels` kept.
pub(crate) fn plans_of(job: &Job, map: Option<&NetworkMap>, levels: &str) -> Vec<RankPlan> {
    let filter = LevelFilter::parse(levels).unwrap();
    let h = build(job, map, &filter).unwrap();
    let digest = Digest::of_job(job, map, &filter, "");
    (0..h.size())
        .map(|r| h.rank_plan(job, r, "/sim", digest, vec![]))
        .collect()
}

/// Rank `rank`'s view, with pipelining agreed as `Topo::from_env` agrees it over MPI: on
/// if any rank has two levels.
pub(crate) fn view(plans: &[RankPlan], rank: u32) -> View {
    let mut view = View::from_plan(&plans[rank as usize]);
    view.pipeline = plans.iter().any(|p| p.groups.len() > 1);
    view
}

/// Runs `f` on one thread per rank; returns each rank's output and the traffic.
pub(crate) fn run<F>(
    plans: &[RankPlan],
    f: F,
) -> (Vec<Vec<i64>>, std::collections::BTreeMap<String, Traffic>)
where
    F: Fn(&View, &mut SimFabric) -> Vec<i64> + Sync,
{
    run_on(SimNet::new(node_of(plans)), plans, f)
}

/// The ranks of `plans` that reach the network, in their meeting order.
pub(crate) fn network_of(plans: &[RankPlan]) -> Vec<u32> {
    let reaching: Vec<u32> = (0..plans.len() as u32)
        .filter(|&r| view(plans, r).reaches_network())
        .collect();
    View::meeting_order(&reaching, |r| view(plans, r).switch_label())
}

/// As [`run`], every rank on its view over the network ([`View::over_network`]),
/// the view Allreduce and Barrier run on.
pub(crate) fn run_over_leaders<F>(
    plans: &[RankPlan],
    f: F,
) -> (Vec<Vec<i64>>, std::collections::BTreeMap<String, Traffic>)
where
    F: Fn(&View, &mut SimFabric) -> Vec<i64> + Sync,
{
    let network = network_of(plans);
    run_views(
        SimNet::new(node_of(plans)),
        plans,
        |r| view(plans, r).over_network(&network),
        f,
    )
}

/// As [`run`], on the network `net`.
pub(crate) fn run_on<F>(
    net: Arc<SimNet>,
    plans: &[RankPlan],
    f: F,
) -> (Vec<Vec<i64>>, std::collections::BTreeMap<String, Traffic>)
where
    F: Fn(&View, &mut SimFabric) -> Vec<i64> + Sync,
{
    run_views(net, plans, |r| view(plans, r), f)
}

/// As [`run_on`], rank `r` on the view `view_of(r)`.
pub(crate) fn run_views<F, V>(
    net: Arc<SimNet>,
    plans: &[RankPlan],
    view_of: V,
    f: F,
) -> (Vec<Vec<i64>>, std::collections::BTreeMap<String, Traffic>)
where
    F: Fn(&View, &mut SimFabric) -> Vec<i64> + Sync,
    V: Fn(u32) -> View + Sync,
{
    let out = thread::scope(|s| {
        let handles: Vec<_> = plans
            .iter()
            .map(|p| {
                let net = Arc::clone(&net);
                let (f, view_of) = (&f, &view_of);
                s.spawn(move || {
                    let view = view_of(p.rank);
                    let mut fabric =
                        SimFabric::new(&net, view.rank, view.levels.iter().map(|l| l.name));
                    f(&view, &mut fabric)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    (out, net.traffic())
}

pub(crate) fn data(rank: u32, len: usize) -> Vec<i64> {
    (0..len as i64)
        .map(|i| i64::from(rank + 1) * 1_000_003 + i * 7)
        .collect()
}

pub(crate) fn bytes(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub(crate) fn ints(b: &[u8]) -> Vec<i64> {
    b.chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

pub(crate) fn sum(size: u32, len: usize) -> Vec<i64> {
    (0..size).fold(vec![0; len], |acc, r| {
        acc.iter()
            .zip(data(r, len))
            .map(|(a, b)| a.wrapping_add(b))
            .collect()
    })
}

pub(crate) fn settings() -> impl Strategy<Value = Settings> {
    let bcast = prop::sample::select(vec![
        "flat",
        "binomial",
        "knomial:3",
        "knomial:4",
        "scatter-allgather",
    ]);
    let reduce = prop::sample::select(vec![
        "flat",
        "binomial",
        "knomial:3",
        "knomial:4",
        "reduce-scatter-gather",
    ]);
    (
        bcast.clone(),
        bcast,
        reduce.clone(),
        reduce,
        prop::sample::select(vec!["rb", "rab:rd", "rab:ring"]),
        prop::sample::select(vec!["4K", "8K", "256K"]),
        prop::sample::select(vec!["dissemination", "root-first"]),
    )
        .prop_map(|(bi, be, ri, re, ar, chunk, barrier)| {
            Settings::from_pairs(&[
                ("bcast", format!("intra={bi},inter={be}")),
                ("reduce", format!("intra={ri},inter={re}")),
                ("allreduce", ar.to_string()),
                ("chunk", chunk.to_string()),
                ("barrier", barrier.to_string()),
            ])
            .unwrap()
        })
}

pub(crate) const LEVELS: [&str; 5] = [
    "numa,socket,node,switch1,switch2,world",
    "node,world",
    "world",
    "numa,switch1,world",
    "socket,node,switch2,world",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn collectives_match_the_reference(
        nodes in 1u32..5, rpn in 1u32..17, sockets in 1u32..3, levels in 0usize..5,
        cyclic: bool, s in settings(), len in prop::sample::select(vec![1usize, 3, 511, 513, 1024, 1700]),
        root_pick in 0u32..1000,
    ) {
        let rpn = rpn.min(sockets * 8);
        let plans = plans(nodes, rpn, sockets, LEVELS[levels], cyclic);
        let size = plans.len() as u32;
        let root = root_pick % size;
        let expect = sum(size, len);
        let (out, _) = run(&plans, |view, fabric| {
            let mut scratch = Scratch::default();
            let op = sum_i64();
            // Bcast from `root`.
            let mut b = if view.rank == root { bytes(&data(root, len)) } else { vec![0; len * 8] };
            bcast::bcast(view, fabric, &s, root, &mut b).unwrap();
            assert_eq!(ints(&b), data(root, len), "bcast at rank {}", view.rank);
            // Reduce to `root`, then in place.
            let mine = bytes(&data(view.rank, len));
            let mut r = vec![0u8; len * 8];
            let recv = (view.rank == root).then_some(&mut r[..]);
            reduce::reduce(view, fabric, &s, root, Some(&mine), recv, &op, &mut scratch).unwrap();
            if view.rank == root {
                assert_eq!(ints(&r), expect, "reduce at root {root}");
            }
            let mut inplace = mine.clone();
            if view.rank == root {
                reduce::reduce(view, fabric, &s, root, None, Some(&mut inplace), &op, &mut scratch).unwrap();
                assert_eq!(ints(&inplace), expect, "in-place reduce at root {root}");
            } else {
                reduce::reduce(view, fabric, &s, root, Some(&mine), None, &op, &mut scratch).unwrap();
            }
            barrier::barrier(view, fabric, &s).unwrap();
            // Allreduce, then in place.
            let mut a = vec![0u8; len * 8];
            allreduce::allreduce(view, fabric, &s, Some(&mine), &mut a, &op, &mut scratch).unwrap();
            let mut ip = mine.clone();
            allreduce::allreduce(view, fabric, &s, None, &mut ip, &op, &mut scratch).unwrap();
            assert_eq!(ip, a);
            ints(&a)
        });
        for (rank, got) in out.iter().enumerate() {
            prop_assert_eq!(got, &expect, "allreduce at rank {}", rank);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Allreduce and Barrier as the runtime runs them, on the view over the node leaders.
    #[test]
    fn allreduce_and_barrier_over_the_network_view_match_the_reference(
        nodes in 1u32..5, rpn in 1u32..17, sockets in 1u32..3, levels in 0usize..5,
        cyclic: bool, s in settings(), len in prop::sample::select(vec![1usize, 3, 511, 1700]),
    ) {
        let rpn = rpn.min(sockets * 8);
        let plans = plans(nodes, rpn, sockets, LEVELS[levels], cyclic);
        let size = plans.len() as u32;
        let expect = sum(size, len);
        let (out, _) = run_over_leaders(&plans, |view, fabric| {
            let mut scratch = Scratch::default();
            let op = sum_i64();
            let mine = bytes(&data(view.rank, len));
            barrier::barrier(view, fabric, &s).unwrap();
            let mut a = vec![0u8; len * 8];
            allreduce::allreduce(view, fabric, &s, Some(&mine), &mut a, &op, &mut scratch).unwrap();
            let mut ip = mine.clone();
            allreduce::allreduce(view, fabric, &s, None, &mut ip, &op, &mut scratch).unwrap();
            assert_eq!(ip, a);
            barrier::barrier(view, fabric, &s).unwrap();
            ints(&a)
        });
        for (rank, got) in out.iter().enumerate() {
            prop_assert_eq!(got, &expect, "allreduce at rank {}", rank);
        }
    }
}

#[test]
fn allreduce_over_the_network_view_crosses_it_as_often_without_switch_levels() {
    // 32 ranks on 4 nodes under two leaf switches: with the switch levels the reduce climbs
    // the leaf and top groups and the broadcast comes down them (2 up, 2 between the
    // switch leaders, 2 down); over the node leaders it is one recursive doubling among
    // the 4 leaders (2 steps x 4 = 8 messages), whatever the levels above the node.
    let len = 64;
    let s = Settings::from_pairs(&[("allreduce", "rab:rd")]).unwrap();
    for levels in [
        "numa,node,world",
        "numa,node,switch1,world",
        "numa,node,switch1,switch2,world",
    ] {
        let plans = plans(4, 8, 2, levels, false);
        let (out, t) = run_over_leaders(&plans, |view, fabric| {
            let mut a = bytes(&data(view.rank, len));
            let mut scratch = Scratch::default();
            allreduce::allreduce(view, fabric, &s, None, &mut a, &sum_i64(), &mut scratch).unwrap();
            ints(&a)
        });
        assert!(out.iter().all(|o| *o == sum(32, len)), "{levels}");
        assert_eq!(t[INTER_NODE].messages, 8, "{levels}: {t:?}");
    }
}

#[test]
fn the_network_view_pairs_nodes_under_one_leaf_switch_first() {
    // The dev cluster's map: odd nodes under one leaf switch, even nodes under the other.
    // Over the 4 node leaders in rank order the first exchange of the recursive doubling
    // would cross the switches (8 messages across); in meeting order it stays under each
    // leaf and only the second one crosses (4).
    let job = topo_hierarchy::job_from_str(
        "layout: {nodes: 'n[1-4]', ranks_per_node: 2, mapping: by-core, distribution: block, \
         hardware: {sockets: 1, numa_per_socket: 1, cores_per_numa: 2, threads_per_core: 1}}",
    )
    .unwrap();
    let map = NetworkMap::from_str(
        "SwitchName=a Nodes=n[1,3]\nSwitchName=b Nodes=n[2,4]\nSwitchName=top Switches=a,b",
    )
    .unwrap();
    let plans = plans_of(&job, Some(&map), "node,switch1,world");
    let network = network_of(&plans);
    assert_eq!(network, [0, 4, 2, 6]);
    let switch_of: Vec<u32> = (0..8).map(|r| (r / 2) % 2).collect();
    let net = SimNet::with_switches(node_of(&plans), switch_of);
    let s = Settings::from_pairs(&[("allreduce", "rab:rd")]).unwrap();
    let (out, t) = run_views(
        net,
        &plans,
        |r| view(&plans, r).over_network(&network),
        |view, fabric| {
            let mut a = bytes(&data(view.rank, 4));
            let mut scratch = Scratch::default();
            allreduce::allreduce(view, fabric, &s, None, &mut a, &sum_i64(), &mut scratch).unwrap();
            ints(&a)
        },
    );
    assert!(out.iter().all(|o| *o == sum(8, 4)));
    assert_eq!(t[INTER_NODE].messages, 8, "{t:?}");
    assert_eq!(t[INTER_SWITCH].messages, 4, "{t:?}");
}

#[test]
fn hierarchical_allreduce_crosses_nodes_less_than_flat_recursive_doubling() {
    let len = 1024;
    let s = Settings::from_pairs(&[("allreduce", "rab:rd")]).unwrap();
    let traffic = |levels: &str| {
        let plans = plans(4, 8, 2, levels, false);
        let (out, t) = run(&plans, |view, fabric| {
            let mut a = bytes(&data(view.rank, len));
            let mut scratch = Scratch::default();
            allreduce::allreduce(view, fabric, &s, None, &mut a, &sum_i64(), &mut scratch).unwrap();
            ints(&a)
        });
        assert!(out.iter().all(|o| *o == sum(32, len)));
        t[INTER_NODE]
    };
    let flat = traffic("world");
    let hier = traffic("numa,node,world");
    let switched = traffic("numa,node,switch1,world");
    // 32 ranks on 4 nodes. Flat recursive doubling: every rank exchanges with 2 remote
    // partners (distance 8 and 16): 64 remote messages of the whole vector. Hierarchical:
    // recursive doubling among the 4 node leaders, 2 steps x 4 = 8 messages. With leaf
    // switches: 2 up, 2 between the switch leaders, 2 down.
    assert_eq!(flat.messages, 64);
    assert_eq!(hier.messages, 8);
    assert_eq!(switched.messages, 6);
    assert_eq!(flat.bytes, 64 * len as u64 * 8);
    assert_eq!(hier.bytes, 8 * len as u64 * 8);
}

#[test]
fn nobody_leaves_a_barrier_before_everyone_has_entered() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    // One node, several nodes with a top group of 2, 3 (not a power of two) and 4; both
    // ways of meeting at the top.
    for ((nodes, per_node, levels), barrier) in [
        (1, 5, "node,world"),
        (1, 2, "world"),
        (2, 4, "numa,node,world"),
        (3, 3, "node,world"),
        (4, 2, "world"),
        (3, 4, "numa,node,world"),
    ]
    .into_iter()
    .flat_map(|c| [(c, "dissemination"), (c, "root-first")])
    {
        let s = Settings::from_pairs(&[("barrier", barrier)]).unwrap();
        let plans = plans(nodes, per_node, 2, levels, false);
        let n = plans.len();
        let arrived = AtomicUsize::new(0);
        let (out, _) = run(&plans, |view, fabric| {
            let mut seen = Vec::new();
            for round in 0..3 {
                // Late arrivals, a different rank each round.
                if view.rank as usize % n == round % n {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                arrived.fetch_add(1, Ordering::SeqCst);
                barrier::barrier(view, fabric, &s).unwrap();
                seen.push(arrived.load(Ordering::SeqCst) as i64);
                barrier::barrier(view, fabric, &s).unwrap();
            }
            seen
        });
        for (rank, seen) in out.iter().enumerate() {
            for (round, &v) in seen.iter().enumerate() {
                assert!(
                    v >= ((round + 1) * n) as i64,
                    "{barrier} {nodes}x{per_node} {levels}: rank {rank} left round {round}'s \
                     barrier having seen {v} of {} arrivals",
                    (round + 1) * n
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn allgather_matches_the_reference(
        nodes in 1u32..5, rpn in 1u32..17, sockets in 1u32..3, levels in 0usize..5,
        cyclic: bool, s in settings(), len in prop::sample::select(vec![0usize, 1, 3, 257, 1700]),
        in_place: bool, ring: bool,
    ) {
        let top = if ring { TopAlg::Ring } else { TopAlg::RecursiveDoubling };
        let rpn = rpn.min(sockets * 8);
        let plans = plans(nodes, rpn, sockets, LEVELS[levels], cyclic);
        let size = plans.len() as u32;
        let expect: Vec<i64> = (0..size).flat_map(|r| data(r, len)).collect();
        let (out, _) = run(&plans, |view, fabric| {
            let mine = bytes(&data(view.rank, len));
            let mut all = vec![0u8; mine.len() * size as usize];
            if in_place {
                let at = view.rank as usize * mine.len();
                all[at..at + mine.len()].copy_from_slice(&mine);
                allgather::allgather(view, fabric, &s, top, None, &mut all).unwrap();
            } else {
                allgather::allgather(view, fabric, &s, top, Some(&mine), &mut all).unwrap();
            }
            ints(&all)
        });
        for (rank, got) in out.iter().enumerate() {
            prop_assert_eq!(got, &expect, "allgather at rank {}", rank);
        }
    }
}

#[test]
fn hierarchical_allgather_crosses_nodes_with_few_messages() {
    // 4 nodes x 8 ranks placed cyclically: up, each node's ranks send their blocks to its
    // leader inside the node; the 4 leaders exchange their nodes' blocks (recursive
    // doubling: 2 rounds, 8 then 16 blocks; the ring: 3 rounds of 8), each round a count
    // and a packed message; down, inside nodes again.
    let len = 64;
    let block = (len * 8) as u64;
    let plans = plans(4, 8, 1, "node,world", true);
    let expect: Vec<i64> = (0..32).flat_map(|r| data(r, len)).collect();
    for (top, rounds, blocks) in [
        (TopAlg::RecursiveDoubling, 2u64, 8 + 16),
        (TopAlg::Ring, 3, 3 * 8),
    ] {
        let (out, t) = run(&plans, |view, fabric| {
            let mine = bytes(&data(view.rank, len));
            let mut all = vec![0u8; mine.len() * 32];
            allgather::allgather(
                view,
                fabric,
                &Settings::default(),
                top,
                Some(&mine),
                &mut all,
            )
            .unwrap();
            ints(&all)
        });
        assert!(out.iter().all(|o| *o == expect), "{top:?}");
        let inter = &t[INTER_NODE];
        // Each of 4 leaders sends, per round, a count and its packed blocks (a rank and
        // a block each): every leader receives the other 24 blocks once, the least.
        assert_eq!(inter.messages, 4 * rounds * 2, "{top:?}");
        assert_eq!(
            inter.bytes,
            4 * (rounds * 4 + blocks * (4 + block)),
            "{top:?}"
        );
    }
    // Flat recursive doubling over these 32 ranks: the rounds at distance 1 and 2 cross
    // nodes for every rank (64 messages, 96 blocks), those at 4, 8 and 16 stay inside a
    // node; the hierarchy sends the same 96 blocks in 16 messages.
}

#[test]
fn the_remapping_keeps_the_heavy_steps_under_one_switch() {
    // 8 nodes x 4 ranks placed cyclically, nodes 2s and 2s + 1 under switch s. Plain
    // recursive doubling (what the nodes alone choose: it already sends the least between
    // nodes) crosses switches at its steps of 2 and 4 blocks; knowing the switches, the
    // remapping puts the lightest steps there (1 and 2 blocks) and the step of 4 between
    // the nodes of one switch.
    use topo_hierarchy::remap::{self, partition::Placement};
    let len = 64;
    let block = (len * 8) as u64;
    let plans = plans_without_map(8, 4, "cyclic");
    let nodes = node_of(&plans);
    let switches: Vec<u32> = nodes.iter().map(|n| n / 2).collect();
    let expect: Vec<i64> = (0..32).flat_map(|r| data(r, len)).collect();
    let by_switch = Placement::with_switches(&nodes, &switches);
    let mut table = String::from(
        "| positions chosen from | bytes between switches | bytes between nodes |\n|---|---|---|\n",
    );
    let mut measured = Vec::new();
    for (name, place) in [
        ("nodes", Placement::nodes(&nodes)),
        ("nodes and switches", by_switch.clone()),
    ] {
        let pos = remap::chosen(&place).unwrap();
        let net = SimNet::with_switches(nodes.clone(), switches.clone());
        let (out, t) = run_on(net, &plans, |view, fabric| {
            let peers = remap::peers(&pos, view.rank).unwrap();
            let mine = bytes(&data(view.rank, len));
            let mut all = vec![0u8; mine.len() * 32];
            allgather::recursive_doubling(fabric, view.rank, &peers, Some(&mine), &mut all)
                .unwrap();
            ints(&all)
        });
        assert!(out.iter().all(|o| *o == expect), "{name}");
        let (sw, nd) = (t[INTER_SWITCH].bytes, t[INTER_NODE].bytes);
        // The sim counts what the exchange graph predicts.
        let cost = remap::rd_graph(32).cost(&by_switch, &pos);
        assert_eq!(
            (sw, nd),
            (cost.switches * block, cost.nodes * block),
            "{name}"
        );
        table.push_str(&format!("| {name} | {sw} | {nd} |\n"));
        measured.push((sw, nd));
    }
    println!("{table}");
    let [(sw_nodes, nd_nodes), (sw_both, _)] = measured[..] else {
        unreachable!()
    };
    // Plain: 6 blocks per rank between switches, 7 between nodes (the least).
    assert_eq!((sw_nodes, nd_nodes), (32 * 6 * block, 32 * 7 * block));
    assert!(sw_both <= 32 * 4 * block, "{sw_both}");
}

/// Every rank's plan for a layout of `nodes` x `rpn` ranks without a network map.
pub(crate) fn plans_without_map(nodes: u32, rpn: u32, distribution: &str) -> Vec<RankPlan> {
    let job = job_from_str(&format!(
        "layout: {{nodes: 'n[1-{nodes}]', ranks_per_node: {rpn}, mapping: by-core, \
         distribution: {distribution}, hardware: {{sockets: 1, numa_per_socket: 1, \
         cores_per_numa: {rpn}, l3_per_socket: 1, threads_per_core: 1}}}}"
    ))
    .unwrap();
    plans_of(&job, None, "node,world")
}

/// Every rank's plan for ranks placed on nodes as `node_of` says (any placement: rank r on
/// node `n{node_of[r]}`), unbound, so the levels are `node` and `world`.
pub(crate) fn plans_placed(node_of: &[u32]) -> Vec<RankPlan> {
    let ranks: Vec<String> = node_of
        .iter()
        .map(|n| format!("  - {{node: n{n}}}"))
        .collect();
    let job = job_from_str(&format!("ranks:\n{}\n", ranks.join("\n"))).unwrap();
    plans_of(&job, None, "node,world")
}

/// Each rank's node, numbered as `run` numbers them.
pub(crate) fn node_of(plans: &[RankPlan]) -> Vec<u32> {
    let mut ids: Vec<&str> = plans.iter().map(|p| p.node.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    plans
        .iter()
        .map(|p| ids.binary_search(&p.node.as_str()).unwrap() as u32)
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn recursive_doubling_matches_the_reference(
        nodes in prop::sample::select(vec![1u32, 2, 4]),
        rpn in prop::sample::select(vec![1u32, 2, 4, 8, 16]),
        cyclic: bool, remapped: bool, in_place: bool,
        len in prop::sample::select(vec![0usize, 1, 3, 257]),
    ) {
        let plans = plans(nodes, rpn, 2, "node,world", cyclic);
        let size = plans.len() as u32;
        let pos: Vec<u32> = if remapped {
            topo_hierarchy::remap::positions(&node_of(&plans)).unwrap()
        } else {
            (0..size).collect()
        };
        let expect: Vec<i64> = (0..size).flat_map(|r| data(r, len)).collect();
        let (out, _) = run(&plans, |view, fabric| {
            let peers = topo_hierarchy::remap::peers(&pos, view.rank).unwrap();
            let mine = bytes(&data(view.rank, len));
            let mut all = vec![0u8; mine.len() * size as usize];
            if in_place {
                let at = view.rank as usize * mine.len();
                all[at..at + mine.len()].copy_from_slice(&mine);
                allgather::recursive_doubling(fabric, view.rank, &peers, None, &mut all).unwrap();
            } else {
                allgather::recursive_doubling(fabric, view.rank, &peers, Some(&mine), &mut all)
                    .unwrap();
            }
            ints(&all)
        });
        for (rank, got) in out.iter().enumerate() {
            prop_assert_eq!(got, &expect, "recursive doubling at rank {}", rank);
        }
    }
}

/// An Allgather algorithm of the volume table.
#[derive(Clone, Copy)]
enum Form<'a> {
    /// Recursive doubling with ranks at these positions.
    Doubling(&'a [u32]),
    /// Up the hierarchy and down.
    Hierarchical,
    /// The ring in this order, as its schedule.
    Ring(&'a [u32]),
}

#[test]
fn inter_node_volume_of_the_allgather_algorithms() {
    // 8 nodes x 8 ranks, blocks of 64 i64; between nodes, as sim counts it, against what
    // the exchange graph predicts (topo_hierarchy::remap::blocks_between_nodes).
    use topo_hierarchy::remap;
    let len = 64;
    let block = (len * 8) as u64;
    let mut table = String::from(
        "| algorithm | placement | messages between nodes | bytes between nodes |\n|---|---|---|---|\n",
    );
    for distribution in ["block", "cyclic"] {
        let plans = plans_without_map(8, 8, distribution);
        let nodes = node_of(&plans);
        let expect: Vec<i64> = (0..64).flat_map(|r| data(r, len)).collect();
        let identity: Vec<u32> = (0..64).collect();
        let remapped = remap::positions(&nodes).unwrap();
        let chosen = remap::chosen(&Placement::nodes(&nodes)).unwrap();
        let ring = remap::ring_positions(&Placement::nodes(&nodes));
        let mut measured = Vec::new();
        for (name, form) in [
            ("recursive doubling", Form::Doubling(&identity)),
            ("recursive doubling, remapped", Form::Doubling(&remapped)),
            (
                "recursive doubling, chosen (default)",
                Form::Doubling(&chosen),
            ),
            ("hierarchical", Form::Hierarchical),
            ("ring, node-major", Form::Ring(&ring)),
        ] {
            let (out, t) = run(&plans, |view, fabric| {
                let mine = bytes(&data(view.rank, len));
                let mut all = vec![0u8; mine.len() * 64];
                match form {
                    Form::Doubling(pos) => {
                        let peers = remap::peers(pos, view.rank).unwrap();
                        allgather::recursive_doubling(
                            fabric,
                            view.rank,
                            &peers,
                            Some(&mine),
                            &mut all,
                        )
                        .unwrap()
                    }
                    Form::Hierarchical => allgather::allgather(
                        view,
                        fabric,
                        &Settings::default(),
                        TopAlg::RecursiveDoubling,
                        Some(&mine),
                        &mut all,
                    )
                    .unwrap(),
                    Form::Ring(pos) => {
                        let peers = remap::ring_peers(pos, view.rank).unwrap();
                        let b = iallgather::build_ring(view.rank, &peers, mine.len(), true);
                        let g = schedule("MPI_Iallgather", b, Some(&mine), Some(&mut all), 0, 0);
                        let mut engine = Engine::default();
                        engine.start(0, g, fabric).unwrap();
                        finish(&mut engine, fabric);
                    }
                }
                ints(&all)
            });
            assert!(out.iter().all(|o| *o == expect), "{name}, {distribution}");
            let inter = t.get(INTER_NODE).copied().unwrap_or_default();
            let predicted = match form {
                Form::Doubling(pos) => Some(remap::blocks_between_nodes(&nodes, Some(pos))),
                Form::Ring(pos) => Some(remap::ring_blocks_between_nodes(&nodes, pos)),
                Form::Hierarchical => None,
            };
            if let Some(predicted) = predicted {
                assert_eq!(inter.bytes, predicted * block, "{name}, {distribution}");
            }
            table.push_str(&format!(
                "| {name} | {distribution} | {} | {} |\n",
                inter.messages, inter.bytes
            ));
            measured.push(inter.bytes);
        }
        let [plain, remapped, chosen, hier, ring] = measured[..] else {
            unreachable!()
        };
        // The ring crosses each of the 8 node boundaries once, with 63 blocks.
        assert_eq!(ring, 8 * 63 * block, "ring, {distribution}");
        // The least any Allgather sends between nodes: each rank receives the 56 blocks of
        // the other nodes, once per node: 8 nodes x 56 blocks.
        let least = 8 * 56 * block;
        assert!(chosen <= plain && chosen <= remapped.max(plain));
        assert!(remapped >= least);
        // The hierarchy sends the least, plus a rank number per block and a count per
        // message: 8 leaders, 3 rounds of recursive doubling.
        assert_eq!(
            hier,
            least + 8 * 56 * 4 + 8 * 3 * 4,
            "hierarchical, {distribution}"
        );
        if distribution == "block" {
            assert_eq!(
                plain,
                64 * 56 * block,
                "block: every heavy step crosses nodes"
            );
            assert!(remapped < plain / 6 && hier < plain / 6);
        } else {
            assert_eq!(
                plain, least,
                "cyclic: plain recursive doubling already sends the least"
            );
        }
    }
    println!("{table}");
}

#[test]
fn a_root_first_barrier_gathers_to_the_first_member_and_releases_from_it() {
    // 4 ranks on 4 nodes, one group: the dissemination sends 4 x log2 4 = 8 messages,
    // the root-first barrier 3 in and 3 out.
    let plans = plans(4, 1, 1, "world", false);
    for (barrier, messages) in [("dissemination", 8), ("root-first", 6)] {
        let s = Settings::from_pairs(&[("barrier", barrier)]).unwrap();
        let (_, t) = run(&plans, |view, fabric| {
            barrier::barrier(view, fabric, &s).unwrap();
            Vec::new()
        });
        assert_eq!(t[INTER_NODE].messages, messages, "{barrier}");
    }
}
