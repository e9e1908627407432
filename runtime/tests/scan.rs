//! Scan and Exscan over the `sim` transport: random hierarchies and placements against a
//! simple reference, in place and not, in both forms (hierarchical where the groups'
//! ranks are consecutive, the chain otherwise).

use proptest::prelude::*;
use topo_hierarchy::{RankPlan, Settings};
use topo_runtime::combine::sum_i64;
use topo_runtime::nonblocking::{Engine, iscan};
use topo_runtime::reduce::Scratch;
use topo_runtime::scan;
use topo_runtime::subtrees::Subtrees;

use crate::nonblocking::{finish, schedule};
use crate::sim::{
    LEVELS, bytes, data, ints, network_of, plans, plans_placed, plans_without_map, run,
};

/// The prefix sums of `data` over ranks `0..end`.
fn prefix(end: u32, len: usize) -> Vec<i64> {
    (0..end).fold(vec![0; len], |acc, r| {
        acc.iter()
            .zip(data(r, len))
            .map(|(a, b)| a.wrapping_add(b))
            .collect()
    })
}

/// A `spin` setting with which no Scan takes the chain of ranks (`scan::chain_at`); with
/// 0, those of at most 4 ranks do.
const NO_CHAIN: u32 = 1;

/// Each rank's Scan and Exscan of `len` numbers (Exscan's rank 0: what its receive
/// buffer held before, untouched), and whether the context took the hierarchical form:
/// that form on the view whose network part is one group of the ranks that reach it, in
/// rank order, if `flat` (`scan::network_in_order`: what larger Scans run on), with the
/// settings' `spin`.
fn scans_on(
    plans: &[RankPlan],
    len: usize,
    in_place: bool,
    flat: bool,
    spin: u32,
) -> (Vec<Vec<i64>>, Vec<bool>) {
    let s = Settings::default();
    let network = network_of(plans);
    let (out, _) = run(plans, |view, fabric| {
        let net_view = scan::network_in_order(view, &network);
        let sub = Subtrees::learn(view, fabric).unwrap();
        let mut scratch = Scratch::default();
        let ordered = scan::in_order(view, fabric, &sub, &s, &mut scratch).unwrap();
        let mine = bytes(&data(view.rank, len));
        let mut out = vec![i64::from(ordered)];
        for exclusive in [false, true] {
            // A marker where the result goes, so that an untouched buffer shows.
            let mut recv = bytes(&vec![-1; len]);
            if in_place {
                recv.copy_from_slice(&mine);
            }
            let send = (!in_place).then_some(&mine[..]);
            let op = sum_i64();
            scan::scan(
                if flat && ordered { &net_view } else { view },
                fabric,
                spin,
                ordered.then_some(&sub),
                send,
                Some(&mut recv),
                exclusive,
                &op,
                &mut scratch,
            )
            .unwrap();
            out.extend(ints(&recv));
        }
        out
    });
    let ordered = out.iter().map(|o| o[0] == 1).collect();
    (out.into_iter().map(|o| o[1..].to_vec()).collect(), ordered)
}

fn check(plans: &[RankPlan], len: usize, in_place: bool) -> Result<bool, TestCaseError> {
    check_on(plans, len, in_place, false, NO_CHAIN)
}

/// [`check`] with [`scans_on`]'s `flat` and `spin`.
fn check_on(
    plans: &[RankPlan],
    len: usize,
    in_place: bool,
    flat: bool,
    spin: u32,
) -> Result<bool, TestCaseError> {
    let (out, ordered) = scans_on(plans, len, in_place, flat, spin);
    for (r, got) in out.iter().enumerate() {
        let r = r as u32;
        let mut expect = prefix(r + 1, len);
        expect.extend(if r == 0 {
            // Exscan leaves rank 0's buffer as it was.
            if in_place {
                data(0, len)
            } else {
                vec![-1; len]
            }
        } else {
            prefix(r, len)
        });
        prop_assert_eq!(got, &expect, "rank {} of {}", r, plans.len());
    }
    prop_assert!(
        ordered.iter().all(|&o| o == ordered[0]),
        "ranks disagree on the form"
    );
    Ok(ordered[0])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn scan_and_exscan_match_the_reference(
        nodes in 1u32..5, rpn in 1u32..17, sockets in 1u32..3, levels in 0usize..5,
        cyclic: bool, len in prop::sample::select(vec![0usize, 1, 3, 257, 1700]),
        in_place: bool, flat: bool, chain: bool,
    ) {
        let rpn = rpn.min(sockets * 8);
        let plans = plans(nodes, rpn, sockets, LEVELS[levels], cyclic);
        check_on(&plans, len, in_place, flat, if chain { 0 } else { NO_CHAIN })?;
    }

    #[test]
    fn scan_and_exscan_match_the_reference_for_any_placement(
        node_of in prop::collection::vec(0u32..6, 1..65),
        len in prop::sample::select(vec![1usize, 2, 1025]),
        in_place: bool,
    ) {
        let plans = plans_placed(&node_of);
        // Hierarchical exactly where each node's ranks are consecutive.
        let blocks = node_of.windows(2).filter(|w| w[0] != w[1]).count() + 1;
        let nodes = node_of.iter().collect::<std::collections::BTreeSet<_>>().len();
        let ordered = check(&plans, len, in_place)?;
        prop_assert_eq!(ordered, blocks == nodes, "placement {:?}", node_of);
    }
}

#[test]
fn block_placement_takes_the_hierarchical_form_and_cyclic_recursive_doubling() {
    for (dist, want) in [("block", true), ("cyclic", false)] {
        let plans = plans_without_map(4, 3, dist);
        assert_eq!(check(&plans, 5, false).unwrap(), want, "{dist}");
    }
    // One node: a single group, consecutive whatever the distribution.
    assert!(check(&plans_without_map(1, 5, "cyclic"), 2, true).unwrap());
}

/// [`check_on`] (not `flat`) with `spin`, and the nonblocking schedules against the
/// blocking results (`what` names the case); returns whether the context took the
/// hierarchical form.
fn check_both(plans: &[RankPlan], len: usize, in_place: bool, spin: u32, what: &str) -> bool {
    let ordered = check_on(plans, len, in_place, false, spin).unwrap();
    let (blocking, _) = scans_on(plans, len, in_place, false, spin);
    let nonblocking = nonblocking_scans_on(plans, len, in_place, None, false, spin);
    assert!(
        nonblocking == blocking,
        "{what}, {len} numbers: the nonblocking form differs"
    );
    ordered
}

#[test]
fn jobs_of_up_to_four_ranks_pass_the_prefix_along_the_chain() {
    // `scan::CHAIN_UP_TO`: any placement, in place and not, blocking against the
    // reference and the nonblocking schedule against the blocking results, 1 number and
    // 3,000 (24,000 bytes).
    for (nodes, rpn, dist) in [
        (1, 2, "block"),
        (1, 3, "block"),
        (1, 4, "cyclic"),
        (2, 2, "block"),
        (2, 2, "cyclic"),
        (3, 1, "block"),
        (4, 1, "block"),
    ] {
        let plans = plans_without_map(nodes, rpn, dist);
        assert!(scan::chain_at(plans.len() as u32, 0, 8));
        for len in [1, 3_000] {
            for in_place in [false, true] {
                check_both(&plans, len, in_place, 0, &format!("{nodes} x {rpn} {dist}"));
            }
        }
    }
    assert!(!scan::chain_at(5, 0, 8));
    assert!(!scan::chain_at(4, 1024, 8));
    // Two ranks, each with a core: the chain below PLAIN_LAST_FROM (3,000 numbers), the
    // other forms from there (5,000).
    assert!(scan::chain_at(2, 1024, scan::PLAIN_LAST_FROM - 1));
    assert!(!scan::chain_at(2, 1024, scan::PLAIN_LAST_FROM));
    for (nodes, rpn) in [(1, 2), (2, 1)] {
        let plans = plans_without_map(nodes, rpn, "block");
        for len in [1, 3_000, 5_000] {
            for in_place in [false, true] {
                check_both(&plans, len, in_place, 1024, &format!("{nodes} x {rpn}"));
            }
        }
    }
}

#[test]
fn groups_below_the_top_take_each_form() {
    // 4,000 numbers (32,000 bytes): a socket of 8 ranks in one group runs recursive
    // doubling among its members (more than 4, whose totals come to over 16 KiB), in the
    // blocking and the nonblocking form; a NUMA node of 4 exchanges with each member, who
    // gets the leader's offset in a second message, as do groups of 2 above the lowest
    // level (the 2 NUMA nodes of a socket, the 2 nodes under a switch), whose leader
    // would keep its own total; at the lowest level groups of 2 (nodes of 2 ranks) take
    // the one-way form whatever the size. 1,000 numbers (8,000 bytes): the socket of 8
    // and the NUMA nodes of 4 exchange, and every group of 2 takes the one-way form, its
    // leader keeping its own total above the lowest level.
    for len in [4_000, 1_000] {
        for (sockets, rpn, levels) in [
            (1, 2, "node,switch2,world"),
            (1, 8, "socket,node,switch2,world"),
            (2, 8, "numa,socket,node,switch2,world"),
        ] {
            for in_place in [false, true] {
                let plans = plans(3, rpn, sockets, levels, false);
                assert!(
                    check_both(&plans, len, in_place, NO_CHAIN, levels),
                    "{levels}"
                );
            }
        }
    }
}

/// Each rank's Iscan and Iexscan of `len` numbers, both in flight at once, in the form
/// `hierarchical` says (`None`: the one [`scan::in_order`] agrees on), the hierarchical
/// form on [`scans_on`]'s view if `flat`, with the settings' `spin`; the results laid out
/// as [`scans_on`] lays them.
fn nonblocking_scans_on(
    plans: &[RankPlan],
    len: usize,
    in_place: bool,
    hierarchical: Option<bool>,
    flat: bool,
    spin: u32,
) -> Vec<Vec<i64>> {
    let s = Settings::default();
    let network = network_of(plans);
    let (out, _) = run(plans, |view, fabric| {
        let net_view = scan::network_in_order(view, &network);
        let sub = Subtrees::learn(view, fabric).unwrap();
        let form = hierarchical.unwrap_or_else(|| {
            scan::in_order(view, fabric, &sub, &s, &mut Scratch::default()).unwrap()
        });
        let mine = bytes(&data(view.rank, len));
        let mut recvs = [bytes(&vec![-1; len]), bytes(&vec![-1; len])];
        if in_place {
            recvs.iter_mut().for_each(|r| r.copy_from_slice(&mine));
        }
        let send = (!in_place).then_some(&mine[..]);
        let mut engine = Engine::default();
        let [a, b] = &mut recvs;
        for (recv, exclusive) in [(a, false), (b, true)] {
            let on = if flat && form { &net_view } else { view };
            let sub = form.then_some(&sub);
            let (steps, acc, tmp) = iscan::build(on, spin, sub, !in_place, 8 * len, exclusive);
            let name = if exclusive {
                "MPI_Iexscan"
            } else {
                "MPI_Iscan"
            };
            let sched = schedule(name, steps, send, Some(&mut recv[..]), acc, tmp);
            engine.start(u64::from(exclusive), sched, fabric).unwrap();
        }
        finish(&mut engine, fabric);
        recvs.iter().flat_map(|r| ints(r)).collect()
    });
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn nonblocking_scans_match_the_reference(
        nodes in 1u32..5, rpn in 1u32..9, levels in 0usize..5, cyclic: bool,
        len in prop::sample::select(vec![0usize, 1, 3, 257]), in_place: bool,
        form in prop::sample::select(vec![None, Some(false)]), flat: bool, chain: bool,
    ) {
        let plans = plans(nodes, rpn, 2, LEVELS[levels], cyclic);
        let spin = if chain { 0 } else { NO_CHAIN };
        let out = nonblocking_scans_on(&plans, len, in_place, form, flat, spin);
        let (blocking, _) = scans_on(&plans, len, in_place, false, spin);
        prop_assert_eq!(out, blocking);
    }
}
