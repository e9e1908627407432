//! Nonblocking schedules over the `sim` transport: random hierarchies, several
//! collectives in flight at once on every rank, every result against the reference.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use topo_hierarchy::remap::partition::Placement;
use topo_runtime::combine::{Combine, sum_i64};
use topo_runtime::nonblocking::{
    Builder, Engine, Reach, Schedule, iallgather, iallreduce, ibarrier, ibcast, ireduce,
};
use topo_runtime::transport::Fabric;

use crate::sim::{
    LEVELS, bytes, data, ints, network_of, node_of, plans, plans_placed, run, settings, sum,
};

/// The tests' sum, claiming to call MPI: polls that may not call MPI
/// ([`Reach::WithoutMpi`], the progress thread's) leave its combines to the others.
struct MpiLikeSum;

impl Combine for MpiLikeSum {
    fn elem_size(&self) -> usize {
        8
    }
    fn combine(&self, acc: &mut [u8], incoming: &[u8]) {
        sum_i64().combine(acc, incoming)
    }
    fn calls_mpi(&self) -> bool {
        true
    }
}

/// A schedule over the caller's buffers.
pub(crate) fn schedule(
    name: &'static str,
    b: Builder,
    send: Option<&[u8]>,
    recv: Option<&mut [u8]>,
    acc: usize,
    tmp: usize,
) -> Schedule {
    // The engine reuses the buffers of completed schedules as they are: start from
    // garbage, so that a builder that reads its accumulator or scratch before writing it
    // fails here.
    let (acc, tmp) = (vec![0xa5; acc], vec![0x5a; tmp]);
    // SAFETY: every buffer outlives the engine drain in `finish`, and nothing touches them
    // until then.
    unsafe { Schedule::with_buffers(name, b, send, recv, acc, tmp, Some(Box::new(MpiLikeSum))) }
}

/// Polls until every schedule has completed, failing after 30 s. Three polls in four
/// skip the steps that call MPI, as the progress thread's do, so schedules also advance
/// part of a round at a time.
pub(crate) fn finish(engine: &mut Engine, fabric: &mut dyn Fabric) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut turn = 0u32;
    while !engine.is_idle() {
        turn += 1;
        let reach = if turn.is_multiple_of(4) {
            Reach::All
        } else {
            Reach::WithoutMpi
        };
        engine.progress(fabric, reach).unwrap();
        assert!(
            Instant::now() < deadline,
            "schedules deadlock in {:?}",
            engine.current()
        );
        std::thread::yield_now();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn nonblocking_collectives_in_flight_together_match_the_reference(
        nodes in 1u32..5, rpn in 1u32..17, sockets in 1u32..3, levels in 0usize..5,
        cyclic: bool, s in settings(), len in prop::sample::select(vec![1usize, 3, 511, 1700]),
        root_pick in 0u32..1000,
    ) {
        let rpn = rpn.min(sockets * 8);
        let plans = plans(nodes, rpn, sockets, LEVELS[levels], cyclic);
        let size = plans.len() as u32;
        let root = root_pick % size;
        let expect = sum(size, len);
        // Ibarrier and Iallreduce run on the view over the network, as the runtime runs
        // them, with the others in flight on the plan's view.
        let network = network_of(&plans);
        let (out, _) = run(&plans, |view, fabric| {
            let net_view = view.over_network(&network);
            let me = view.rank;
            let is_root = me == root;
            let n = len * 8;
            let mine = bytes(&data(me, len));
            let mut b = if is_root { mine.clone() } else { vec![0; n] };
            let mut r = vec![0u8; n];
            let mut inplace = mine.clone();
            let mut a = vec![0u8; n];
            let mut ip = mine.clone();
            let mut engine = Engine::default();
            // Six collectives started back to back, then completed together.
            let bc = ibcast::build(view, &s, root, n);
            let sb = schedule("MPI_Ibcast", bc, None, Some(&mut b), 0, 0);
            let (rb, acc) = ireduce::build(view, &s, root, true, n, 8);
            let sr = schedule("MPI_Ireduce", rb, Some(&mine), is_root.then_some(&mut r[..]), acc, 0);
            let (rb, acc) = ireduce::build(view, &s, root, !is_root, n, 8);
            let (send, recv) = if is_root { (None, Some(&mut inplace[..])) } else { (Some(&mine[..]), None) };
            let sri = schedule("MPI_Ireduce", rb, send, recv, acc, 0);
            let sbar = schedule("MPI_Ibarrier", ibarrier::build(&net_view, &s), None, None, 0, 0);
            let (ab, tmp) = iallreduce::build(&net_view, &s, true, n, 8);
            let sa = schedule("MPI_Iallreduce", ab, Some(&mine), Some(&mut a), 0, tmp);
            let (ab, tmp) = iallreduce::build(&net_view, &s, false, n, 8);
            let sai = schedule("MPI_Iallreduce", ab, None, Some(&mut ip), 0, tmp);
            for (id, sched) in [sb, sr, sri, sbar, sa, sai].into_iter().enumerate() {
                engine.start(id as u64, sched, fabric).unwrap();
            }
            finish(&mut engine, fabric);
            assert_eq!(ints(&b), data(root, len), "ibcast at rank {me}");
            if is_root {
                assert_eq!(ints(&r), expect, "ireduce at root {root}");
                assert_eq!(ints(&inplace), expect, "in-place ireduce at root {root}");
            }
            assert_eq!(ip, a, "in-place iallreduce at rank {me}");
            ints(&a)
        });
        for (rank, got) in out.iter().enumerate() {
            prop_assert_eq!(got, &expect, "iallreduce at rank {}", rank);
        }
    }
}

/// Runs the barrier `build` gives each rank on the ranks of `plans`, rank `late` starting
/// 30 ms after the others, and returns, per rank, how many ranks had started when its
/// barrier completed.
fn started_when_completed(
    plans: &[topo_hierarchy::RankPlan],
    late: u32,
    build: impl Fn(&topo_runtime::view::View) -> Builder + Sync,
) -> Vec<i64> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let started = AtomicUsize::new(0);
    let (out, _) = run(plans, |view, fabric| {
        if view.rank == late {
            std::thread::sleep(Duration::from_millis(30));
        }
        started.fetch_add(1, Ordering::SeqCst);
        let mut engine = Engine::default();
        let sched = schedule("MPI_Ibarrier", build(view), None, None, 0, 0);
        engine.start(1, sched, fabric).unwrap();
        finish(&mut engine, fabric);
        vec![started.load(Ordering::SeqCst) as i64]
    });
    out.into_iter().map(|seen| seen[0]).collect()
}

#[test]
fn nobody_completes_an_ibarrier_before_everyone_has_started_it() {
    let s = topo_hierarchy::Settings::default();
    for (nodes, per_node, levels) in [
        (1, 5, "node,world"),
        (2, 4, "numa,node,world"),
        (3, 3, "node,world"),
        (3, 4, "numa,node,world"),
    ] {
        let plans = plans(nodes, per_node, 2, levels, false);
        let n = plans.len();
        // The last rank starts late.
        let seen = started_when_completed(&plans, n as u32 - 1, |view| ibarrier::build(view, &s));
        for (rank, seen) in seen.into_iter().enumerate() {
            assert_eq!(seen, n as i64, "{nodes}x{per_node} {levels}: rank {rank}");
        }
    }
}

#[test]
fn nobody_completes_a_flat_barrier_before_everyone_has_started_it() {
    use topo_hierarchy::remap;
    for (nodes, per_node, cyclic, late) in [
        (1, 5, false, 4),
        (2, 4, false, 0),
        (3, 3, true, 5),
        (3, 4, false, 7),
        (4, 2, true, 2),
    ] {
        let plans = plans(nodes, per_node, 2, "node,world", cyclic);
        let n = plans.len();
        let pos = remap::interleaved_positions(&Placement::nodes(&node_of(&plans)));
        let seen = started_when_completed(&plans, late, |view| {
            ibarrier::build_flat(&remap::dissemination_peers(&pos, view.rank).unwrap())
        });
        for (rank, seen) in seen.into_iter().enumerate() {
            assert_eq!(
                seen, n as i64,
                "{nodes}x{per_node} late {late}: rank {rank}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn iallgather_in_flight_with_others_matches_the_reference(
        nodes in prop::sample::select(vec![1u32, 2, 4]),
        rpn in prop::sample::select(vec![1u32, 2, 4, 8]),
        cyclic: bool, remapped: bool, s in settings(),
        len in prop::sample::select(vec![1usize, 3, 511, 1700]),
    ) {
        let plans = plans(nodes, rpn, 2, "node,world", cyclic);
        let size = plans.len() as u32;
        let node_of = node_of(&plans);
        let pos: Vec<u32> = if remapped {
            topo_hierarchy::remap::positions(&node_of).unwrap()
        } else {
            (0..size).collect()
        };
        let expect: Vec<i64> = (0..size).flat_map(|r| data(r, len)).collect();
        let (out, _) = run(&plans, |view, fabric| {
            let me = view.rank;
            let peers = topo_hierarchy::remap::peers(&pos, me).unwrap();
            let n = len * 8;
            let mine = bytes(&data(me, len));
            let mut all = vec![0u8; n * size as usize];
            let mut inplace = vec![0u8; n * size as usize];
            inplace[me as usize * n..(me as usize + 1) * n].copy_from_slice(&mine);
            let mut b = if me == 0 { mine.clone() } else { vec![0; n] };
            let mut engine = Engine::default();
            // Out of place, a broadcast, and in place, started back to back.
            let g = schedule("MPI_Iallgather", iallgather::build_rd(me, &peers, n, true), Some(&mine), Some(&mut all), 0, 0);
            let sb = schedule("MPI_Ibcast", ibcast::build(view, &s, 0, n), None, Some(&mut b), 0, 0);
            let gi = schedule("MPI_Iallgather", iallgather::build_rd(me, &peers, n, false), None, Some(&mut inplace), 0, 0);
            for (id, sched) in [g, sb, gi].into_iter().enumerate() {
                engine.start(id as u64, sched, fabric).unwrap();
            }
            finish(&mut engine, fabric);
            assert_eq!(ints(&b), data(0, len), "ibcast at rank {me}");
            assert_eq!(inplace, all, "in-place iallgather at rank {me}");
            ints(&all)
        });
        for (rank, got) in out.iter().enumerate() {
            prop_assert_eq!(got, &expect, "iallgather at rank {}", rank);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn bruck_iallgather_matches_the_reference(
        nodes in 1u32..5, rpn in 1u32..6, cyclic: bool, chosen: bool, has_send: bool,
        len in prop::sample::select(vec![1usize, 3, 511, 1700]),
    ) {
        let plans = plans(nodes, rpn, 2, "node,world", cyclic);
        let size = plans.len() as u32;
        let node_of = node_of(&plans);
        let pos: Vec<u32> = if chosen {
            topo_hierarchy::remap::bruck_chosen(&Placement::nodes(&node_of))
        } else {
            (0..size).collect()
        };
        let expect: Vec<i64> = (0..size).flat_map(|r| data(r, len)).collect();
        let (out, _) = run(&plans, |view, fabric| {
            let me = view.rank;
            let peers = topo_hierarchy::remap::bruck_peers(&pos, me).unwrap();
            let n = len * 8;
            let mine = bytes(&data(me, len));
            let mut all = vec![0u8; n * size as usize];
            if !has_send {
                all[me as usize * n..(me as usize + 1) * n].copy_from_slice(&mine);
            }
            let mut engine = Engine::default();
            let (b, tmp) = iallgather::build_bruck(me, &peers, n, has_send);
            let send = has_send.then_some(&mine[..]);
            let g = schedule("MPI_Iallgather", b, send, Some(&mut all), 0, tmp);
            engine.start(0, g, fabric).unwrap();
            finish(&mut engine, fabric);
            ints(&all)
        });
        for (rank, got) in out.iter().enumerate() {
            prop_assert_eq!(got, &expect, "bruck iallgather at rank {}", rank);
        }
    }
}

/// Rabenseifner's Allreduce in pieces: on 4 nodes x 8 (32 slots, 5 halving steps), 1 MiB
/// in 64 KiB pieces is 16 pieces, each two rounds behind the one before: `2 * 5 + 15 * 2`
/// rounds; every rank sends what the whole message sends, no round exchanges twice with one
/// partner, and a piece's regions never overlap another's.
#[test]
fn rabenseifner_in_pieces_overlaps_them_two_rounds_apart() {
    use topo_hierarchy::remap::halving::HalvingOrder;
    use topo_runtime::nonblocking::Action;
    use topo_runtime::nonblocking::iallreduce::PIECE_LAG;
    let nodes: Vec<u32> = (0..32).map(|r| r / 8).collect();
    let order = HalvingOrder::new(&Placement::nodes(&nodes));
    let sent = |b: &Builder| -> usize {
        b.rounds()
            .flatten()
            .map(|(_, a)| match a {
                Action::Send { src, .. } => src.len,
                _ => 0,
            })
            .sum()
    };
    for rank in 0..32 {
        let peers = order.peers(rank).unwrap();
        let whole = iallreduce::build_rabenseifner(&peers, 8, true, 1 << 20, 0);
        let pieces = iallreduce::build_rabenseifner(&peers, 8, true, 1 << 20, 64 << 10);
        assert_eq!(whole.rounds().count(), 10);
        assert_eq!(pieces.rounds().count(), 10 + 15 * PIECE_LAG);
        assert_eq!(sent(&pieces), sent(&whole), "rank {rank}");
        for (i, round) in pieces.rounds().enumerate() {
            let steps: Vec<_> = round.collect();
            let mut partners: Vec<u32> = steps
                .iter()
                .filter_map(|(_, a)| match a {
                    Action::Send { to, .. } => Some(to[0]),
                    _ => None,
                })
                .collect();
            let n = partners.len();
            partners.sort_unstable();
            partners.dedup();
            assert_eq!(
                partners.len(),
                n,
                "rank {rank}, round {i}: one partner twice"
            );
            let regions: Vec<_> = steps
                .iter()
                .filter_map(|(_, a)| match a {
                    Action::RecvReduce { acc, .. } => Some(*acc),
                    Action::Recv { dst, .. } => Some(*dst),
                    _ => None,
                })
                .collect();
            for (x, a) in regions.iter().enumerate() {
                for b in &regions[x + 1..] {
                    assert!(
                        a.off + a.len <= b.off || b.off + b.len <= a.off,
                        "rank {rank}, round {i}"
                    );
                }
            }
        }
    }
}

/// Bruck's Allgather (a job whose size is not a power of two) keeps two orders: the one
/// chosen to send the fewest blocks between nodes, and for blocks below
/// `bruck_small_below` bytes rank order, as MPI libraries run it; the threshold falls with
/// the ranks per node.
#[test]
fn small_bruck_blocks_take_rank_order() {
    use topo_hierarchy::settings::AllgatherAlg;
    use topo_runtime::nonblocking::iallgather::{Exchange, bruck_small_below};
    for (nodes, rpn, below) in [(3u32, 6u32, 836), (5, 2, 4096), (3, 36, 64), (3, 30, 74)] {
        let node_of: Vec<u32> = (0..nodes * rpn).map(|r| r / rpn).collect();
        let place = Placement::nodes(&node_of);
        assert_eq!(bruck_small_below(&place), below, "{nodes} x {rpn}");
        let order = iallgather::Order::new(AllgatherAlg::RecursiveDoubling, &place).unwrap();
        let mut differ = false;
        for rank in 0..nodes * rpn {
            let e = order.exchange(rank).unwrap();
            let Exchange::Bruck(large, small) = &e else {
                panic!("{nodes} x {rpn}, rank {rank}: not Bruck's: {e:?}");
            };
            let small_peers = match small {
                Some((small, b)) => {
                    assert_eq!(*b, below);
                    small
                }
                None => large,
            };
            assert_eq!(small_peers.position, rank, "rank order");
            assert_eq!(e.bruck_peers(below - 1), Some(small_peers));
            assert_eq!(e.bruck_peers(below), Some(large));
            differ |= small.is_some();
        }
        assert!(differ, "{nodes} x {rpn}: the chosen order is rank order");
    }
}

/// With the switches known, recursive doubling's Allgather keeps two orders: the one that
/// keeps the heavy steps under a switch, and for blocks below `SMALL_BLOCK` the one chosen
/// without the switches, which under cyclic placement is plain recursive doubling (no
/// first exchange across the network).
#[test]
fn small_allgather_blocks_take_the_order_chosen_without_switches() {
    use topo_hierarchy::settings::AllgatherAlg;
    use topo_runtime::nonblocking::iallgather::{Exchange, SMALL_BLOCK, rd_plain_below};
    // 8 nodes x 4 ranks, cyclic; nodes 0-3 under one switch, 4-7 under another.
    let nodes: Vec<u32> = (0..32).map(|r| r % 8).collect();
    let switches: Vec<u32> = nodes.iter().map(|&n| n / 4).collect();
    let place = Placement::with_switches(&nodes, &switches);
    let order = iallgather::Order::new(AllgatherAlg::RecursiveDoubling, &place).unwrap();
    let plain =
        iallgather::Order::new(AllgatherAlg::RecursiveDoubling, &Placement::nodes(&nodes)).unwrap();
    // Rank order is the one chosen without switches here: up to SMALL_BLOCK or
    // rd_plain_below, whichever is larger.
    let below = rd_plain_below(&place).max(SMALL_BLOCK);
    for rank in 0..32 {
        let e = order.exchange(rank).unwrap();
        let Exchange::RecursiveDoubling(large, smaller) = &e else {
            panic!("rank {rank}: not recursive doubling: {e:?}");
        };
        let small = &smaller.last().expect("an order for small blocks").0;
        assert_eq!(
            small.position, rank,
            "plain recursive doubling under cyclic placement"
        );
        assert_ne!(small, large);
        assert_eq!(e.doubling_peers(8), Some(small));
        assert_eq!(e.doubling_peers(below - 1), Some(small));
        assert_eq!(e.doubling_peers(below), Some(large));
        // Without switches there is one order, the small blocks' one.
        let p = plain.exchange(rank).unwrap();
        assert!(
            matches!(&p, Exchange::RecursiveDoubling(_, s) if s.is_empty()),
            "{p:?}"
        );
        assert_eq!(p.doubling_peers(8), Some(small));
    }
}

/// Under block placement the chosen order starts with an exchange into the positions
/// across the network; the smallest blocks skip it and run in rank order, below a size
/// that shrinks as rank order's extra blocks between nodes grow.
#[test]
fn the_smallest_allgather_blocks_take_rank_order_under_block_placement() {
    use topo_hierarchy::settings::AllgatherAlg;
    use topo_runtime::nonblocking::iallgather::{Exchange, rd_plain_below};
    for (nodes, per_node, below) in [
        (2, 2, 4096),
        (16, 2, 1170),
        (2, 8, 682),
        (128, 2, 130),
        (2, 32, 34),
    ] {
        let node_of: Vec<u32> = (0..nodes * per_node).map(|r| r / per_node).collect();
        let place = Placement::nodes(&node_of);
        assert_eq!(rd_plain_below(&place), below, "{nodes} x {per_node}");
        let order = iallgather::Order::new(AllgatherAlg::RecursiveDoubling, &place).unwrap();
        let mut remapped = false;
        for rank in 0..nodes * per_node {
            let e = order.exchange(rank).unwrap();
            let Exchange::RecursiveDoubling(large, _) = &e else {
                panic!("{nodes} x {per_node}: not recursive doubling: {e:?}");
            };
            let small = e.doubling_peers(below - 1).unwrap();
            assert_eq!(small.position, rank, "{nodes} x {per_node}: rank order");
            assert_eq!(small.send_own_to, rank, "no first exchange");
            assert_eq!(e.doubling_peers(below), Some(large));
            remapped |= large.position != rank;
        }
        assert!(
            remapped,
            "{nodes} x {per_node}: the chosen order is rank order"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// Random placements (any rank on any of up to 6 nodes, the nodes under one switch or
    /// two), 1 to 64 ranks: the exchange the runtime picks for `rd` (recursive doubling or
    /// Bruck, in the chosen order, as a schedule; with two switches, small blocks in the
    /// order chosen without them), the ring in node-major order and the hierarchical Allgather (its top
    /// group exchanging sets of uneven runs, in place from 8 KiB blocks) all give the
    /// reference.
    #[test]
    fn allgathers_on_random_placements_match_the_reference(
        placement in prop::collection::vec(0u32..6, 1..65),
        len in prop::sample::select(vec![1usize, 3, 257, 1100]),
        has_send: bool, ring_top: bool, two_switches: bool,
    ) {
        use topo_hierarchy::settings::TopAlg;
        let top = if ring_top { TopAlg::Ring } else { TopAlg::RecursiveDoubling };
        let plans = plans_placed(&placement);
        let size = plans.len() as u32;
        let nodes = node_of(&plans);
        use topo_hierarchy::settings::AllgatherAlg;
        let switches: Vec<u32> = nodes.iter().map(|&n| if two_switches { n % 2 } else { 0 }).collect();
        let place = Placement::with_switches(&nodes, &switches);
        let rd = iallgather::Order::new(AllgatherAlg::RecursiveDoubling, &place).unwrap();
        let ring = iallgather::Order::new(AllgatherAlg::Ring, &place).unwrap();
        let expect: Vec<i64> = (0..size).flat_map(|r| data(r, len)).collect();
        let s = topo_hierarchy::Settings::default();
        let (out, _) = run(&plans, |view, fabric| {
            let me = view.rank;
            let n = len * 8;
            let mine = bytes(&data(me, len));
            let mut all = vec![0u8; n * size as usize];
            if !has_send {
                all[me as usize * n..(me as usize + 1) * n].copy_from_slice(&mine);
            }
            let (b, tmp) = rd.exchange(me).unwrap().build(me, n, has_send);
            let mut engine = Engine::default();
            let send = has_send.then_some(&mine[..]);
            let g = schedule("MPI_Iallgather", b, send, Some(&mut all), 0, tmp);
            engine.start(0, g, fabric).unwrap();
            finish(&mut engine, fabric);
            let mut hier = vec![0u8; n * size as usize];
            topo_runtime::allgather::allgather(view, fabric, &s, top, Some(&mine), &mut hier).unwrap();
            assert_eq!(hier, all, "hierarchical against the exchange at rank {me}");
            let mut around = vec![0u8; n * size as usize];
            if !has_send {
                around[me as usize * n..(me as usize + 1) * n].copy_from_slice(&mine);
            }
            let (b, tmp) = ring.exchange(me).unwrap().build(me, n, has_send);
            let g = schedule("MPI_Iallgather", b, send, Some(&mut around), 0, tmp);
            engine.start(0, g, fabric).unwrap();
            finish(&mut engine, fabric);
            assert_eq!(around, all, "ring against the exchange at rank {me}");
            ints(&all)
        });
        for (rank, got) in out.iter().enumerate() {
            prop_assert_eq!(got, &expect, "allgather at rank {}", rank);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// The flat Allreduce forms (the ring in switch-major, node-major order, Rabenseifner's
    /// in the halving order, whole and in pieces) on random jobs of 1 to 64 ranks, out of place and in place,
    /// with an Ibcast in flight between them; messages as short as one element, so that
    /// most blocks are empty.
    #[test]
    fn flat_iallreduce_matches_the_reference(
        nodes in 1u32..5, rpn in 1u32..17, cyclic: bool, alg in 0usize..4,
        len in prop::sample::select(vec![1usize, 3, 511, 1700]),
    ) {
        use topo_hierarchy::remap::{self, halving::HalvingOrder};
        let plans = plans(nodes, rpn, 2, "node,world", cyclic);
        let size = plans.len() as u32;
        let place = Placement::nodes(&node_of(&plans));
        let ring_pos = remap::ring_positions(&place);
        let halving = HalvingOrder::new(&place);
        let expect = sum(size, len);
        let s = topo_hierarchy::Settings::default();
        let (out, _) = run(&plans, |view, fabric| {
            let me = view.rank;
            let n = len * 8;
            let mine = bytes(&data(me, len));
            let mut a = vec![0u8; n];
            let mut ip = mine.clone();
            let mut b = if me == 0 { mine.clone() } else { vec![0; n] };
            let build = |send| match alg {
                0 => (iallreduce::build_ring(&remap::ring_peers(&ring_pos, me).unwrap(), 8, send, n), 0),
                1 => (iallreduce::build_rabenseifner(&halving.peers(me).unwrap(), 8, send, n, n), 0),
                // In pieces of three elements, as many as the slots allow.
                2 => (iallreduce::build_rabenseifner(&halving.peers(me).unwrap(), 8, send, n, 24), 0),
                _ => iallreduce::build_recursive_doubling(&halving.peers(me).unwrap(), send, n),
            };
            let mut engine = Engine::default();
            let ((ba, ta), (bi, ti)) = (build(true), build(false));
            let sa = schedule("MPI_Iallreduce", ba, Some(&mine), Some(&mut a), 0, ta);
            let sb = schedule("MPI_Ibcast", ibcast::build(view, &s, 0, n), None, Some(&mut b), 0, 0);
            let si = schedule("MPI_Iallreduce", bi, None, Some(&mut ip), 0, ti);
            for (id, sched) in [sa, sb, si].into_iter().enumerate() {
                engine.start(id as u64, sched, fabric).unwrap();
            }
            finish(&mut engine, fabric);
            assert_eq!(ints(&b), data(0, len), "ibcast at rank {me}");
            assert_eq!(ip, a, "in-place iallreduce at rank {me}");
            ints(&a)
        });
        for (rank, got) in out.iter().enumerate() {
            prop_assert_eq!(got, &expect, "iallreduce at rank {}", rank);
        }
    }
}
