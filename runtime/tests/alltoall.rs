//! Alltoall over the `sim` transport: every form on random hierarchies and placements
//! against a simple reference, and the messages that cross nodes.

use proptest::prelude::*;
use topo_hierarchy::{RankPlan, Settings};
use topo_runtime::alltoall;
use topo_runtime::by_node::ByNode;
use topo_runtime::nonblocking::{Engine, ialltoall};
use topo_runtime::subtrees::Subtrees;
use topo_runtime::transport::sim::INTER_NODE;

use crate::nonblocking::{finish, schedule};
use crate::sim::{LEVELS, bytes, ints, plans, plans_placed, plans_without_map, run};

/// The ranks of `plans` by node, as a context learns them at setup.
fn by_node(plans: &[RankPlan]) -> ByNode {
    let names: Vec<&str> = plans.iter().map(|p| p.node.as_str()).collect();
    let label: Vec<u32> = names
        .iter()
        .map(|n| names.iter().position(|m| m == n).unwrap() as u32)
        .collect();
    ByNode::new(&label)
}

/// The settings of a context of `plans` with `alg` (`spread`, `aggregated`, `pairwise`, or `None`
/// for the defaults): the job's numbers of nodes and ranks, as a context learns them at
/// setup.
fn settings_for(plans: &[RankPlan], alg: Option<&str>) -> Settings {
    let mut s = match alg {
        Some(a) => Settings::from_pairs(&[("alltoall", a)]).unwrap(),
        None => Settings::default(),
    };
    s.nodes = plans
        .iter()
        .map(|p| p.node.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .len() as u32;
    s.ranks = plans.len() as u32;
    s
}

/// Rank `src`'s `len` numbers for rank `dst`.
fn block(src: u32, dst: u32, len: usize) -> Vec<i64> {
    (0..len as i64)
        .map(|i| i64::from(src) * 1_000_000 + i64::from(dst) * 1_000 + i)
        .collect()
}

/// What every rank receives in an Alltoall of `len` numbers per block with `alg`, in
/// place or not, run twice back to back (the second time with the results of the first
/// sent back, so that each rank ends with its own blocks again).
fn check(
    plans: &[RankPlan],
    alg: Option<&str>,
    len: usize,
    in_place: bool,
) -> Result<(), TestCaseError> {
    let size = plans.len() as u32;
    let s = settings_for(plans, alg);
    let nodes = by_node(plans);
    let (out, _) = run(plans, |view, fabric| {
        let sub = Subtrees::learn(view, fabric).unwrap();
        let me = view.rank;
        let mine: Vec<i64> = (0..size).flat_map(|d| block(me, d, len)).collect();
        let mine = bytes(&mine);
        let b = 8 * len;
        let mut recv = if in_place {
            mine.clone()
        } else {
            vec![0u8; mine.len()]
        };
        let send = (!in_place).then_some(&mine[..]);
        alltoall::alltoall(view, fabric, &sub, &s, Some(&nodes), send, &mut recv, b).unwrap();
        let mut out = ints(&recv);
        // Back: every block returns to its sender.
        let mut back = vec![0u8; recv.len()];
        let again = Some(&recv[..]);
        alltoall::alltoall(view, fabric, &sub, &s, Some(&nodes), again, &mut back, b).unwrap();
        out.push(i64::from(back == mine));
        out
    });
    for (r, got) in out.iter().enumerate() {
        let expect: Vec<i64> = (0..size)
            .flat_map(|src| block(src, r as u32, len))
            .collect();
        prop_assert_eq!(
            &got[..got.len() - 1],
            &expect[..],
            "rank {} of {}, {:?}",
            r,
            size,
            alg
        );
        prop_assert_eq!(
            got[got.len() - 1],
            1,
            "rank {}: the blocks did not come back",
            r
        );
    }
    Ok(())
}

const FORMS: [Option<&str>; 4] = [None, Some("spread"), Some("aggregated"), Some("pairwise")];

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn alltoall_matches_the_reference(
        nodes in 1u32..5, rpn in 1u32..17, sockets in 1u32..3, levels in 0usize..5,
        cyclic: bool, len in prop::sample::select(vec![0usize, 1, 3, 130]),
        form in 0usize..4, in_place: bool,
    ) {
        let rpn = rpn.min(sockets * 8);
        let plans = plans(nodes, rpn, sockets, LEVELS[levels], cyclic);
        check(&plans, FORMS[form], len, in_place)?;
    }

    #[test]
    fn alltoall_matches_the_reference_for_any_placement(
        node_of in prop::collection::vec(0u32..6, 1..65),
        len in prop::sample::select(vec![1usize, 2, 33]),
        form in 0usize..4, in_place: bool,
    ) {
        let plans = plans_placed(&node_of);
        check(&plans, FORMS[form], len, in_place)?;
    }
}

/// Two Ialltoalls of `len` numbers per block in flight at once (one in place, one not),
/// each rank's results against the reference; in their spread form where `spread` and
/// the ranks are on several nodes.
fn check_nonblocking(plans: &[RankPlan], len: usize, spread: bool) -> Result<(), TestCaseError> {
    let size = plans.len() as u32;
    let one_node = settings_for(plans, None).nodes == 1;
    let nodes = by_node(plans);
    let (out, _) = run(plans, |view, fabric| {
        let me = view.rank;
        let mine: Vec<i64> = (0..size).flat_map(|d| block(me, d, len)).collect();
        let mine = bytes(&mine);
        let mut recvs = [vec![0u8; mine.len()], mine.clone()];
        let mut engine = Engine::default();
        let [a, b] = &mut recvs;
        for (id, recv, send) in [(0, a, Some(&mine[..])), (1, b, None)] {
            let (steps, acc, tmp) = if spread && !one_node {
                ialltoall::build_spread(me, &nodes, 8 * len, send.is_some())
            } else {
                let (b, tmp) = ialltoall::build(
                    me,
                    size as usize,
                    one_node,
                    Some(&nodes),
                    8 * len,
                    send.is_some(),
                );
                (b, 0, tmp)
            };
            let sched = schedule("MPI_Ialltoall", steps, send, Some(&mut recv[..]), acc, tmp);
            engine.start(id, sched, fabric).unwrap();
        }
        finish(&mut engine, fabric);
        recvs.iter().flat_map(|r| ints(r)).collect()
    });
    for (r, got) in out.iter().enumerate() {
        let expect: Vec<i64> = (0..size)
            .flat_map(|src| block(src, r as u32, len))
            .collect();
        let both: Vec<i64> = expect.iter().chain(&expect).copied().collect();
        prop_assert_eq!(got, &both, "rank {} of {}", r, size);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn nonblocking_alltoall_matches_the_reference(
        nodes in 1u32..5, rpn in 1u32..9, levels in 0usize..5, cyclic: bool,
        len in prop::sample::select(vec![0usize, 1, 3, 257]), spread: bool,
    ) {
        let plans = plans(nodes, rpn, 2, LEVELS[levels], cyclic);
        check_nonblocking(&plans, len, spread)?;
    }

    #[test]
    fn nonblocking_spread_alltoall_matches_the_reference_for_any_placement(
        node_of in prop::collection::vec(0u32..6, 1..40),
        len in prop::sample::select(vec![1usize, 2, 33]),
    ) {
        let plans = plans_placed(&node_of);
        check_nonblocking(&plans, len, true)?;
    }
}

/// The messages and bytes between nodes of one Alltoall of `len`-byte blocks with `alg`,
/// after the context learned its subtrees (their traffic left out).
fn inter_node(plans: &[RankPlan], alg: &str, len: usize) -> (u64, u64) {
    let size = plans.len();
    let s = settings_for(plans, Some(alg));
    let nodes = by_node(plans);
    let count = |once: bool| {
        let (_, t) = run(plans, |view, fabric| {
            let sub = Subtrees::learn(view, fabric).unwrap();
            if once {
                let mine = vec![7u8; len * size];
                let mut recv = vec![0u8; len * size];
                let nodes = Some(&nodes);
                alltoall::alltoall(view, fabric, &sub, &s, nodes, Some(&mine), &mut recv, len)
                    .unwrap();
            }
            Vec::new()
        });
        t.get(INTER_NODE).map_or((0, 0), |t| (t.messages, t.bytes))
    };
    let (learning, with) = (count(false), count(true));
    (with.0 - learning.0, with.1 - learning.1)
}

#[test]
fn aggregated_alltoall_crosses_between_nodes_once_per_pair() {
    // 8 nodes x 8 ranks, 8-byte blocks: pairwise, every rank sends each of the 56 ranks on
    // other nodes a message (3,584); aggregated, each node leader sends each other node's
    // leader one (56), carrying the 64 blocks between the two nodes' ranks; spread, the
    // same 56 messages, each node's 7 sent by 7 of its ranks. The bytes between nodes are
    // the same every way.
    println!("layout         form        messages  bytes  (between nodes, 8-byte blocks)");
    for dist in ["block", "cyclic"] {
        let plans = plans_without_map(8, 8, dist);
        for (form, want) in [("pairwise", 3584), ("aggregated", 56), ("spread", 56)] {
            let got = inter_node(&plans, form, 8);
            println!("8 x 8 {dist:7}  {form:10}  {:8}  {:5}", got.0, got.1);
            assert_eq!(got, (want, 3584 * 8), "{dist} {form}");
        }
    }
    // The defaults choose the spread form for small blocks on several nodes.
    let plans = plans_without_map(8, 8, "block");
    let s = settings_for(&plans, None);
    assert_eq!(
        s.alltoall_for(8),
        topo_hierarchy::settings::AlltoallAlg::Spread
    );
}

/// The length in numbers of rank `src`'s block for rank `dst` in the Alltoallv test: a
/// mix of empty, short and longer blocks that differ by pair, the same both ways of a pair
/// where `symmetric` (in place, where a rank sends each rank as much as it receives from it).
fn v_len(src: u32, dst: u32, seed: u32, symmetric: bool) -> usize {
    let (a, b) = if symmetric {
        (src.min(dst), src.max(dst))
    } else {
        (src, dst)
    };
    ((a * 7 + b * 3 + seed) % 5) as usize * ((seed % 3) as usize + 1)
}

/// Every rank's Alltoallv with the blocks of [`v_len`], received in reversed rank order
/// with a gap of one number after each block (left alone), sent from their places in rank
/// order or, in place, from where they are received; against the reference.
fn check_v(plans: &[RankPlan], seed: u32, in_place: bool) -> Result<(), TestCaseError> {
    let size = plans.len() as u32;
    let s = settings_for(plans, None);
    let nodes = by_node(plans);
    let len = |src: u32, dst: u32| v_len(src, dst, seed, in_place);
    // Where rank `me` receives: rank r's block after those of the ranks above it.
    let recv_at = |me: u32| -> Vec<std::ops::Range<usize>> {
        let mut at = vec![0..0; size as usize];
        let mut off = 0;
        for r in (0..size).rev() {
            let n = 8 * len(r, me);
            at[r as usize] = off..off + n;
            off += n + 8;
        }
        at
    };
    let (out, _) = run(plans, |view, fabric| {
        let me = view.rank;
        let rin = recv_at(me);
        let total = rin.iter().map(|r| r.end).max().unwrap_or(0) + 8;
        let mut recv = bytes(&vec![-7; total / 8]);
        let (mut send, mut sat) = (Vec::new(), Vec::new());
        for r in 0..size {
            let b = bytes(&block(me, r, len(me, r)));
            if in_place {
                recv[rin[r as usize].clone()].copy_from_slice(&b);
            } else {
                sat.push(send.len()..send.len() + b.len());
                send.extend(b);
            }
        }
        let arg = (!in_place).then_some((&send[..], &sat[..]));
        let mut irecv = recv.clone();
        let nodes = Some(&nodes);
        assert!(alltoall::alltoallv(view, fabric, &s, nodes, arg, &mut recv, &rin).unwrap());
        // The nonblocking form, on the same blocks: the same result.
        let (steps, tmp) = ialltoall::build_v(
            me,
            s.nodes == 1,
            nodes,
            (!in_place).then_some(&sat[..]),
            &rin,
            irecv.len(),
        );
        let send = (!in_place).then_some(&send[..]);
        let mut engine = Engine::default();
        let sched = schedule("MPI_Ialltoallv", steps, send, Some(&mut irecv[..]), 0, tmp);
        engine.start(0, sched, fabric).unwrap();
        finish(&mut engine, fabric);
        assert_eq!(irecv, recv, "rank {me}: Ialltoallv differs from Alltoallv");
        ints(&recv)
    });
    for (me, got) in out.iter().enumerate() {
        let me = me as u32;
        let mut want = vec![-7i64; got.len()];
        for (r, at) in recv_at(me).into_iter().enumerate() {
            let at = at.start / 8..at.end / 8;
            want[at.clone()].copy_from_slice(&block(r as u32, me, at.len()));
        }
        prop_assert_eq!(got, &want, "rank {} of {}", me, size);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn alltoallv_matches_the_reference(
        nodes in 1u32..5, rpn in 1u32..9, levels in 0usize..5, cyclic: bool, seed in 0u32..30,
        in_place: bool,
    ) {
        let plans = plans(nodes, rpn, 2, LEVELS[levels], cyclic);
        check_v(&plans, seed, in_place)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// The direct exchange's order across nodes: at every step each rank sends to one rank
    /// and receives from one, and the rank it receives from is the one that sends to it
    /// then; where the nodes hold as many ranks each, a rank's first step leaves its node.
    #[test]
    fn the_interleaved_turns_pair_every_rank_at_every_step(
        label in prop::collection::vec(0u32..7, 2..60),
    ) {
        let nodes = ByNode::new(&label);
        let size = label.len();
        let turns: Vec<(Vec<u32>, Vec<u32>)> =
            (0..size as u32).map(|r| alltoall::turns(r, size, Some(&nodes))).collect();
        for d in 0..size - 1 {
            let mut hit = vec![0; size];
            for (r, (to, _)) in turns.iter().enumerate() {
                let t = to[d] as usize;
                prop_assert_ne!(t, r);
                hit[t] += 1;
                prop_assert_eq!(turns[t].1[d] as usize, r, "step {}: {} -> {}", d, r, t);
            }
            prop_assert!(hit.iter().all(|&h| h == 1), "step {}: {:?}", d, hit);
        }
        for (r, (to, _)) in turns.iter().enumerate() {
            // Every other rank once.
            let mut seen: Vec<u32> = to.clone();
            seen.sort_unstable();
            let want: Vec<u32> = (0..size as u32).filter(|&q| q as usize != r).collect();
            prop_assert_eq!(seen, want);
        }
        // With every node holding as many ranks, every rank's first turn leaves its node.
        let even = (0..nodes.nodes()).all(|n| nodes.ranks(n).len() == nodes.ranks(0).len());
        if even && nodes.nodes() > 1 {
            for (r, (to, _)) in turns.iter().enumerate() {
                prop_assert_ne!(nodes.node_of(to[0]), nodes.node_of(r as u32), "rank {}", r);
            }
        }
    }
}
