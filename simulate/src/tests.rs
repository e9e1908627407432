//! The simulator against closed forms, and topo-run's schedules against the flat ones.

use proptest::prelude::*;
use topo_hierarchy::{Settings, job_from_str};

use crate::blocking::Tape;
use crate::engine::{self, SimError, Traffic};
use crate::model::{CostModel, Link, LinkClass};
use crate::place::Places;
use crate::program::{Program, Programs, Step};
use crate::{Cluster, Op, Predicted, TOPO_RUN, TOPO_RUN_BLOCKING, flat, predict};

/// `nodes` nodes of `rpn` ranks, bound by core on one socket (2 NUMA nodes).
fn job(nodes: u32, rpn: u32, cyclic: bool) -> topo_hierarchy::Job {
    job_from_str(&format!(
        "layout: {{nodes: 'n[1-{nodes}]', ranks_per_node: {rpn}, mapping: by-core, \
         distribution: {}, hardware: {{sockets: 1, numa_per_socket: 2, \
         cores_per_numa: 8, l3_per_socket: 1, threads_per_core: 1}}}}",
        if cyclic { "cyclic" } else { "block" }
    ))
    .unwrap()
}

/// A model where every link is `alpha` us and `bw` bytes/us, copies and combines `gamma`
/// bytes/us, and the network interface never queues.
fn uniform(alpha: f64, bw: f64, gamma: f64) -> CostModel {
    CostModel {
        links: [Link::new(alpha, bw); 8],
        copy_bytes_per_us: gamma,
        reduce_bytes_per_us: gamma,
        reduce_memory_bytes_per_us: gamma,
        reduce_cache_bytes: u64::MAX,
        nic_bytes_per_us: f64::INFINITY,
        nic_message_us: 0.0,
        nic_half_duplex: false,
        call_us: 0.0,
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

fn time(programs: &[Program], places: &Places, model: &CostModel) -> f64 {
    engine::run(&pack(programs), places, model).unwrap().time_us
}

fn pack(programs: &[Program]) -> Programs {
    Programs::build(programs.len() as u32, |r| programs[r as usize].clone())
}

#[test]
fn binomial_bcast_takes_k_hops() {
    // 2^k ranks, one per node and no map: every pair is `world`. k (alpha + m beta).
    for k in 0..6u32 {
        let n = 1 << k;
        let places = Places::new(&job(n, 1, false), None);
        let model = uniform(2.0, 1000.0, 1e9);
        let m = 4000;
        let programs: Vec<Program> = (0..n).map(|r| flat::bcast_binomial(r, n, m)).collect();
        let t = time(&programs, &places, &model);
        assert!(close(t, f64::from(k) * (2.0 + 4.0)), "k = {k}: {t}");
    }
}

#[test]
fn ring_allreduce_takes_its_closed_form() {
    // 2 (p - 1) (alpha + m beta / p), plus (p - 1) combines of m / p bytes.
    for p in [2u32, 3, 4, 7] {
        let places = Places::new(&job(p, 1, false), None);
        let (alpha, bw, gamma) = (2.0, 1000.0, 500.0);
        let m = 4200u64; // divisible by each p
        let programs: Vec<Program> = (0..p).map(|r| flat::allreduce_ring(r, p, m)).collect();
        let t = time(&programs, &places, &uniform(alpha, bw, gamma));
        let q = f64::from(p);
        let block = m as f64 / q;
        let want = 2.0 * (q - 1.0) * (alpha + block / bw) + (q - 1.0) * block / gamma;
        assert!(close(t, want), "p = {p}: {t} against {want}");
    }
}

#[test]
fn recursive_doubling_allreduce_takes_log_p_exchanges() {
    // log2 p (alpha + m beta + m gamma) on a power of two.
    let places = Places::new(&job(8, 1, false), None);
    let programs: Vec<Program> = (0..8).map(|r| flat::allreduce_rd(r, 8, 1000)).collect();
    let t = time(&programs, &places, &uniform(1.0, 1000.0, 500.0));
    assert!(close(t, 3.0 * (1.0 + 1.0 + 2.0)), "{t}");
}

#[test]
fn sends_that_leave_a_node_queue_at_its_interface() {
    // Rank 0 sends m bytes to 3 ranks on other nodes at once: the interface takes them one
    // after another, m / nic each, and each arrives m / bandwidth + alpha after it starts.
    let places = Places::new(&job(4, 1, false), None);
    let mut model = uniform(1.0, 1000.0, 1e9);
    model.nic_bytes_per_us = 500.0;
    let mut programs = vec![Program::default(); 4];
    programs[0].round(vec![Step::Send {
        to: vec![1, 2, 3],
        bytes: 1000,
    }]);
    for p in programs.iter_mut().skip(1) {
        p.round(vec![Step::Recv {
            from: 0,
            bytes: 1000,
            combine: false,
        }]);
    }
    // The third send starts at 2 x 1000 / 500 = 4 us; it arrives at 4 + 1 + 1 = 6 us.
    let out = engine::run(&pack(&programs), &places, &model).unwrap();
    assert!(close(out.time_us, 6.0), "{}", out.time_us);
    assert_eq!(
        out.traffic[&LinkClass::World],
        Traffic {
            messages: 3,
            bytes: 3000
        }
    );
}

#[test]
fn messages_into_one_node_queue_at_its_interface() {
    // Ranks 1-3, on three other nodes, each send m bytes to rank 0 at once: each leaves
    // its own interface at once and would arrive at m / bandwidth + alpha = 2 us, but rank
    // 0's interface takes them in one after another, m / nic = 2 us each: the last is in
    // at 6 us. With half duplex the senders queue at rank 0's interface instead: the same.
    let places = Places::new(&job(4, 1, false), None);
    let mut model = uniform(1.0, 1000.0, 1e9);
    model.nic_bytes_per_us = 500.0;
    let mut programs = vec![Program::default(); 4];
    programs[0].round(
        (1..4)
            .map(|from| Step::Recv {
                from,
                bytes: 1000,
                combine: false,
            })
            .collect(),
    );
    for p in programs.iter_mut().skip(1) {
        p.round(vec![Step::Send {
            to: vec![0],
            bytes: 1000,
        }]);
    }
    let full = engine::run(&pack(&programs), &places, &model).unwrap();
    assert!(close(full.time_us, 6.0), "{}", full.time_us);
    model.nic_half_duplex = true;
    let half = engine::run(&pack(&programs), &places, &model).unwrap();
    assert!(close(half.time_us, 6.0), "{}", half.time_us);
}

#[test]
fn a_half_duplex_interface_carries_an_exchange_one_way_at_a_time() {
    // Two ranks on two nodes exchange m bytes at once. Full duplex: both arrive at
    // m / nic... here m / bandwidth + alpha = 1 + 1 = 2 us. Half duplex: the second
    // waits for the first to leave both interfaces: 1 + 2 = 3 us.
    let places = Places::new(&job(2, 1, false), None);
    let mut programs = vec![Program::default(); 2];
    for (r, p) in programs.iter_mut().enumerate() {
        let other = 1 - r as u32;
        p.round(vec![
            Step::Send {
                to: vec![other],
                bytes: 1000,
            },
            Step::Recv {
                from: other,
                bytes: 1000,
                combine: false,
            },
        ]);
    }
    let mut model = uniform(1.0, 1000.0, 1e9);
    model.nic_bytes_per_us = 1000.0;
    let full = engine::run(&pack(&programs), &places, &model).unwrap();
    assert!(close(full.time_us, 2.0), "{}", full.time_us);
    model.nic_half_duplex = true;
    let half = engine::run(&pack(&programs), &places, &model).unwrap();
    assert!(close(half.time_us, 3.0), "{}", half.time_us);
}

#[test]
fn small_messages_queue_at_the_interface_by_its_message_rate() {
    // Rank 0 sends 8 bytes to 3 ranks on other nodes at once: each holds the interface
    // for the time per message (0.5 us), far more than its bytes take; the third leaves
    // at 1 us and arrives at 1 + 1 (alpha) = 2 us. Every rank first pays the call (0.25).
    let places = Places::new(&job(4, 1, false), None);
    let mut model = uniform(1.0, 1e6, 1e9);
    model.nic_bytes_per_us = 1e6;
    model.nic_message_us = 0.5;
    model.call_us = 0.25;
    let mut programs = vec![Program::default(); 4];
    programs[0].round(vec![Step::Send {
        to: vec![1, 2, 3],
        bytes: 8,
    }]);
    for p in programs.iter_mut().skip(1) {
        p.round(vec![Step::Recv {
            from: 0,
            bytes: 8,
            combine: false,
        }]);
    }
    let out = engine::run(&pack(&programs), &places, &model).unwrap();
    assert!(
        close(out.time_us, 0.25 + 2.0 + 8.0 / 1e6),
        "{}",
        out.time_us
    );
}

#[test]
fn each_end_of_a_message_pays_its_overhead_one_message_after_the_other() {
    // Ranks on 4 nodes, alpha 1 us of which 0.25 us is each end's overhead. A lone message
    // takes its alpha as without overhead; rank 0 sending to 3 ranks in one round posts
    // them 0.25 us apart (the third leaves at 0.75 and arrives at 0.75 + 0.5 + 0.25 = 1.5),
    // and rank 0 receiving from 3 in one round takes them 0.25 us each (done at 1.5 too).
    let places = Places::new(&job(4, 1, false), None);
    let mut model = uniform(1.0, 1e6, 1e9);
    for l in &mut model.links {
        l.overhead_us = 0.25;
    }
    model.nic_bytes_per_us = 1e9;
    model.nic_message_us = 0.0;
    model.call_us = 0.0;
    let msg = |to: Vec<u32>| Step::Send { to, bytes: 8 };
    let from = |r: u32| Step::Recv {
        from: r,
        bytes: 8,
        combine: false,
    };
    let time = |programs: &[Program]| {
        engine::run(&pack(programs), &places, &model)
            .unwrap()
            .time_us
    };
    let mut lone = vec![Program::default(); 4];
    lone[0].round(vec![msg(vec![1])]);
    lone[1].round(vec![from(0)]);
    // (Each message's 8 bytes add 8e-6 us.)
    let near = |t: f64, want: f64| (t - want).abs() < 1e-3;
    assert!(near(time(&lone), 1.0), "{}", time(&lone));
    let mut out = vec![Program::default(); 4];
    out[0].round(vec![msg(vec![1, 2, 3])]);
    for p in out.iter_mut().skip(1) {
        p.round(vec![from(0)]);
    }
    assert!(near(time(&out), 1.5), "{}", time(&out));
    let mut into = vec![Program::default(); 4];
    into[0].round((1..4).map(from).collect());
    for p in into.iter_mut().skip(1) {
        p.round(vec![msg(vec![0])]);
    }
    assert!(near(time(&into), 1.5), "{}", time(&into));
}

#[test]
fn combines_beyond_the_cache_run_at_memory_speed() {
    let places = Places::new(&job(1, 1, false), None);
    let mut model = uniform(1.0, 1e6, 1000.0);
    model.reduce_memory_bytes_per_us = 250.0;
    model.reduce_cache_bytes = 1000;
    let time = |bytes| {
        let mut p = Program::default();
        p.round(vec![Step::Local {
            bytes,
            combine: true,
        }]);
        engine::run(&pack(&[p]), &places, &model).unwrap().time_us
    };
    assert!(close(time(1000), 1.0), "{}", time(1000));
    assert!(close(time(2000), 8.0), "{}", time(2000));
}

#[test]
fn link_classes_follow_the_hardware_and_the_map() {
    let map = topo_hierarchy::NetworkMap::from_str(
        "SwitchName=a Nodes=n[1-2]\nSwitchName=b Nodes=n3\nSwitchName=top Switches=a,b",
    )
    .unwrap();
    let j = job(4, 16, false);
    let places = Places::new(&j, Some(&map));
    // Ranks 0-7 on NUMA 0 of n1, 8-15 on NUMA 1; n2 under the same leaf; n3 under the
    // spine; n4 in no switch of the map.
    assert_eq!(places.class(0, 1), LinkClass::L3);
    assert_eq!(places.class(0, 8), LinkClass::L3);
    assert_eq!(places.class(0, 16), LinkClass::Leaf);
    assert_eq!(places.class(0, 32), LinkClass::Spine);
    assert_eq!(places.class(0, 48), LinkClass::World);
}

#[test]
fn programs_that_do_not_match_are_named() {
    let places = Places::new(&job(2, 1, false), None);
    let model = CostModel::default();
    let mut programs = vec![Program::default(); 2];
    programs[1].round(vec![Step::Recv {
        from: 0,
        bytes: 8,
        combine: false,
    }]);
    let e = engine::run(&pack(&programs), &places, &model).unwrap_err();
    assert!(
        matches!(
            e,
            SimError::Deadlock {
                rank: 1,
                from: 0,
                ..
            }
        ),
        "{e}"
    );
    programs[0].round(vec![Step::Send {
        to: vec![1],
        bytes: 4,
    }]);
    let e = engine::run(&pack(&programs), &places, &model).unwrap_err();
    assert!(
        e.to_string()
            .contains("expects 8 bytes from rank 0 and gets 4"),
        "{e}"
    );
    programs[0].rounds[0] = vec![Step::Send {
        to: vec![5],
        bytes: 8,
    }];
    let e = engine::run(&pack(&programs), &places, &model).unwrap_err();
    assert!(
        e.to_string().contains("names rank 5, outside a job of 2"),
        "{e}"
    );
}

#[test]
fn a_rank_combines_one_message_after_the_other() {
    // Ranks 1..=k send m bytes each to rank 0, which combines them all in one round: it has
    // one core, so the combines add up (k m / gamma), where they arrive at once.
    let (alpha, bw, gamma, m) = (1.0, 1000.0, 500.0, 5000u64);
    for k in [1u32, 3, 7] {
        let places = Places::new(&job(1, k + 1, false), None);
        let mut programs = vec![Program::default()];
        programs[0].round(
            (1..=k)
                .map(|from| Step::Recv {
                    from,
                    bytes: m,
                    combine: true,
                })
                .collect(),
        );
        for _ in 1..=k {
            let mut p = Program::default();
            p.round(vec![Step::Send {
                to: vec![0],
                bytes: m,
            }]);
            programs.push(p);
        }
        let t = time(&programs, &places, &uniform(alpha, bw, gamma));
        let want = alpha + m as f64 / bw + f64::from(k) * m as f64 / gamma;
        assert!(close(t, want), "k = {k}: {t} against {want}");
    }
}

#[test]
fn the_blocking_recursive_doubling_allgather_sends_what_its_schedule_sends() {
    use topo_hierarchy::remap;
    use topo_hierarchy::remap::partition::Placement;
    use topo_runtime::nonblocking::iallgather;

    // 4 nodes x 4 ranks, cyclic: the remapped order is not the rank order.
    let job = job(4, 4, true);
    let node_of: Vec<u32> = (0..job.size()).map(|r| job.node_of(r)).collect();
    let pos = remap::chosen(&Placement::with_switches(&node_of, &[u32::MAX; 16]))
        .expect("16 ranks: recursive doubling");
    let len = 24;
    let transfers = |p: &Program| {
        let mut v: Vec<(bool, Vec<u32>, u64)> = p
            .rounds
            .iter()
            .flatten()
            .filter_map(|s| match s {
                Step::Send { to, bytes } => Some((true, to.clone(), *bytes)),
                Step::Recv { from, bytes, .. } => Some((false, vec![*from], *bytes)),
                Step::Local { .. } => None,
            })
            .collect();
        v.sort();
        v
    };
    for r in 0..16 {
        let peers = remap::peers(&pos, r).unwrap();
        let schedule = Program::from_builder(&iallgather::build_rd(r, &peers, len, true));
        let mut tape = Tape::default();
        let (send, mut recv) = (vec![0u8; len], vec![0u8; 16 * len]);
        topo_runtime::allgather::recursive_doubling(&mut tape, r, &peers, Some(&send), &mut recv)
            .unwrap();
        assert_eq!(transfers(&tape.take()), transfers(&schedule), "rank {r}");
    }
}

/// Bytes over the network (between nodes).
fn network_bytes(p: &crate::Prediction) -> u64 {
    match &p.result {
        Predicted::Outcome(o) => o
            .traffic
            .iter()
            .filter(|(c, _)| c.is_network())
            .map(|(_, t)| t.bytes)
            .sum(),
        Predicted::Skipped(why) => panic!("{} skipped: {why}", p.algorithm),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// topo-run's schedules complete on any job, and never send more between nodes than
    /// the flat algorithm MPI uses for the same job (binomial trees, recursive doubling).
    #[test]
    fn the_hierarchy_never_sends_more_between_nodes_than_the_flat_algorithm(
        nodes in 1u32..5, rpn in 1u32..9, cyclic: bool,
        bytes in prop::sample::select(vec![8u64, 4096, 1 << 20]),
    ) {
        let cluster = Cluster::new(job(nodes, rpn, cyclic), None, Settings::default()).unwrap();
        let model = CostModel::default();
        for (op, flat) in [
            (Op::Bcast, "binomial"),
            (Op::Reduce, "binomial"),
            (Op::Allreduce, "recursive doubling"),
        ] {
            let preds = predict(&cluster, &model, op, bytes).unwrap();
            let topo = preds.iter().find(|p| p.algorithm == TOPO_RUN).unwrap();
            let base = preds.iter().find(|p| p.algorithm == flat).unwrap();
            prop_assert!(
                network_bytes(topo) <= network_bytes(base),
                "{op} of {bytes}: topo-run {} against {flat} {}",
                network_bytes(topo), network_bytes(base)
            );
        }
        for op in [
            Op::Barrier, Op::Allgather, Op::Gather, Op::Scatter, Op::Alltoall,
            Op::ReduceScatter, Op::Scan, Op::Gatherv, Op::Scatterv, Op::Allgatherv,
            Op::Alltoallv, Op::ReduceScatterV, Op::Exscan,
        ] {
            predict(&cluster, &model, op, bytes).unwrap();
        }
    }

    /// topo-run's blocking forms, recorded from its own code, run to the end (every message
    /// received, of the size sent) on any job with any per-level algorithm.
    #[test]
    fn the_blocking_forms_run_to_the_end_with_any_algorithm(
        nodes in 1u32..5, rpn in 1u32..9, cyclic: bool,
        bytes in prop::sample::select(vec![8u64, 4096, 200_000]),
        bcast in prop::sample::select(vec!["flat", "knomial:2", "knomial:4", "scatter-allgather"]),
        reduce in prop::sample::select(vec!["flat", "binomial", "knomial:3", "reduce-scatter-gather"]),
        allreduce in prop::sample::select(vec!["rb", "rab:rd", "rab:ring", "ring", "rabenseifner", "rd"]),
        allgather in prop::sample::select(vec!["hier", "hier:ring", "rd", "ring"]),
        barrier in prop::sample::select(vec!["dissemination", "root-first", "flat"]),
        chunk in prop::sample::select(vec!["16K", "64K", "1M"]),
        alltoall in prop::sample::select(vec!["spread", "aggregated", "pairwise"]),
    ) {
        let settings = Settings::from_pairs(&[
            ("bcast", bcast), ("reduce", reduce), ("allreduce", allreduce),
            ("allgather", allgather), ("barrier", barrier), ("chunk", chunk),
            ("alltoall", alltoall),
        ]).unwrap();
        let cluster = Cluster::new(job(nodes, rpn, cyclic), None, settings).unwrap();
        let model = CostModel::default();
        for op in Op::ALL {
            let preds = predict(&cluster, &model, op, bytes).unwrap();
            let blocking = preds.iter().find(|p| p.algorithm == TOPO_RUN_BLOCKING).unwrap();
            let o = match &blocking.result {
                Predicted::Outcome(o) => o,
                // Its messages carry the ranks' lists (see `Cluster::topo_run_blocking`).
                Predicted::Skipped(_) if op == Op::Allgather && allgather.starts_with("hier") => {
                    continue;
                }
                Predicted::Skipped(why) => panic!("{op} of {bytes} not simulated blocking: {why}"),
            };
            prop_assert!(o.time_us > 0.0 || nodes * rpn == 1, "{op} of {bytes}: {o:?}");
        }
    }
}

/// Messages between nodes of a prediction.
fn network_messages(p: &crate::Prediction) -> u64 {
    match &p.result {
        Predicted::Outcome(o) => o
            .traffic
            .iter()
            .filter(|(c, _)| c.is_network())
            .map(|(_, t)| t.messages)
            .sum(),
        Predicted::Skipped(why) => panic!("{} skipped: {why}", p.algorithm),
    }
}

/// On 8 nodes x 8 ranks, block and cyclic, topo-run's blocking Gather and Scatter of small
/// blocks cross the network once per node but the root's, its Alltoall (the spread form,
/// and its schedule too) once per pair of nodes, where the flat forms send a message per
/// rank (per pair of ranks).
#[test]
fn the_recorded_rooted_collectives_aggregate_between_nodes() {
    let model = CostModel::default();
    for cyclic in [false, true] {
        let cluster = Cluster::new(job(8, 8, cyclic), None, Settings::default()).unwrap();
        for (op, most, flat, flat_messages) in [
            (Op::Gather, 7, "linear", 56),
            (Op::Scatter, 7, "linear", 56),
            (Op::Alltoall, 56, "linear", 3584),
        ] {
            let preds = predict(&cluster, &model, op, 8).unwrap();
            let find = |name: &str| preds.iter().find(|p| p.algorithm == name).unwrap();
            let topo = network_messages(find(TOPO_RUN_BLOCKING));
            assert!(
                topo <= most,
                "{op}, cyclic {cyclic}: {topo} messages between nodes, at most {most} expected"
            );
            if op == Op::Alltoall {
                let schedule = network_messages(find(TOPO_RUN));
                assert!(
                    schedule <= most,
                    "{op} schedule, cyclic {cyclic}: {schedule}"
                );
            }
            assert_eq!(network_messages(find(flat)), flat_messages, "{op} {flat}");
        }
    }
}

/// The flat baselines of the collectives added with Gather and Scatter run to the end on
/// every job size, powers of two or not.
#[test]
fn the_flat_rooted_and_scan_baselines_run_to_the_end() {
    let model = uniform(1.0, 1000.0, 1e9);
    for n in 1..40u32 {
        let places = Places::new(&job(n, 1, false), None);
        for (op, f) in [
            (
                "gather binomial",
                flat::gather_binomial as fn(u32, u32, u64) -> Program,
            ),
            ("gather linear", flat::gather_linear),
            ("scatter binomial", flat::scatter_binomial),
            ("scatter linear", flat::scatter_linear),
            ("alltoall bruck", flat::alltoall_bruck),
            ("alltoall pairwise", flat::alltoall_pairwise),
            ("alltoall linear", flat::alltoall_linear),
            ("reduce_scatter halving", flat::reduce_scatter_halving),
            ("reduce_scatter ring", flat::reduce_scatter_ring),
            ("scan rd", flat::scan_rd),
            ("scan linear", flat::scan_linear),
        ] {
            let programs = Programs::build(n, |r| f(r, n, 64));
            let out = engine::run(&programs, &places, &model);
            assert!(out.is_ok(), "{op} on {n} ranks: {out:?}");
        }
        // A binomial gather's root receives every block once.
        let root: u64 = flat::gather_binomial(0, n, 64)
            .rounds
            .iter()
            .flatten()
            .map(|s| match s {
                Step::Recv { bytes, .. } => *bytes,
                _ => 0,
            })
            .sum();
        assert_eq!(root, 64 * u64::from(n - 1), "binomial gather on {n} ranks");
    }
}

/// A profile's collectives replay as their simulated ops, counted as often as the busiest
/// rank made them, with topo-run's and the fastest flat algorithm's times those of
/// `predict` for the class's smallest size.
#[test]
fn a_profile_replays_its_calls_at_their_sizes_and_counts() {
    use topo_profile::{Collective, Profile, SizeClass, Spread};
    let spread = |s: f64| Spread { max: s, mean: s };
    let class = |min: u64, calls_max: u64| SizeClass {
        min_bytes: min,
        max_bytes: Some(if min == 0 { 0 } else { 2 * min - 1 }),
        calls: calls_max * 4,
        calls_max,
        seconds: spread(1e-6),
    };
    let entry = |call: &str, comm: &str, classes: Vec<SizeClass>| Collective {
        call: call.into(),
        comm: comm.into(),
        ranks: 4,
        calls: classes.iter().map(|c| c.calls).sum(),
        calls_max: classes.iter().map(|c| c.calls_max).sum(),
        topo_run: 0,
        mpi: Default::default(),
        seconds: spread(2e-6),
        bytes: classes,
    };
    let profile = Profile {
        format: topo_profile::FORMAT.into(),
        native: false,
        ranks: 4,
        nodes: 2,
        mpi: "Test MPI".into(),
        wall_seconds: spread(1.0),
        collective_seconds: spread(1e-3),
        collectives: vec![
            entry(
                "MPI_Allreduce",
                "world",
                vec![class(8, 100), class(4096, 3)],
            ),
            entry("MPI_Iallgatherv", "split", vec![class(64, 5)]),
            entry("MPI_Barrier", "world", vec![class(0, 7)]),
            entry("MPI_Comm_spawn", "world", vec![class(0, 1)]),
        ],
    };
    let cluster = Cluster::new(job(4, 4, false), None, Settings::default()).unwrap();
    let model = CostModel::default();
    let r = crate::replay::replay(&cluster, &model, &profile).unwrap();
    assert_eq!(r.rows.len(), 3);
    assert_eq!(r.skipped.len(), 1, "{:?}", r.skipped);
    let expect = |op: Op, bytes: u64, blocking: bool| {
        let preds = predict(&cluster, &model, op, bytes).unwrap();
        let t = |p: &crate::Prediction| match &p.result {
            Predicted::Outcome(o) => Some(o.time_us),
            Predicted::Skipped(_) => None,
        };
        let topo = preds
            .iter()
            .find(|p| blocking && p.algorithm == TOPO_RUN_BLOCKING && t(p).is_some())
            .or_else(|| preds.iter().find(|p| p.algorithm == TOPO_RUN))
            .and_then(t)
            .unwrap();
        let flat = preds
            .iter()
            .filter(|p| !crate::is_topo_run(p.algorithm))
            .filter_map(t)
            .min_by(f64::total_cmp)
            .unwrap();
        (topo, flat)
    };
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
    let (t8, f8) = expect(Op::Allreduce, 8, true);
    let (t4k, f4k) = expect(Op::Allreduce, 4096, true);
    let ar = &r.rows[0];
    assert_eq!((ar.op, ar.exact, ar.calls), (Op::Allreduce, true, 103));
    assert!(close(ar.topo_run_us, 100.0 * t8 + 3.0 * t4k), "{ar:?}");
    assert!(close(ar.flat_us, 100.0 * f8 + 3.0 * f4k), "{ar:?}");
    let ag = &r.rows[1];
    let (t64, f64_) = expect(Op::Allgatherv, 64, false);
    assert_eq!((ag.op, ag.exact, ag.calls), (Op::Allgatherv, false, 5));
    assert!(
        close(ag.topo_run_us, 5.0 * t64) && close(ag.flat_us, 5.0 * f64_),
        "{ag:?}"
    );
    assert_eq!(r.rows[2].op, Op::Barrier);
    assert!(close(
        r.topo_run_us,
        r.rows.iter().map(|x| x.topo_run_us).sum()
    ));
    assert!(
        r.caveats
            .iter()
            .any(|c| c.contains("5 calls were on smaller communicators"))
    );
    assert!(r.caveats.iter().any(|c| c.contains("MPI_Iallgatherv")));
    for (call, op) in [
        ("MPI_Ibarrier", Op::Barrier),
        ("MPI_Ireduce_scatter_block", Op::ReduceScatter),
        ("MPI_Iscan", Op::Scan),
        ("MPI_Exscan", Op::Exscan),
        ("MPI_Ialltoallv", Op::Alltoallv),
        ("MPI_Reduce_scatter", Op::ReduceScatterV),
        ("MPI_Gatherv", Op::Gatherv),
        ("MPI_Iscatterv", Op::Scatterv),
    ] {
        assert_eq!(crate::replay::op_of(call).map(|o| o.0), Some(op), "{call}");
    }
}

/// Bytes sent over every link of a prediction.
fn all_bytes(p: &crate::Prediction) -> u64 {
    match &p.result {
        Predicted::Outcome(o) => o.traffic.values().map(|t| t.bytes).sum(),
        Predicted::Skipped(why) => panic!("{} skipped: {why}", p.algorithm),
    }
}

/// The v-forms run topo-run's own v-form algorithms, with every block of the size given:
/// the direct forms move each block once (a Gatherv's and Scatterv's `n - 1` blocks, an
/// Allgatherv's and Alltoallv's `n (n - 1)`), the Allgatherv's flat exchanges too, and the
/// blocking and nonblocking forms of each move the same bytes; the Reduce_scatter with
/// per-rank counts takes the Reduce_scatter_block's algorithm for blocks of one size; the
/// Exscan sends what the Scan does and combines less.
#[test]
fn the_v_forms_and_exscan_run_their_own_algorithms() {
    let model = CostModel::default();
    for (nodes, rpn, cyclic) in [(1, 4, false), (4, 4, false), (4, 4, true), (3, 5, false)] {
        let cluster = Cluster::new(job(nodes, rpn, cyclic), None, Settings::default()).unwrap();
        let n = u64::from(nodes * rpn);
        // 64 KiB blocks (and any with more than 2 ranks per node) take the Allgatherv's
        // flat exchanges on several nodes.
        for len in [8u64, 1000, 64 << 10] {
            let shape = format!("{nodes} x {rpn} cyclic {cyclic}, {len} B");
            for (op, blocks) in [
                (Op::Gatherv, n - 1),
                (Op::Scatterv, n - 1),
                (Op::Allgatherv, n * (n - 1)),
                (Op::Alltoallv, n * (n - 1)),
            ] {
                let preds = predict(&cluster, &model, op, len).unwrap();
                for algorithm in [TOPO_RUN, TOPO_RUN_BLOCKING] {
                    let p = preds.iter().find(|p| p.algorithm == algorithm).unwrap();
                    // The blocking forms may gather through the leaders: at least once.
                    let moved = all_bytes(p);
                    let total = (n * len) as usize;
                    let flat = topo_runtime::nonblocking::iallgatherv::schedule_flat(
                        nodes, n as usize, total,
                    );
                    if op == Op::Allgatherv && algorithm == TOPO_RUN && flat {
                        // The remapped exchanges first move each block whose rank's
                        // position is not its rank to that position.
                        assert!(
                            (blocks * len..=(blocks + n) * len).contains(&moved),
                            "{algorithm} {op}, {shape}: {moved}"
                        );
                    } else if algorithm == TOPO_RUN || op == Op::Alltoallv {
                        assert_eq!(moved, blocks * len, "{algorithm} {op}, {shape}");
                    } else {
                        assert!(moved >= blocks * len, "{algorithm} {op}, {shape}: {moved}");
                    }
                }
            }
            let v = predict(&cluster, &model, Op::ReduceScatterV, len).unwrap();
            let block = predict(&cluster, &model, Op::ReduceScatter, len).unwrap();
            let topo = |ps: &[crate::Prediction]| {
                ps.iter()
                    .find(|p| p.algorithm == TOPO_RUN)
                    .map(all_bytes)
                    .unwrap()
            };
            // (The block form's schedule takes the Allreduce's form where its blocking
            // form goes through the root or the leaders; the v-form recursive halving.)
            let s = Settings {
                nodes,
                ranks: nodes * rpn,
                ..Settings::default()
            };
            use topo_hierarchy::settings::ReduceScatterAlg::{Allreduce, Halving};
            if matches!(s.reduce_scatter_for(len as usize), Allreduce | Halving) {
                assert_eq!(topo(&v), topo(&block), "reduce_scatter_v, {shape}");
            }
            let ex = predict(&cluster, &model, Op::Exscan, len).unwrap();
            let scan = predict(&cluster, &model, Op::Scan, len).unwrap();
            assert_eq!(topo(&ex), topo(&scan), "exscan, {shape}");
            for p in ex.iter().chain(&v) {
                assert!(matches!(p.result, Predicted::Outcome(_)), "{p:?}, {shape}");
            }
        }
    }
    // The flat Exscan: rank 0 sends and combines nothing of another's; the others receive
    // what the flat Scan's ranks do.
    for n in [1u32, 2, 5, 8] {
        for r in 0..n {
            let steps = |p: &Program| p.rounds.iter().flatten().cloned().collect::<Vec<_>>();
            let (ex, scan) = (flat::exscan_rd(r, n, 8), flat::scan_rd(r, n, 8));
            let recvs = |s: Vec<Step>| s.iter().filter(|x| matches!(x, Step::Recv { .. })).count();
            assert_eq!(
                recvs(steps(&ex)),
                recvs(steps(&scan)),
                "rd, rank {r} of {n}"
            );
            let lin = steps(&flat::exscan_linear(r, n, 8));
            assert_eq!(recvs(lin), usize::from(r > 0), "linear, rank {r} of {n}");
        }
    }
}

/// Job sizes that are not powers of two: the Allgather of 512 B and 2 KiB per rank (the
/// ring where the remapped Bruck's last steps flood the network: 4.4 and 13.6 x the ring
/// before), the Allgather of 8 B (Bruck's in rank order: 1.2-1.5 x before) and the
/// Reduce_scatter of 4 KiB blocks (the ring: 1.9-2.4 x before) within 2 % of the best flat
/// algorithm, blocking and not.
#[test]
fn jobs_whose_size_is_not_a_power_of_two_keep_up_with_the_flat_algorithms() {
    let model = CostModel::default();
    for (nodes, rpn, cyclic) in [
        (12u32, 36u32, false),
        (3, 36, false),
        (5, 6, true),
        (9, 2, false),
    ] {
        // Nodes of two NUMA nodes of `rpn / 2` cores each.
        let job = job_from_str(&format!(
            "layout: {{nodes: 'n[1-{nodes}]', ranks_per_node: {rpn}, mapping: by-core, \
             distribution: {}, hardware: {{sockets: 1, numa_per_socket: 2, \
             cores_per_numa: {}, l3_per_socket: 1, threads_per_core: 1}}}}",
            if cyclic { "cyclic" } else { "block" },
            rpn.div_ceil(2)
        ))
        .unwrap();
        let cluster = Cluster::new(job, None, Settings::default()).unwrap();
        for (op, bytes) in [
            (Op::Allgather, 8),
            (Op::Allgather, 512),
            (Op::Allgather, 2048),
            (Op::ReduceScatter, 4096),
            (Op::ReduceScatterV, 4096),
        ] {
            let preds = predict(&cluster, &model, op, bytes).unwrap();
            let t = |p: &crate::Prediction| match &p.result {
                Predicted::Outcome(o) => o.time_us,
                Predicted::Skipped(why) => panic!("{} skipped: {why}", p.algorithm),
            };
            let flat = preds
                .iter()
                .filter(|p| !crate::is_topo_run(p.algorithm))
                .map(t)
                .fold(f64::INFINITY, f64::min);
            for p in preds.iter().filter(|p| crate::is_topo_run(p.algorithm)) {
                assert!(
                    // (Within 2 %: the scratch copies of Bruck's in rank order.)
                    t(p) <= flat * 1.02,
                    "{nodes} x {rpn} cyclic {cyclic}, {op} of {bytes}: {} {:.1} us against {flat:.1}",
                    p.algorithm,
                    t(p)
                );
            }
        }
    }
}
