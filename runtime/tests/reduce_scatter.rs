//! Reduce_scatter_block and the nonblocking Reduce_scatter over the `sim` transport:
//! random hierarchies and placements against a simple reference, in place and not.

use proptest::prelude::*;
use topo_hierarchy::Settings;
use topo_hierarchy::remap::halving::HalvingOrder;
use topo_hierarchy::remap::partition::Placement;
use topo_runtime::combine::sum_i64;
use topo_runtime::nonblocking::{Engine, iallreduce, ireduce_scatter};
use topo_runtime::reduce::Scratch;
use topo_runtime::subtrees::{Blocks, Subtrees};

use crate::nonblocking::{finish, schedule};
use crate::sim::{LEVELS, bytes, data, ints, network_of, plans, plans_placed, run, settings, sum};

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn reduce_scatter_block_matches_the_reference(
        nodes in 1u32..5, rpn in 1u32..9, levels in 0usize..5, cyclic: bool,
        block in prop::sample::select(vec![1usize, 3, 130, 600]), in_place: bool,
        alg in prop::sample::select(vec!["root", "leaders", "allreduce"]),
    ) {
        let s = Settings::from_pairs(&[("reduce-scatter", alg)]).unwrap();
        let plans = plans(nodes, rpn, 2, LEVELS[levels], cyclic);
        let size = plans.len();
        let (out, _) = run(&plans, |view, fabric| {
            let sub = Subtrees::learn(view, fabric).unwrap();
            let mine = bytes(&data(view.rank, block * size));
            let mut recv = if in_place { mine.clone() } else { vec![0u8; 8 * block] };
            let send = (!in_place).then_some(&mine[..]);
            let (mut scratch, mut full) = (Scratch::default(), Vec::new());
            topo_runtime::reduce_scatter::reduce_scatter_block(
                view, fabric, &sub, &s, send, &mut recv, 8 * block,
                &sum_i64(), &mut scratch, &mut full,
            )
            .unwrap();
            // In place, the rest of the buffer must keep the contribution.
            let kept = !in_place || recv[8 * block..] == mine[8 * block..];
            let mut out = ints(&recv[..8 * block]);
            out.push(i64::from(kept));
            out
        });
        let all = sum(size as u32, block * size);
        for (r, got) in out.iter().enumerate() {
            prop_assert_eq!(&got[..block], &all[r * block..(r + 1) * block], "rank {} of {}", r, size);
            prop_assert_eq!(got[block], 1, "rank {}: in place, the rest of the buffer changed", r);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Every form on any placement of 1-64 ranks on up to 6 nodes (groups of uneven
    /// sizes, ranks of a node anywhere in rank order).
    #[test]
    fn reduce_scatter_block_matches_the_reference_for_any_placement(
        node_of in prop::collection::vec(0u32..6, 1..65),
        alg in prop::sample::select(vec!["root", "leaders", "allreduce"]), in_place: bool,
    ) {
        let plans = plans_placed(&node_of);
        let size = plans.len();
        let block = 5;
        let s = Settings::from_pairs(&[("reduce-scatter", alg)]).unwrap();
        let (out, _) = run(&plans, |view, fabric| {
            let sub = Subtrees::learn(view, fabric).unwrap();
            let mine = bytes(&data(view.rank, block * size));
            let mut recv = if in_place { mine.clone() } else { vec![0u8; 8 * block] };
            let send = (!in_place).then_some(&mine[..]);
            let (mut scratch, mut full) = (Scratch::default(), Vec::new());
            topo_runtime::reduce_scatter::reduce_scatter_block(
                view, fabric, &sub, &s, send, &mut recv, 8 * block,
                &sum_i64(), &mut scratch, &mut full,
            )
            .unwrap();
            ints(&recv[..8 * block])
        });
        let all = sum(size as u32, block * size);
        for (r, got) in out.iter().enumerate() {
            prop_assert_eq!(&got[..], &all[r * block..(r + 1) * block], "rank {} of {}", r, size);
        }
    }

    /// Ireduce_scatter(_block): the Allreduce's schedule into the accumulator and this
    /// rank's block copied out, blocks of random lengths (some empty), in place and not,
    /// started behind another schedule so that two are in flight.
    #[test]
    fn ireduce_scatter_matches_the_reference(
        nodes in 1u32..5, rpn in 1u32..9, levels in 0usize..5, cyclic: bool,
        s in settings(), seed in 0u32..8, unit in prop::sample::select(vec![1usize, 3, 300]),
        in_place: bool,
    ) {
        let plans = plans(nodes, rpn, 2, LEVELS[levels], cyclic);
        let size = plans.len() as u32;
        // Rank r's block: 0..3 units, from the seed (block lengths in elements).
        let len = |r: u32| unit * ((r * 7 + seed) % 4) as usize;
        let lens: Vec<usize> = (0..size).map(|r| 8 * len(r)).collect();
        let total: usize = lens.iter().sum();
        let network = network_of(&plans);
        let (out, _) = run(&plans, |view, fabric| {
            let net_view = view.over_network(&network);
            let me = view.rank;
            let at = lens[..me as usize].iter().sum::<usize>();
            let mine = at..at + lens[me as usize];
            let contribution = bytes(&data(me, total / 8));
            // One spare byte past the block, which must stay as it was.
            let mut recv = if in_place { contribution.clone() } else { vec![7u8; mine.len() + 1] };
            let before = recv.clone();
            let send = (!in_place).then_some(&contribution[..]);
            let (ab, tmp) = iallreduce::build(&net_view, &s, !in_place, total, 8);
            let steps = ireduce_scatter::build(ab, !in_place, total, mine.clone());
            let mut other = bytes(&data(me, 5));
            let (ob, otmp) = iallreduce::build(&net_view, &s, false, 40, 8);
            let mut engine = Engine::default();
            let first = schedule("MPI_Iallreduce", ob, None, Some(&mut other[..]), 0, otmp);
            engine.start(0, first, fabric).unwrap();
            let sched = schedule("MPI_Ireduce_scatter", steps, send, Some(&mut recv[..]), total, tmp);
            engine.start(1, sched, fabric).unwrap();
            finish(&mut engine, fabric);
            assert_eq!(ints(&other), sum(size, 5), "rank {me}: the Iallreduce ahead");
            // Past the block, the buffer keeps what it held (the contribution in place).
            assert_eq!(&recv[mine.len()..], &before[mine.len()..], "rank {me}: past its block");
            ints(&recv[..mine.len()])
        });
        let all = sum(size, total / 8);
        let mut at = 0;
        for (r, got) in out.iter().enumerate() {
            let n = lens[r] / 8;
            prop_assert_eq!(got, &all[at..at + n].to_vec(), "rank {} of {}", r, size);
            at += n;
        }
    }

    /// Ireduce_scatter_block by recursive halving in the hierarchy's order, on any
    /// placement of 1-64 ranks on up to 6 nodes (sizes that fold and that do not), blocks
    /// of 1, 3 and 40 elements, in place and not, started behind another schedule.
    #[test]
    fn ireduce_scatter_block_by_halving_matches_the_reference_for_any_placement(
        node_of in prop::collection::vec(0u32..6, 1..65),
        block in prop::sample::select(vec![1usize, 3, 40]), in_place: bool,
    ) {
        let plans = plans_placed(&node_of);
        let size = plans.len() as u32;
        let order = HalvingOrder::new(&Placement::nodes(&node_of));
        let of = ireduce_scatter::HalvingBlocks::of(&order);
        let total = 8 * block * size as usize;
        let network = network_of(&plans);
        let (out, _) = run(&plans, |view, fabric| {
            let me = view.rank;
            let h = of(me).unwrap();
            let contribution = bytes(&data(me, total / 8));
            // One spare byte past the block, which must stay as it was.
            let mut recv = if in_place { contribution.clone() } else { vec![7u8; 8 * block + 1] };
            let before = recv.clone();
            let send = (!in_place).then_some(&contribution[..]);
            let (steps, tmp) = ireduce_scatter::build_halving(&h, Blocks::Same(8 * block), !in_place);
            let mut other = bytes(&data(me, 5));
            let net_view = view.over_network(&network);
            let (ob, otmp) = iallreduce::build(&net_view, &Settings::default(), false, 40, 8);
            let mut engine = Engine::default();
            let first = schedule("MPI_Iallreduce", ob, None, Some(&mut other[..]), 0, otmp);
            engine.start(0, first, fabric).unwrap();
            let sched = schedule("MPI_Ireduce_scatter_block", steps, send, Some(&mut recv[..]), 0, tmp);
            engine.start(1, sched, fabric).unwrap();
            finish(&mut engine, fabric);
            assert_eq!(ints(&other), sum(size, 5), "rank {me}: the Iallreduce ahead");
            assert_eq!(&recv[8 * block..], &before[8 * block..], "rank {me}: past its block");
            ints(&recv[..8 * block])
        });
        let all = sum(size, total / 8);
        for (r, got) in out.iter().enumerate() {
            prop_assert_eq!(got, &all[r * block..(r + 1) * block].to_vec(), "rank {} of {}", r, size);
        }
    }
    /// Ireduce_scatter (blocks of any number of elements, none for some ranks) by
    /// recursive halving in the hierarchy's order, on any placement of 1-64 ranks on up to
    /// 6 nodes, in place and not.
    #[test]
    fn ireduce_scatter_by_halving_matches_the_reference_for_any_counts(
        node_of in prop::collection::vec(0u32..6, 1..65),
        counts in prop::collection::vec(prop::sample::select(vec![0usize, 1, 2, 7]), 64),
        in_place: bool,
    ) {
        let plans = plans_placed(&node_of);
        let size = plans.len();
        let lens: Vec<usize> = counts[..size].iter().map(|c| 8 * c).collect();
        let ends: Vec<usize> = lens.iter().scan(0, |e, &l| { *e += l; Some(*e) }).collect();
        let total = ends[size - 1];
        let order = HalvingOrder::new(&Placement::nodes(&node_of));
        let of = ireduce_scatter::HalvingBlocks::of(&order);
        let (out, _) = run(&plans, |view, fabric| {
            let me = view.rank;
            let h = of(me).unwrap();
            let mine = lens[me as usize];
            let contribution = bytes(&data(me, total / 8));
            let mut recv = if in_place { contribution.clone() } else { vec![7u8; mine + 1] };
            let before = recv.clone();
            let send = (!in_place).then_some(&contribution[..]);
            let (steps, tmp) = ireduce_scatter::build_halving(&h, Blocks::Ends(&ends), !in_place);
            let mut engine = Engine::default();
            let sched = schedule("MPI_Ireduce_scatter", steps, send, Some(&mut recv[..]), 0, tmp);
            engine.start(0, sched, fabric).unwrap();
            finish(&mut engine, fabric);
            assert_eq!(&recv[mine..], &before[mine..], "rank {me}: past its block");
            ints(&recv[..mine])
        });
        let all = sum(size as u32, total / 8);
        for (r, got) in out.iter().enumerate() {
            let at = (ends[r] - lens[r]) / 8..ends[r] / 8;
            prop_assert_eq!(got, &all[at].to_vec(), "rank {} of {}", r, size);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Ireduce_scatter and Ireduce_scatter_block by the ring in node-major order (the
    /// `ring` form), blocks of any number of elements (none for some ranks) or all alike,
    /// on any placement of 1-64 ranks on up to 6 nodes, in place and not.
    #[test]
    fn ireduce_scatter_by_the_ring_matches_the_reference(
        node_of in prop::collection::vec(0u32..6, 1..65),
        counts in prop::collection::vec(prop::sample::select(vec![0usize, 1, 2, 7]), 64),
        same: bool, in_place: bool,
    ) {
        let plans = plans_placed(&node_of);
        let size = plans.len();
        let lens: Vec<usize> = if same {
            vec![8 * counts[0]; size]
        } else {
            counts[..size].iter().map(|c| 8 * c).collect()
        };
        let ends: Vec<usize> = lens.iter().scan(0, |e, &l| { *e += l; Some(*e) }).collect();
        let total = ends[size - 1];
        let ring = topo_hierarchy::remap::ring_positions(&Placement::nodes(&node_of));
        let (out, _) = run(&plans, |view, fabric| {
            let me = view.rank;
            let peers = topo_hierarchy::remap::ring_peers(&ring, me).unwrap();
            let mine = lens[me as usize];
            let contribution = bytes(&data(me, total / 8));
            let mut recv = if in_place { contribution.clone() } else { vec![7u8; mine + 1] };
            let before = recv.clone();
            let send = (!in_place).then_some(&contribution[..]);
            let blocks = if same { Blocks::Same(lens[0]) } else { Blocks::Ends(&ends) };
            let (steps, tmp) = ireduce_scatter::build_ring(&peers, blocks, total, !in_place);
            let mut engine = Engine::default();
            let sched = schedule("MPI_Ireduce_scatter", steps, send, Some(&mut recv[..]), 0, tmp);
            engine.start(0, sched, fabric).unwrap();
            finish(&mut engine, fabric);
            assert_eq!(&recv[mine..], &before[mine..], "rank {me}: past its block");
            ints(&recv[..mine])
        });
        let all = sum(size as u32, total / 8);
        for (r, got) in out.iter().enumerate() {
            let at = (ends[r] - lens[r]) / 8..ends[r] / 8;
            prop_assert_eq!(got, &all[at].to_vec(), "rank {} of {}", r, size);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Two ranks, on one node or two: the one exchange of `reduce_scatter::pair`, blocks
    /// of different lengths (zero among them), in place and not.
    #[test]
    fn two_ranks_exchange_their_blocks_once(
        nodes in 1u32..3, lens in prop::array::uniform2(0usize..40), in_place: bool,
    ) {
        let plans = plans(nodes, 3 - nodes, 2, LEVELS[0], false);
        prop_assert_eq!(plans.len(), 2);
        let total = lens[0] + lens[1];
        let (out, _) = run(&plans, |view, fabric| {
            let me = view.rank as usize;
            let at = [0..8 * lens[0], 8 * lens[0]..8 * total];
            let mine = bytes(&data(view.rank, total));
            let mut recv = if in_place { mine.clone() } else { vec![0u8; 8 * total] };
            let send = (!in_place).then_some(&mine[..]);
            let mut tmp = vec![0u8; 8 * lens[me]];
            topo_runtime::reduce_scatter::pair(
                view, fabric, send, &mut recv, at[me].clone(), at[1 - me].clone(),
                &sum_i64(), &mut tmp,
            )
            .unwrap();
            let n = 8 * lens[me];
            // In place, the rest of the buffer must keep the contribution.
            let kept = !in_place || recv[n..] == mine[n..];
            let mut out = ints(&recv[..n]);
            out.push(i64::from(kept));
            out
        });
        let all = sum(2, total);
        for (r, got) in out.iter().enumerate() {
            let at = if r == 0 { 0..lens[0] } else { lens[0]..total };
            prop_assert_eq!(&got[..lens[r]], &all[at], "rank {}", r);
            prop_assert_eq!(got[lens[r]], 1, "rank {}: in place, the rest changed", r);
        }
    }
}
