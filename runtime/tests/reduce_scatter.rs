//! Reduce_scatter_block over the `sim` transport: random hierarchies and placements
//! against a simple reference, in place and not.

use proptest::prelude::*;
use topo_hierarchy::Settings;
use topo_runtime::combine::sum_i64;
use topo_runtime::reduce::Scratch;
use topo_runtime::subtrees::Subtrees;

use crate::sim::{LEVELS, bytes, data, ints, plans, run, sum};

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn reduce_scatter_block_matches_the_reference(
        nodes in 1u32..5, rpn in 1u32..9, levels in 0usize..5, cyclic: bool,
        block in prop::sample::select(vec![1usize, 3, 130]), in_place: bool,
    ) {
        let plans = plans(nodes, rpn, 2, LEVELS[levels], cyclic);
        let size = plans.len();
        let (out, _) = run(&plans, |view, fabric| {
            let sub = Subtrees::learn(view, fabric).unwrap();
            let mine = bytes(&data(view.rank, block * size));
            let mut recv = if in_place { mine.clone() } else { vec![0u8; 8 * block] };
            let send = (!in_place).then_some(&mine[..]);
            let (mut scratch, mut full) = (Scratch::default(), Vec::new());
            topo_runtime::reduce_scatter::reduce_scatter_block(
                view, fabric, &sub, &Settings::default(), send, &mut recv, 8 * block,
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
