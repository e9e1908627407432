//! Ibarrier: empty messages up the hierarchy to rank 0, then down again, as one schedule
//! (run with an operation that combines nothing).

use topo_hierarchy::Settings;

use super::{Buf, Builder, Region, ibcast, ireduce};
use crate::view::View;

/// The steps of this rank's part in a barrier. A rank belongs to the groups above its
/// lowest one only as their leader, so it goes through all its levels both ways.
pub fn build(view: &View, s: &Settings) -> Builder {
    let mut b = Builder::default();
    let nothing = Region::whole(Buf::Acc, 0);
    let n = view.levels.len();
    ireduce::up(&mut b, view, s, 0, 0, n, nothing);
    ibcast::down(&mut b, view, s, 0, 0, n, nothing);
    b
}
