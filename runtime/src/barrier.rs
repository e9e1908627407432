//! Barrier: empty messages up the hierarchy to rank 0, then down again.

use topo_hierarchy::settings::Settings;

use crate::bcast::group_bcast;
use crate::combine::FnCombine;
use crate::error::Result;
use crate::reduce::group_reduce;
use crate::view::{Fabric, View};

/// Returns once every rank has entered the barrier.
pub fn barrier(view: &View, fabric: &mut dyn Fabric, s: &Settings) -> Result<()> {
    let nothing = FnCombine {
        elem: 1,
        f: |_: &mut [u8], _: &[u8]| {},
    };
    let mut highest = view.levels.len();
    for (i, l) in view.levels.iter().enumerate() {
        let alg = s.reduce_for(l.name, l.intra, 0);
        group_reduce(
            fabric.level(i),
            &l.members,
            l.me,
            0,
            alg,
            &mut [],
            &mut [],
            &nothing,
        )?;
        if l.me != 0 {
            highest = i + 1;
            break;
        }
    }
    for i in (0..highest).rev() {
        let l = &view.levels[i];
        let alg = s.bcast_for(l.name, l.intra, 0);
        group_bcast(fabric.level(i), &l.members, l.me, 0, alg, &mut [])?;
    }
    Ok(())
}
