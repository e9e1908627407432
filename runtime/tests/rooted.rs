//! Gather, Scatter and Allgatherv over the `sim` transport: random hierarchies, placements and roots
//! against a simple reference, and the messages that cross nodes.

use proptest::prelude::*;
use topo_hierarchy::settings::RootedVAlg;
use topo_hierarchy::{RankPlan, Settings};
use topo_runtime::nonblocking::{Engine, iallgatherv, igather, iscatter};
use topo_runtime::subtrees::Subtrees;
use topo_runtime::transport::sim::INTER_NODE;
use topo_runtime::{gather, gatherv, scatter, scatterv};

use crate::nonblocking::{finish, schedule};
use crate::sim::{LEVELS, bytes, data, ints, node_of, plans, plans_placed, plans_without_map, run};

/// The settings a context of `plans` works with: the defaults, with the job's number of
/// nodes (which a context learns at its setup).
fn settings_for(plans: &[RankPlan]) -> Settings {
    let nodes = plans
        .iter()
        .map(|p| p.node.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .len() as u32;
    Settings {
        nodes,
        ..Settings::default()
    }
}

/// What every rank holds after a Gather to `root` of `len` numbers each (the root all
/// blocks, the others nothing) and after a Scatter of the same blocks back from `root`
/// (each its own), with the root's blocks in place or not.
fn gather_then_scatter(plans: &[RankPlan], root: u32, len: usize, in_place: bool) -> Vec<Vec<i64>> {
    let size = plans.len();
    let s = settings_for(plans);
    let (out, _) = run(plans, |view, fabric| {
        let sub = Subtrees::learn(view, fabric).unwrap();
        let mine = bytes(&data(view.rank, len));
        let b = mine.len();
        let mut all = vec![0u8; b * size];
        let is_root = view.rank == root;
        let at = view.rank as usize * b..(view.rank as usize + 1) * b;
        if is_root && in_place {
            all[at.clone()].copy_from_slice(&mine);
        }
        let send = (!(is_root && in_place)).then_some(&mine[..]);
        let recv = is_root.then_some(&mut all[..]);
        gather::gather(view, fabric, &sub, &s, root, send, recv, b).unwrap();
        // The same Gather through the leaders as a schedule (Igather): the same blocks.
        let mut iall = vec![0xee_u8; b * size];
        if is_root && in_place {
            iall[at.clone()].copy_from_slice(&mine);
        }
        let (steps, acc, tmp) = igather::build_leaders(view, &sub, root, send.is_some(), b);
        let mut engine = Engine::default();
        let irecv = is_root.then_some(&mut iall[..]);
        let sched = schedule("MPI_Igather", steps, send, irecv, acc, tmp);
        engine.start(0, sched, fabric).unwrap();
        finish(&mut engine, fabric);
        // (A flag, checked outside: a rank that panicked here would leave the others
        // waiting.)
        let same = i64::from(!is_root || iall == all);
        let mut out = if is_root { ints(&all) } else { Vec::new() };
        // Back: the root scatters what it gathered.
        let mut back = vec![0u8; b];
        let recv_some = !(is_root && in_place);
        let recv = recv_some.then_some(&mut back[..]);
        let send = is_root.then_some(&all[..]);
        scatter::scatter(view, fabric, &sub, &s, root, send, recv, b).unwrap();
        // The same Scatter through the leaders as a schedule (Iscatter).
        let mut iback = vec![0xdd_u8; b];
        let (steps, acc, tmp) = iscatter::build_leaders(view, &sub, root, recv_some, b);
        let mut engine = Engine::default();
        let irecv = recv_some.then_some(&mut iback[..]);
        let sched = schedule("MPI_Iscatter", steps, send, irecv, acc, tmp);
        engine.start(0, sched, fabric).unwrap();
        finish(&mut engine, fabric);
        let same_back = i64::from(!recv_some || iback == back);
        if is_root && in_place {
            back.copy_from_slice(&all[at]);
        }
        out.extend(ints(&back));
        out.push(same);
        out.push(same_back);
        out
    });
    out
}

fn check(plans: &[RankPlan], root: u32, len: usize, in_place: bool) -> Result<(), TestCaseError> {
    let size = plans.len() as u32;
    let out = gather_then_scatter(plans, root, len, in_place);
    let all: Vec<i64> = (0..size).flat_map(|r| data(r, len)).collect();
    for (r, got) in out.iter().enumerate() {
        let mut expect = if r as u32 == root {
            all.clone()
        } else {
            Vec::new()
        };
        expect.extend(data(r as u32, len));
        // The root's Igather through the leaders gathered the same blocks, and every
        // rank's Iscatter through them got the same block back.
        expect.extend([1, 1]);
        prop_assert_eq!(got, &expect, "rank {} of {}, root {}", r, size, root);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn gather_and_scatter_match_the_reference(
        nodes in 1u32..5, rpn in 1u32..17, sockets in 1u32..3, levels in 0usize..5,
        cyclic: bool, len in prop::sample::select(vec![0usize, 1, 3, 257, 1700]),
        root in any::<prop::sample::Index>(), in_place: bool,
    ) {
        let rpn = rpn.min(sockets * 8);
        let plans = plans(nodes, rpn, sockets, LEVELS[levels], cyclic);
        let root = root.index(plans.len()) as u32;
        check(&plans, root, len, in_place)?;
    }

    #[test]
    fn gather_and_scatter_match_the_reference_for_any_placement(
        node_of in prop::collection::vec(0u32..6, 1..65),
        len in prop::sample::select(vec![1usize, 2, 1025]),
        root in any::<prop::sample::Index>(), in_place: bool,
    ) {
        let plans = plans_placed(&node_of);
        let root = root.index(plans.len()) as u32;
        check(&plans, root, len, in_place)?;
    }
}

/// What every rank learns of the ranks under each member (`Subtrees::learn`, over the
/// transport) equals what `Subtrees::of_job` works out from all the views at once.
fn check_of_job(plans: &[RankPlan]) -> Result<(), TestCaseError> {
    let learned = std::sync::Mutex::new(vec![None; plans.len()]);
    run(plans, |view, fabric| {
        let sub = Subtrees::learn(view, fabric).unwrap();
        learned.lock().unwrap()[view.rank as usize] = Some(sub);
        Vec::new()
    });
    let views: Vec<_> = (0..plans.len() as u32)
        .map(|r| crate::sim::view(plans, r))
        .collect();
    let worked_out = Subtrees::of_job(&views);
    for (r, (l, w)) in learned
        .into_inner()
        .unwrap()
        .into_iter()
        .zip(worked_out)
        .enumerate()
    {
        prop_assert_eq!(l.as_ref(), Some(&w), "rank {} of {}", r, plans.len());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn subtrees_worked_out_for_the_job_are_those_learned(
        nodes in 1u32..5, rpn in 1u32..17, sockets in 1u32..3, levels in 0usize..5,
        cyclic: bool,
    ) {
        let rpn = rpn.min(sockets * 8);
        check_of_job(&plans(nodes, rpn, sockets, LEVELS[levels], cyclic))?;
    }

    #[test]
    fn subtrees_worked_out_for_any_placement_are_those_learned(
        node_of in prop::collection::vec(0u32..6, 1..65),
    ) {
        check_of_job(&plans_placed(&node_of))?;
    }
}

/// The messages between nodes of a Gather to `root` and of a Scatter from it, `len`-byte
/// blocks, after the context learned its subtrees (their traffic left out).
fn inter_node_messages(plans: &[RankPlan], root: u32, len: usize) -> (u64, u64) {
    let size = plans.len();
    let s = settings_for(plans);
    let count = |what: u8| {
        let (_, t) = run(plans, |view, fabric| {
            let sub = Subtrees::learn(view, fabric).unwrap();
            let mine = vec![7u8; len];
            let mut all = vec![0u8; len * size];
            let is_root = view.rank == root;
            let mut own = vec![0u8; len];
            match what {
                1 => {
                    let recv = is_root.then_some(&mut all[..]);
                    gather::gather(view, fabric, &sub, &s, root, Some(&mine), recv, len).unwrap();
                }
                2 => {
                    let send = is_root.then_some(&all[..]);
                    scatter::scatter(view, fabric, &sub, &s, root, send, Some(&mut own), len)
                        .unwrap();
                }
                _ => {}
            }
            Vec::new()
        });
        t.get(INTER_NODE).map_or(0, |t| t.messages)
    };
    let learning = count(0);
    (count(1) - learning, count(2) - learning)
}

#[test]
fn gather_and_scatter_cross_nodes_once_per_node() {
    // 8 nodes x 8 ranks: one message out of (into) each node but the root's, for any root:
    // a node leader (in the top group) or not (its result comes from, or its blocks go
    // to, its own node's leader). Flat, every rank but the root's node's would send one
    // message across: 56.
    println!("layout            root  gather  scatter  (messages between nodes, 8-byte blocks)");
    for (name, plans) in [
        ("8 x 8 block", plans_without_map(8, 8, "block")),
        ("8 x 8 cyclic", plans_without_map(8, 8, "cyclic")),
    ] {
        // A node leader other than rank 0: a member of the top group.
        let leader_elsewhere = plans[0].groups.last().unwrap().members[1];
        for root in [0u32, 5, leader_elsewhere, 63] {
            let (g, s) = inter_node_messages(&plans, root, 8);
            println!("{name:16}  {root:4}  {g:6}  {s:7}");
            assert_eq!((g, s), (7, 7), "{name}, root {root}");
        }
    }
}

#[test]
fn large_blocks_go_straight_between_the_root_and_each_rank() {
    // Blocks of SCATTER_DIRECT_BLOCK bytes (a Gather's go straight from smaller ones) on 3
    // nodes x 2: every rank's block crosses between its
    // node and the root's once, straight (no leader holds a node's blocks back), and the
    // results are the reference's for roots inside and outside the top group, in place and
    // not.
    let len = topo_runtime::subtrees::SCATTER_DIRECT_BLOCK / 8;
    let plans = plans_without_map(3, 2, "block");
    for (root, in_place) in [(0u32, false), (3, true), (5, false)] {
        check(&plans, root, len, in_place).unwrap();
    }
    // One message between nodes per rank off the root's node, each way (through the
    // leaders: 2 nodes x 2 blocks in pieces of NETWORK_PIECE bytes).
    let (g, s) = inter_node_messages(&plans, 3, 8 * len);
    assert_eq!((g, s), (4, 4));
    // One node, below ONE_NODE_SCATTER_DIRECT_BLOCK: the hierarchy's form.
    let one = plans_without_map(1, 4, "block");
    check(&one, 2, len, false).unwrap();
    // From there a Scatter goes straight from the root to every rank of its node at once,
    // the root copying its own block meanwhile, and a Gather's blocks are written into the
    // root's buffer (ONE_NODE_GATHER_WRITTEN_BLOCK; over `sim`, plain messages): the
    // reference's results for roots that lead a group and roots that do not, in place and
    // not, with levels inside the node and with cyclic placement.
    let len = topo_runtime::subtrees::ONE_NODE_SCATTER_DIRECT_BLOCK / 8;
    for (root, in_place) in [(0u32, false), (2, true), (3, false)] {
        check(&one, root, len, in_place).unwrap();
        check(&one, root, len + 1, !in_place).unwrap();
    }
    let sockets = crate::sim::plans(1, 6, 2, LEVELS[0], true);
    for (root, in_place) in [(0u32, true), (1, false), (5, false)] {
        check(&sockets, root, len, in_place).unwrap();
    }
}

/// The value a rank appends to its result when the ring's, recursive doubling's or
/// Bruck's differed (`check_allgatherv`).
const RING_DIFFERS: i64 = i64::MIN;

/// Every rank's Allgatherv of blocks of `(r * 3 + seed) % 4 * unit` numbers (none for
/// some ranks), laid out one after another from the start (`packed`) or in reversed rank
/// order with a gap after each block, in place or not; against the reference.
fn check_allgatherv(
    plans: &[RankPlan],
    seed: u32,
    unit: usize,
    packed: bool,
    in_place: bool,
) -> Result<(), TestCaseError> {
    let size = plans.len() as u32;
    let s = settings_for(plans);
    let len = |r: u32| ((r * 3 + seed) % 4) as usize * unit;
    // Each rank chooses where the blocks land in its own buffer (MPI's displacements):
    // unless `packed`, in reversed rank order with a gap after each block, on every rank
    // for an even seed and on the odd ranks only for an odd one (the others packed).
    let layout = |q: u32| {
        let reversed = !packed && (seed.is_multiple_of(2) || q % 2 == 1);
        let mut at = vec![0..0; size as usize];
        let mut off = 0;
        let order: Vec<u32> = if reversed {
            (0..size).rev().collect()
        } else {
            (0..size).collect()
        };
        for &r in &order {
            at[r as usize] = off..off + 8 * len(r);
            off += 8 * len(r) + if reversed { 8 } else { 0 };
        }
        (at, off)
    };
    let layouts: Vec<(Vec<std::ops::Range<usize>>, usize)> = (0..size).map(layout).collect();
    // The ring's order, node-major, and recursive doubling's (for a size that is a power
    // of two), as a context on several nodes works them out.
    let place = topo_hierarchy::remap::partition::Placement::nodes(&node_of(plans));
    let ring = topo_hierarchy::remap::ring_positions(&place);
    let doubling = topo_hierarchy::remap::chosen(&place).map(topo_hierarchy::remap::Positions::new);
    // Bruck's order (any size), as a context on several nodes works it out where the size
    // is not a power of two, or rank order (its order for small blocks), by the seed.
    let bruck = if seed.is_multiple_of(2) {
        topo_hierarchy::remap::bruck_chosen(&place)
    } else {
        (0..size).collect()
    };
    let (out, _) = run(plans, |view, fabric| {
        let sub = Subtrees::learn(view, fabric).unwrap();
        let me = view.rank;
        let (at, total) = &layouts[me as usize];
        let (at, total) = (&at[..], *total);
        let mine = bytes(&data(me, len(me)));
        let mut recv = bytes(&vec![-5; total / 8 + 1]);
        if in_place {
            recv[at[me as usize].clone()].copy_from_slice(&mine);
        }
        let send = (!in_place).then_some(&mine[..]);
        let mut scratch = Vec::new();
        let mut irecv = recv.clone();
        let mut rrecv = recv.clone();
        let mut drecv = recv.clone();
        let mut brecv = recv.clone();
        topo_runtime::allgatherv::allgatherv(
            view,
            fabric,
            &sub,
            &s,
            send,
            &mut recv,
            at,
            &mut scratch,
        )
        .unwrap();
        // The nonblocking form, on the same blocks: the same result.
        let steps = iallgatherv::build(me, s.nodes == 1, at, !in_place);
        let mut engine = Engine::default();
        let sched = schedule("MPI_Iallgatherv", steps, send, Some(&mut irecv[..]), 0, 0);
        engine.start(0, sched, fabric).unwrap();
        finish(&mut engine, fabric);
        assert_eq!(
            irecv, recv,
            "rank {me}: Iallgatherv differs from Allgatherv"
        );
        // The ring (blocking or not, on several nodes from `iallgatherv::FLAT_FROM`): the
        // same result.
        let peers = topo_hierarchy::remap::ring_peers(&ring, me).unwrap();
        let steps = iallgatherv::build_ring(me, &peers, at, !in_place);
        let mut engine = Engine::default();
        let sched = schedule("MPI_Iallgatherv", steps, send, Some(&mut rrecv[..]), 0, 0);
        engine.start(0, sched, fabric).unwrap();
        finish(&mut engine, fabric);
        let mut same = rrecv == recv;
        if let Some(pos) = &doubling {
            let peers = pos.rd_peers(me).unwrap();
            let (steps, tmp) = iallgatherv::build_rd(me, &peers, at, !in_place);
            let mut engine = Engine::default();
            let sched = schedule("MPI_Iallgatherv", steps, send, Some(&mut drecv[..]), 0, tmp);
            engine.start(0, sched, fabric).unwrap();
            finish(&mut engine, fabric);
            same &= drecv == recv;
        }
        let peers = topo_hierarchy::remap::bruck_peers(&bruck, me).unwrap();
        let (steps, tmp) = iallgatherv::build_bruck(me, &peers, at, !in_place);
        let mut engine = Engine::default();
        let sched = schedule("MPI_Iallgatherv", steps, send, Some(&mut brecv[..]), 0, tmp);
        engine.start(0, sched, fabric).unwrap();
        finish(&mut engine, fabric);
        same &= brecv == recv;
        // Checked outside (a rank that panicked here would leave the others waiting): a
        // trailing `RING_DIFFERS` says the ring's or recursive doubling's result differed.
        let mut got = ints(&recv);
        if !same {
            got.push(RING_DIFFERS);
        }
        got
    });
    for (r, got) in out.iter().enumerate() {
        let (at, total) = &layouts[r];
        let mut want = vec![-5i64; total / 8 + 1];
        for (q, a) in at.iter().enumerate() {
            want[a.start / 8..a.end / 8].copy_from_slice(&data(q as u32, len(q as u32)));
        }
        prop_assert!(
            got.last() != Some(&RING_DIFFERS),
            "rank {} of {}: the ring, recursive doubling or Bruck's differs from Allgatherv",
            r,
            size
        );
        prop_assert_eq!(got, &want, "rank {} of {}", r, size);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn allgatherv_matches_the_reference(
        nodes in 1u32..5, rpn in 1u32..9, levels in 0usize..5, cyclic: bool, seed in 0u32..8,
        unit in prop::sample::select(vec![1usize, 5, 700]), packed: bool, in_place: bool,
    ) {
        let plans = plans(nodes, rpn, 2, LEVELS[levels], cyclic);
        check_allgatherv(&plans, seed, unit, packed, in_place)?;
    }

    #[test]
    fn allgatherv_matches_the_reference_for_any_placement(
        node_of in prop::collection::vec(0u32..6, 1..65), seed in 0u32..8, packed: bool,
    ) {
        let plans = plans_placed(&node_of);
        check_allgatherv(&plans, seed, 3, packed, false)?;
    }
}

#[test]
fn allgatherv_sends_each_nodes_blocks_to_each_other_node_once() {
    // 8 nodes x 8 ranks, 8 bytes each: every node leader sends its node's 64 bytes to each
    // of the 7 others, one message each (56); a Gather to one rank and a Bcast from it
    // would cross 7 + 7 times with 7 x 64 bytes back out to each node.
    for dist in ["block", "cyclic"] {
        let plans = plans_without_map(8, 8, dist);
        let s = settings_for(&plans);
        let at: Vec<std::ops::Range<usize>> = (0..64).map(|r| r * 8..r * 8 + 8).collect();
        let count = |once: bool| {
            let (_, t) = run(&plans, |view, fabric| {
                let sub = Subtrees::learn(view, fabric).unwrap();
                if once {
                    let mut recv = vec![0u8; 64 * 8];
                    let mine = [view.rank as u8; 8];
                    let mut scratch = Vec::new();
                    topo_runtime::allgatherv::allgatherv(
                        view,
                        fabric,
                        &sub,
                        &s,
                        Some(&mine),
                        &mut recv,
                        &at,
                        &mut scratch,
                    )
                    .unwrap();
                }
                Vec::new()
            });
            t.get(INTER_NODE).map_or((0, 0), |t| (t.messages, t.bytes))
        };
        let (learning, with) = (count(false), count(true));
        let got = (with.0 - learning.0, with.1 - learning.1);
        println!(
            "allgatherv 8 x 8 {dist}: {} messages, {} bytes between nodes",
            got.0, got.1
        );
        assert_eq!(got, (56, 56 * 64), "{dist}");
    }
}

/// The lengths of a Gatherv's or Scatterv's blocks in numbers: `(r * 3 + seed) % 4 *
/// unit` (none for some ranks).
fn v_len(r: u32, seed: u32, unit: usize) -> usize {
    ((r * 3 + seed) % 4) as usize * unit
}

/// The root's ranges of the blocks of `v_len`: one after another from the start
/// (`packed`), or in reversed rank order with a gap after each block; and the bytes they
/// span.
fn v_ranges(
    size: u32,
    seed: u32,
    unit: usize,
    packed: bool,
) -> (Vec<std::ops::Range<usize>>, usize) {
    let mut at = vec![0..0; size as usize];
    let mut off = 0;
    let order: Vec<u32> = if packed {
        (0..size).collect()
    } else {
        (0..size).rev().collect()
    };
    for &r in &order {
        let n = 8 * v_len(r, seed, unit);
        at[r as usize] = off..off + n;
        off += n + if packed { 0 } else { 8 };
    }
    (at, off)
}

/// A Gatherv to `root` and a Scatterv of the same blocks back from it, by `alg`, in place
/// at the root or not; against the reference.
#[allow(clippy::too_many_arguments)]
fn check_rooted_v(
    plans: &[RankPlan],
    alg: RootedVAlg,
    root: u32,
    seed: u32,
    unit: usize,
    packed: bool,
    in_place: bool,
) -> Result<(), TestCaseError> {
    let size = plans.len() as u32;
    let s = Settings {
        rooted_v: Some(alg),
        ..settings_for(plans)
    };
    let len = |r: u32| v_len(r, seed, unit);
    let (at, total) = v_ranges(size, seed, unit, packed);
    let (out, _) = run(plans, |view, fabric| {
        let sub = Subtrees::learn(view, fabric).unwrap();
        let me = view.rank;
        let is_root = me == root;
        let mine = bytes(&data(me, len(me)));
        let mut all = bytes(&vec![-5; total / 8 + 1]);
        let mut scratch = Vec::new();
        if is_root && in_place {
            all[at[me as usize].clone()].copy_from_slice(&mine);
        }
        let send = (!(is_root && in_place)).then_some(&mine[..]);
        let recv = is_root.then_some((&mut all[..], &at[..]));
        gatherv::gatherv(view, fabric, &sub, &s, root, send, recv, &mut scratch).unwrap();
        let mut out = if is_root { ints(&all) } else { Vec::new() };
        let mut back = bytes(&vec![-7; len(me)]);
        let send = is_root.then_some((&all[..], &at[..]));
        let recv = (!(is_root && in_place)).then_some(&mut back[..]);
        scatterv::scatterv(view, fabric, &sub, &s, root, send, recv, &mut scratch).unwrap();
        if is_root && in_place {
            back.copy_from_slice(&all[at[me as usize].clone()]);
        }
        // The nonblocking forms (the direct form as a schedule), on the same blocks: the
        // same results.
        let mut iall = bytes(&vec![-5; total / 8 + 1]);
        if is_root && in_place {
            iall[at[me as usize].clone()].copy_from_slice(&mine);
        }
        let root_at = is_root.then_some(&at[..]);
        let send = !(is_root && in_place);
        let steps = igather::build(me, root, root_at, send, mine.len(), s.nodes == 1);
        let send = (!(is_root && in_place)).then_some(&mine[..]);
        let recv = is_root.then_some(&mut iall[..]);
        let mut engine = Engine::default();
        engine
            .start(0, schedule("MPI_Igatherv", steps, send, recv, 0, 0), fabric)
            .unwrap();
        finish(&mut engine, fabric);
        if is_root {
            assert_eq!(iall, all, "rank {me}: Igatherv differs from Gatherv");
        }
        let mut iback = bytes(&vec![-7; len(me)]);
        let steps = iscatter::build(me, root, root_at, !(is_root && in_place), iback.len());
        let send = is_root.then_some(&all[..]);
        let recv = (!(is_root && in_place)).then_some(&mut iback[..]);
        engine
            .start(
                1,
                schedule("MPI_Iscatterv", steps, send, recv, 0, 0),
                fabric,
            )
            .unwrap();
        finish(&mut engine, fabric);
        if !(is_root && in_place) {
            assert_eq!(iback, back, "rank {me}: Iscatterv differs from Scatterv");
        }
        out.extend(ints(&back));
        out
    });
    let mut gathered = vec![-5i64; total / 8 + 1];
    for r in 0..size {
        let a = &at[r as usize];
        gathered[a.start / 8..a.end / 8].copy_from_slice(&data(r, len(r)));
    }
    for (r, got) in out.iter().enumerate() {
        let mut want = if r as u32 == root {
            gathered.clone()
        } else {
            Vec::new()
        };
        want.extend(data(r as u32, len(r as u32)));
        prop_assert_eq!(got, &want, "rank {} of {}, root {}, {}", r, size, root, alg);
    }
    Ok(())
}

fn rooted_v_alg() -> impl Strategy<Value = RootedVAlg> {
    prop::sample::select(vec![RootedVAlg::Leaders, RootedVAlg::Direct])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn gatherv_and_scatterv_match_the_reference(
        nodes in 1u32..5, rpn in 1u32..9, levels in 0usize..5, cyclic: bool, seed in 0u32..8,
        unit in prop::sample::select(vec![1usize, 5, 700]), packed: bool, in_place: bool,
        root in any::<prop::sample::Index>(), alg in rooted_v_alg(),
    ) {
        let plans = plans(nodes, rpn, 2, LEVELS[levels], cyclic);
        let root = root.index(plans.len()) as u32;
        check_rooted_v(&plans, alg, root, seed, unit, packed, in_place)?;
    }

    #[test]
    fn gatherv_and_scatterv_match_the_reference_for_any_placement(
        node_of in prop::collection::vec(0u32..6, 1..65), seed in 0u32..8, packed: bool,
        root in any::<prop::sample::Index>(), alg in rooted_v_alg(),
    ) {
        let plans = plans_placed(&node_of);
        let root = root.index(plans.len()) as u32;
        check_rooted_v(&plans, alg, root, seed, 3, packed, true)?;
    }
}

/// The messages between nodes of a Gatherv to root 0 and of a Scatterv back from it, by
/// `alg`, of rank r's block `fill(r)` at `at[r]` (those of learning the subtrees left
/// out); both results checked against the blocks.
fn rooted_v_between_nodes(
    plans: &[RankPlan],
    alg: RootedVAlg,
    at: &[std::ops::Range<usize>],
    fill: impl Fn(u32) -> Vec<u8> + Sync,
) -> (u64, u64) {
    let s = Settings {
        rooted_v: Some(alg),
        ..settings_for(plans)
    };
    let size = plans.len() as u32;
    let total = at.iter().map(|a| a.end).max().unwrap_or(0);
    let count = |what: u8| {
        let (_, t) = run(plans, |view, fabric| {
            let sub = Subtrees::learn(view, fabric).unwrap();
            let me = view.rank;
            let is_root = me == 0;
            let all: Vec<u8> = if is_root {
                (0..size).flat_map(&fill).collect()
            } else {
                Vec::new()
            };
            let mut mine = fill(me);
            let mut scratch = Vec::new();
            match what {
                1 => {
                    let mut got = vec![0u8; total];
                    let recv = is_root.then_some((&mut got[..], at));
                    gatherv::gatherv(view, fabric, &sub, &s, 0, Some(&mine), recv, &mut scratch)
                        .unwrap();
                    if is_root {
                        assert_eq!(got, all, "{alg}: the gathered blocks");
                    }
                }
                2 => {
                    let send = is_root.then_some((&all[..], at));
                    mine.fill(0);
                    scatterv::scatterv(
                        view,
                        fabric,
                        &sub,
                        &s,
                        0,
                        send,
                        Some(&mut mine),
                        &mut scratch,
                    )
                    .unwrap();
                    assert_eq!(mine, fill(me), "{alg}: rank {me}'s scattered block");
                }
                _ => {}
            }
            Vec::new()
        });
        t.get(INTER_NODE).map_or(0, |t| t.messages)
    };
    let learning = count(0);
    (count(1) - learning, count(2) - learning)
}

/// Places blocks of `len(r)` bytes one after another in rank order.
fn one_after_another(size: u32, len: impl Fn(u32) -> usize) -> Vec<std::ops::Range<usize>> {
    let mut off = 0;
    (0..size)
        .map(|r| {
            off += len(r);
            off - len(r)..off
        })
        .collect()
}

#[test]
fn gatherv_and_scatterv_through_the_leaders_cross_nodes_once_per_node() {
    // 8 nodes x 8 ranks, 8 bytes each, root 0: through the leaders, each other node sends
    // (Gatherv) or receives (Scatterv) its ranks' blocks in one message, as Gather and
    // Scatter (7; the lengths stay inside the nodes); straight, every rank on another node
    // one message (56).
    for dist in ["block", "cyclic"] {
        let plans = plans_without_map(8, 8, dist);
        let at = one_after_another(64, |_| 8);
        for alg in [RootedVAlg::Leaders, RootedVAlg::Direct] {
            let (g, sc) = rooted_v_between_nodes(&plans, alg, &at, |r| vec![r as u8 + 1; 8]);
            println!("gatherv / scatterv 8 x 8 {dist}, {alg}: {g} / {sc} messages between nodes");
            let want = if alg == RootedVAlg::Leaders { 7 } else { 56 };
            assert_eq!((g, sc), (want, want), "{dist} {alg}");
        }
    }
}

#[test]
fn gatherv_and_scatterv_through_the_leaders_send_large_blocks_straight() {
    // 8 nodes x 8 ranks, root 0: the odd ranks' blocks are large (a Scatter's direct size,
    // which a Gather's exceeds too), the even ranks' 8 bytes. Through the leaders, every
    // large block off the root's node crosses on its own, straight between its rank and
    // the root, and each other node with small blocks sends (Gatherv) or receives
    // (Scatterv) them in one message: 28 + 7 with block placement; with cyclic placement
    // the odd nodes hold only odd ranks (32 straight) and 3 even nodes other than the
    // root's only even ones (3 messages). The results are the reference's.
    let big = topo_runtime::subtrees::SCATTER_DIRECT_BLOCK;
    let len = |r: u32| if r % 2 == 1 { big } else { 8 };
    let at = one_after_another(64, len);
    for dist in ["block", "cyclic"] {
        let plans = plans_without_map(8, 8, dist);
        let fill = |r: u32| vec![r as u8 + 1; len(r)];
        let (g, sc) = rooted_v_between_nodes(&plans, RootedVAlg::Leaders, &at, fill);
        println!(
            "gatherv / scatterv 8 x 8 {dist}, large odd blocks: {g} / {sc} messages between nodes"
        );
        // (Large blocks straight, other nodes with small blocks.)
        let (straight, small) = if dist == "block" { (28, 7) } else { (32, 3) };
        let want = straight + small;
        assert_eq!((g, sc), (want, want), "{dist}");
    }
    // One node: a Scatterv with some block of ONE_NODE_SCATTER_DIRECT_BLOCK bytes sends
    // its large blocks at once in either form, the root copying its own (large or small)
    // meanwhile; the results are the reference's.
    let big = topo_runtime::subtrees::ONE_NODE_SCATTER_DIRECT_BLOCK;
    let plans = plans_without_map(1, 6, "block");
    for large in [0, 1] {
        let len = |r: u32| if r % 2 == large { big } else { 8 };
        let at = one_after_another(6, len);
        for alg in [RootedVAlg::Leaders, RootedVAlg::Direct] {
            let fill = |r: u32| vec![r as u8 + 1; len(r)];
            assert_eq!(rooted_v_between_nodes(&plans, alg, &at, fill), (0, 0));
        }
    }
}

#[test]
fn a_gatherv_into_blocks_that_overlap_is_named() {
    // One node, the direct form: the root's receive ranges overlap (an erroneous call),
    // with small blocks (the root receives them one after another) and with large ones
    // (written by their ranks): the root names the problem instead of taking the blocks;
    // the other ranks' sends do not wait for it.
    let plans = plans_without_map(1, 3, "block");
    let s = Settings {
        rooted_v: Some(RootedVAlg::Direct),
        ..settings_for(&plans)
    };
    for len in [
        8usize,
        topo_runtime::subtrees::ONE_NODE_GATHER_WRITTEN_BLOCK,
    ] {
        let at = [0..len, len / 2..len / 2 + len, 2 * len..3 * len];
        let (errors, _) = run(&plans, |view, fabric| {
            let sub = Subtrees::learn(view, fabric).unwrap();
            let mine = vec![view.rank as u8 + 1; len];
            let mut got = vec![0u8; 3 * len];
            let recv = (view.rank == 0).then_some((&mut got[..], &at[..]));
            let mut scratch = Vec::new();
            let r = gatherv::gatherv(view, fabric, &sub, &s, 0, Some(&mine), recv, &mut scratch);
            match r {
                Ok(()) => Vec::new(),
                Err(e) => {
                    assert!(e.to_string().contains("receive blocks that overlap"), "{e}");
                    vec![1i64]
                }
            }
        });
        assert_eq!(
            errors[0],
            vec![1],
            "{len}-byte blocks: the root named the overlap"
        );
    }
}
