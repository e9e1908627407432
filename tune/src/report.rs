//! The final table: the settings the run started from against the tuned ones, size by
//! size, and where the tuned ones lost.

use topo_hierarchy::settings::format_bytes;

use crate::measure::compare;
use crate::search::Run;
use crate::space::{self, Op};
use crate::state::State;

/// One row of the final table: op, bytes, the start's time, the tuned time (us), and
/// whether the tuned settings lost there (the times are then those of the median ratio).
pub(crate) type Row = (Op, usize, f64, f64, bool);

/// Times the settings tuning started from and the tuned ones side by side at every size;
/// a size where the tuned ones lose by more than [`space::MARGIN`] three times over is
/// timed twice more, and counts as lost if the median of the three ratios loses.
pub(crate) fn side_by_side(
    run: &mut Run,
    start: &State,
    state: &State,
    ops: &[Op],
    sizes: &[usize],
) -> anyhow::Result<Vec<Row>> {
    let mut both = run.open(&[start.pairs(None, None, None), state.pairs(None, None, None)])?;
    let slice = run.slice.max(0.01);
    let mut table = Vec::new();
    for &op in ops {
        for &b in sizes {
            // The comparison always runs: a file without it would say nothing.
            let mut t = compare(run.world, &mut both, op, b, slice);
            run.done += 2;
            let mut lost = false;
            if space::loses(t[0], t[1]) {
                let mut runs = vec![t];
                for _ in 0..2 {
                    runs.push(compare(run.world, &mut both, op, b, slice));
                    run.done += 2;
                }
                runs.sort_by(|x, y| (x[1] / x[0]).total_cmp(&(y[1] / y[0])));
                t = runs.swap_remove(1);
                lost = space::loses(t[0], t[1]);
            }
            table.push((op, b, t[0], t[1], lost));
        }
    }
    Ok(table)
}

/// Where the tuned settings lost in `table`, for a progress line.
pub(crate) fn losses(table: &[Row]) -> String {
    table
        .iter()
        .filter(|r| r.4)
        .map(|r| {
            format!(
                "{} {} ({:.2})",
                r.0.key(),
                format_bytes(r.1 as u64),
                r.3 / r.2
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}
