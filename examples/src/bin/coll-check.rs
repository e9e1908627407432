//! Correctness driver: runs topo-run's collectives over a matrix of types, operations,
//! sizes and roots, compares every result with MPI's own collective on the same inputs,
//! and prints `N passed, M failed` as its last line (exit 1 if anything failed).
//!
//! ```text
//! srun --mpi=pmix -n 4 topo-run -- coll-check [--quick]
//! ```

use anyhow::Context;
use clap::Parser;
use mpi::collective::{CommunicatorCollectives, Root, SystemOperation, UserOperation};
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::Operation;
use topo_examples::Value;
use topo_runtime::Topo;

#[derive(Parser, Debug)]
#[command(about = "Check topo-run's collectives against MPI's own")]
struct Args {
    /// Initialise MPI with MPI_THREAD_MULTIPLE, so that topo-run's progress thread
    /// (`topo-run --progress-thread`) may also run the network steps.
    #[arg(long)]
    thread_multiple: bool,
    /// Fewer sizes and repetitions (for oversubscribed runs).
    #[arg(long)]
    quick: bool,
    /// Back-to-back repetitions of the small collectives (slot-reuse races).
    #[arg(long, default_value_t = 2000)]
    repeat: usize,
    /// Require the hierarchical path (fail if topo-run fell back to MPI's collectives).
    #[arg(long)]
    require_topo: bool,
    /// Fault test: this rank kills itself (SIGKILL) in the middle of the back-to-back
    /// collectives; the others must stop with a message naming it.
    #[arg(long, value_name = "RANK")]
    die: Option<i32>,
    /// Fault test: this rank kills itself (SIGKILL) while the others have a nonblocking
    /// allreduce in flight; they must stop with a message naming it.
    #[arg(long, value_name = "RANK")]
    die_nonblocking: Option<i32>,
    /// Misuse test: drop a nonblocking request before it completes (a bug that must be
    /// caught loudly), then stop.
    #[arg(long)]
    drop_request: bool,
}

struct Checker<'a> {
    topo: Topo,
    world: &'a SimpleCommunicator,
    passed: u64,
    failed: u64,
    reported: u32,
}

impl Checker<'_> {
    /// Records one case; every rank contributes whether its result matched.
    fn record(&mut self, what: &str, ok: bool) {
        let mine = u8::from(!ok);
        let mut any = 0u8;
        self.world
            .all_reduce_into(&mine, &mut any, SystemOperation::max());
        if any == 0 {
            self.passed += 1;
        } else {
            self.failed += 1;
            if !ok && self.reported < 10 {
                self.reported += 1;
                eprintln!("FAILED on rank {}: {what}", self.world.rank());
            }
        }
    }

    /// `n + 1` values; callers pass the first `n`. The spare element keeps a real
    /// allocation behind empty slices: a dangling pointer of 1 is MPI_IN_PLACE to Open MPI.
    fn values<T: Value>(&self, n: usize, salt: i64, op: &str) -> Vec<T> {
        let r = i64::from(self.world.rank());
        (0..=n as i64)
            .map(|i| {
                let v = match op {
                    // Products stay exact and small: factors of 1 and 2 only.
                    "product" if r < 7 => 1 + (r + i + salt) % 2,
                    "product" => 1,
                    "logical_and" | "logical_or" | "logical_xor" => (r + i + salt) % 3 % 2,
                    _ => (r * 7 + i * 3 + salt) % T::SPAN,
                };
                T::from_i64(v)
            })
            .collect()
    }

    fn check_op<T: Value, O: Operation + Copy>(
        &mut self,
        name: &str,
        op: O,
        n: usize,
        roots: &[i32],
    ) {
        let size = self.world.size();
        let tag = |c: &str| format!("{c} {} x{n} op={name}", T::NAME);
        // Allreduce, out of place and in place.
        let send: Vec<T> = self.values(n, 1, name);
        let mut want = send.clone();
        self.world.all_reduce_into(&send[..n], &mut want[..n], op);
        let mut got = send.clone();
        self.topo.all_reduce_into(&send[..n], &mut got[..n], op);
        self.record(&tag("allreduce"), got[..n] == want[..n]);
        if name == "sum" {
            // An independent reference: the sum computed here from every rank's inputs.
            let reference: Vec<T> = (0..n as i64)
                .map(|i| {
                    T::from_i64(
                        (0..size)
                            .map(|r| (i64::from(r) * 7 + i * 3 + 1) % T::SPAN)
                            .sum(),
                    )
                })
                .collect();
            self.record(&tag("allreduce vs reference"), got[..n] == reference[..]);
            self.record(
                &tag("native allreduce vs reference"),
                want[..n] == reference[..],
            );
        }
        let mut inplace = send.clone();
        self.topo.all_reduce_in_place(&mut inplace[..n], op);
        self.record(&tag("allreduce in-place"), inplace[..n] == want[..n]);
        // Scan and Exscan, out of place and in place (Exscan's rank 0 has no result).
        let send: Vec<T> = self.values(n, 5, name);
        let first = self.world.rank() == 0;
        let mut want = send.clone();
        self.world.scan_into(&send[..n], &mut want[..n], op);
        let mut got = send.clone();
        self.topo.scan_into(&send[..n], &mut got[..n], op);
        self.record(&tag("scan"), got[..n] == want[..n]);
        let mut inplace = send.clone();
        self.topo.scan_in_place(&mut inplace[..n], op);
        self.record(&tag("scan in-place"), inplace[..n] == want[..n]);
        let mut want = send.clone();
        self.world
            .exclusive_scan_into(&send[..n], &mut want[..n], op);
        let mut got = send.clone();
        self.topo.exclusive_scan_into(&send[..n], &mut got[..n], op);
        self.record(&tag("exscan"), first || got[..n] == want[..n]);
        let mut inplace = send.clone();
        self.topo.exclusive_scan_in_place(&mut inplace[..n], op);
        self.record(&tag("exscan in-place"), first || inplace[..n] == want[..n]);
        // Reduce_scatter_block: every rank contributes `size` blocks of `n`, out of place
        // and in place.
        let size = size as usize;
        let send: Vec<T> = self.values(n * size, 6, name);
        // (One spare element each: an empty Vec's dangling address is MPI_IN_PLACE to Open
        // MPI, see `values`.)
        let mut want = vec![send[0]; n + 1];
        self.world
            .reduce_scatter_block_into(&send[..n * size], &mut want[..n], op);
        let mut got = vec![send[0]; n + 1];
        self.topo
            .reduce_scatter_block_into(&send[..n * size], &mut got[..n], op);
        self.record(&tag("reduce_scatter_block"), got[..n] == want[..n]);
        let mut inplace = send.clone();
        self.topo
            .reduce_scatter_block_in_place(&mut inplace[..n * size], op);
        // The rest of the buffer keeps the contribution, as Open MPI's does.
        self.record(
            &tag("reduce_scatter_block in-place"),
            inplace[..n] == want[..n] && inplace[n..n * size] == send[n..n * size],
        );
        // Its nonblocking form, out of place and in place, both in flight at once.
        let mut igot = vec![send[0]; n + 1];
        let mut iinplace = send.clone();
        let topo = &mut self.topo;
        mpi::request::scope(|scope| {
            let a = topo.immediate_reduce_scatter_block_into(
                scope,
                &send[..n * size],
                &mut igot[..n],
                op,
            );
            let b =
                topo.immediate_reduce_scatter_block_in_place(scope, &mut iinplace[..n * size], op);
            a.wait();
            b.wait();
        });
        self.record(&tag("ireduce_scatter_block"), igot[..n] == want[..n]);
        self.record(
            &tag("ireduce_scatter_block in-place"),
            iinplace[..n] == want[..n] && iinplace[n..n * size] == send[n..n * size],
        );
        // Reduce to each root, out of place and in place.
        for &root in roots {
            let send: Vec<T> = self.values(n, 2 + i64::from(root), name);
            let rank = self.world.rank();
            let mut want = send.clone();
            let mut got = send.clone();
            let p = self.world.process_at_rank(root);
            if rank == root {
                p.reduce_into_root(&send[..n], &mut want[..n], op);
                self.topo.reduce_into_root(&send[..n], &mut got[..n], op);
            } else {
                p.reduce_into(&send[..n], op);
                self.topo.reduce_into(root, &send[..n], op);
            }
            self.record(
                &format!("{} root={root}", tag("reduce")),
                rank != root || got[..n] == want[..n],
            );
            let mut inplace = send.clone();
            if rank == root {
                self.topo.reduce_into_root_in_place(&mut inplace[..n], op);
            } else {
                self.topo.reduce_into(root, &send[..n], op);
            }
            self.record(
                &format!("{} in-place root={root}", tag("reduce")),
                rank != root || inplace[..n] == want[..n],
            );
        }
    }

    /// The nonblocking reductions of `check_op`, all in flight at once: allreduce out of
    /// place and in place, and a reduce to every root (in place at the root), with a
    /// blocking barrier in the middle. Completed with `wait_all`.
    fn check_nonblocking_op<T: Value, O: Operation + Copy>(
        &mut self,
        name: &str,
        op: O,
        n: usize,
        roots: &[i32],
    ) {
        let rank = self.world.rank();
        let tag = |c: &str| format!("{c} {} x{n} op={name}", T::NAME);
        let send: Vec<T> = self.values(n, 1, name);
        let mut want = send.clone();
        self.world.all_reduce_into(&send[..n], &mut want[..n], op);
        let rsend: Vec<Vec<T>> = roots
            .iter()
            .map(|&r| self.values(n, 2 + i64::from(r), name))
            .collect();
        let mut rwant = rsend.clone();
        for ((&root, s), w) in roots.iter().zip(&rsend).zip(&mut rwant) {
            let p = self.world.process_at_rank(root);
            if rank == root {
                p.reduce_into_root(&s[..n], &mut w[..n], op);
            } else {
                p.reduce_into(&s[..n], op);
            }
        }
        let mut swant = send.clone();
        self.world.scan_into(&send[..n], &mut swant[..n], op);
        let mut xwant = send.clone();
        self.world
            .exclusive_scan_into(&send[..n], &mut xwant[..n], op);
        let mut got = send.clone();
        let mut inplace = send.clone();
        let mut rgot = rsend.clone();
        let (mut sgot, mut xgot) = (send.clone(), send.clone());
        let topo = &mut self.topo;
        mpi::request::scope(|scope| {
            let mut reqs = vec![
                topo.immediate_all_reduce_into(scope, &send[..n], &mut got[..n], op),
                topo.immediate_all_reduce_in_place(scope, &mut inplace[..n], op),
                topo.immediate_scan_into(scope, &send[..n], &mut sgot[..n], op),
                topo.immediate_exclusive_scan_in_place(scope, &mut xgot[..n], op),
            ];
            for ((&root, s), g) in roots.iter().zip(&rsend).zip(&mut rgot) {
                reqs.push(if rank == root {
                    topo.immediate_reduce_into_root_in_place(scope, &mut g[..n], op)
                } else {
                    topo.immediate_reduce_into(scope, root, &s[..n], op)
                });
            }
            topo.barrier();
            topo_runtime::wait_all(reqs);
        });
        self.record(&tag("iallreduce"), got[..n] == want[..n]);
        self.record(&tag("iallreduce in-place"), inplace[..n] == want[..n]);
        self.record(&tag("iscan"), sgot[..n] == swant[..n]);
        self.record(
            &tag("iexscan in-place"),
            rank == 0 || xgot[..n] == xwant[..n],
        );
        for ((&root, g), w) in roots.iter().zip(&rgot).zip(&rwant) {
            self.record(
                &format!("{} in-place root={root}", tag("ireduce")),
                rank != root || g[..n] == w[..n],
            );
        }
    }

    /// Nonblocking broadcasts from every root at once, completed in whatever order
    /// `wait_any` finds them, and one by `test` alone.
    fn check_nonblocking_bcast<T: Value>(&mut self, n: usize, roots: &[i32]) {
        let rank = self.world.rank();
        let mut want: Vec<Vec<T>> = roots.iter().map(|_| self.values(n, 5, "sum")).collect();
        let mut got: Vec<Vec<T>> = roots
            .iter()
            .zip(&want)
            .map(|(&r, w)| {
                if rank == r {
                    w.clone()
                } else {
                    vec![T::from_i64(0); n + 1]
                }
            })
            .collect();
        for (&root, w) in roots.iter().zip(&mut want) {
            self.world.process_at_rank(root).broadcast_into(&mut w[..n]);
        }
        let topo = &mut self.topo;
        mpi::request::scope(|scope| {
            let mut reqs: Vec<_> = roots
                .iter()
                .zip(&mut got)
                .map(|(&root, g)| topo.immediate_broadcast_into(scope, root, &mut g[..n]))
                .collect();
            let mut last = reqs.pop().expect("at least one root");
            while topo_runtime::wait_any(&mut reqs).is_some() {}
            loop {
                match last.test() {
                    Ok(()) => break,
                    Err(r) => last = r,
                }
            }
        });
        for ((&root, g), w) in roots.iter().zip(&got).zip(&want) {
            self.record(
                &format!("ibcast {} x{n} root={root}", T::NAME),
                g[..n] == w[..n],
            );
        }
    }

    fn check_bcast<T: Value>(&mut self, n: usize, roots: &[i32]) {
        for &root in roots {
            let mut want: Vec<T> = self.values(n, 5, "sum");
            let mut got = if self.world.rank() == root {
                want.clone()
            } else {
                vec![T::from_i64(0); n + 1]
            };
            self.world
                .process_at_rank(root)
                .broadcast_into(&mut want[..n]);
            self.topo.broadcast_into(root, &mut got[..n]);
            self.record(
                &format!("bcast {} x{n} root={root}", T::NAME),
                got[..n] == want[..n],
            );
        }
    }

    /// Allgather of `n` elements per rank (fewer when the result would pass 16 MiB), out of
    /// place against MPI's and a reference computed here, and in place, twice in a row.
    fn check_allgather<T: Value>(&mut self, n: usize) {
        let size = self.world.size() as usize;
        let e = std::mem::size_of::<T>();
        let n = if n * size * e > 16 << 20 { n / size } else { n };
        for round in 0..2i64 {
            let salt = 11 + round;
            let send: Vec<T> = self.values(n, salt, "sum");
            let mut want = vec![T::from_i64(0); n * size + 1];
            self.world
                .all_gather_into(&send[..n], &mut want[..n * size]);
            let mut got = vec![T::from_i64(0); n * size + 1];
            self.topo.all_gather_into(&send[..n], &mut got[..n * size]);
            let tag = |c: &str| format!("{c} {} x{n} round {round}", T::NAME);
            self.record(&tag("allgather"), got[..n * size] == want[..n * size]);
            let reference: Vec<T> = (0..size as i64)
                .flat_map(|r| {
                    (0..n as i64).map(move |i| T::from_i64((r * 7 + i * 3 + salt) % T::SPAN))
                })
                .collect();
            self.record(
                &tag("allgather vs reference"),
                got[..n * size] == reference[..],
            );
            let mut inplace = vec![T::from_i64(0); n * size + 1];
            let at = self.world.rank() as usize * n;
            inplace[at..at + n].copy_from_slice(&send[..n]);
            self.topo.all_gather_in_place(&mut inplace[..n * size]);
            self.record(
                &tag("allgather in-place"),
                inplace[..n * size] == want[..n * size],
            );

            // Nonblocking, out of place and in place, both in flight at once.
            let mut igot = vec![T::from_i64(0); n * size + 1];
            let mut iinplace = vec![T::from_i64(0); n * size + 1];
            iinplace[at..at + n].copy_from_slice(&send[..n]);
            let topo = &mut self.topo;
            mpi::request::scope(|scope| {
                let a = topo.immediate_all_gather_into(scope, &send[..n], &mut igot[..n * size]);
                let b = topo.immediate_all_gather_in_place(scope, &mut iinplace[..n * size]);
                a.wait();
                b.wait();
            });
            self.record(&tag("iallgather"), igot[..n * size] == want[..n * size]);
            self.record(
                &tag("iallgather in-place"),
                iinplace[..n * size] == want[..n * size],
            );
        }
    }

    /// Alltoall of `n` elements per block (fewer when all blocks would pass 16 MiB; with
    /// `quick`, 1 MiB), out of place against MPI's and against a reference, and in place;
    /// the nonblocking forms too.
    fn check_alltoall<T: Value>(&mut self, n: usize, quick: bool) {
        let size = self.world.size() as usize;
        let e = std::mem::size_of::<T>();
        let cap = if quick { 1 << 20 } else { 16 << 20 };
        let n = if n * size * size * e > cap {
            (cap / (size * size * e)).min(n)
        } else {
            n
        };
        let rank = self.world.rank() as i64;
        // Rank s's element i for rank d.
        let value = |s: i64, d: i64, i: i64| T::from_i64((s * 7 + d * 5 + i * 3) % T::SPAN);
        let mut send: Vec<T> = (0..size as i64)
            .flat_map(|d| (0..n as i64).map(move |i| value(rank, d, i)))
            .collect();
        send.push(T::from_i64(0));
        let all = n * size;
        let tag = |c: &str| format!("{c} {} x{n}", T::NAME);
        let mut want = vec![T::from_i64(0); all + 1];
        self.world.all_to_all_into(&send[..all], &mut want[..all]);
        let mut got = vec![T::from_i64(0); all + 1];
        self.topo.all_to_all_into(&send[..all], &mut got[..all]);
        self.record(&tag("alltoall"), got[..all] == want[..all]);
        let reference: Vec<T> = (0..size as i64)
            .flat_map(|s| (0..n as i64).map(move |i| value(s, rank, i)))
            .collect();
        self.record(&tag("alltoall vs reference"), got[..all] == reference[..]);
        let mut inplace = send.clone();
        self.topo.all_to_all_in_place(&mut inplace[..all]);
        self.record(&tag("alltoall in-place"), inplace[..all] == want[..all]);
        // Nonblocking, out of place and in place, both in flight at once.
        let mut igot = vec![T::from_i64(0); all + 1];
        let mut iinplace = send.clone();
        let topo = &mut self.topo;
        mpi::request::scope(|scope| {
            let a = topo.immediate_all_to_all_into(scope, &send[..all], &mut igot[..all]);
            let b = topo.immediate_all_to_all_in_place(scope, &mut iinplace[..all]);
            a.wait();
            b.wait();
        });
        self.record(&tag("ialltoall"), igot[..all] == want[..all]);
        self.record(&tag("ialltoall in-place"), iinplace[..all] == want[..all]);
        // Alltoallv: rank s sends rank d `(s + 2d) % 3 * n / 2` elements (none for some
        // pairs), received in reversed rank order with one element left alone after each.
        let (me, size32) = (rank as i32, size as i32);
        let count = |s: i32, d: i32| ((s + 2 * d) % 3) * (n as i32 / 2);
        let send_counts: Vec<i32> = (0..size32).map(|d| count(me, d)).collect();
        let send_displs: Vec<i32> = (0..size32).map(|d| d * n as i32).collect();
        let recv_counts: Vec<i32> = (0..size32).map(|s| count(s, me)).collect();
        let mut recv_displs = vec![0i32; size];
        let mut at = 0;
        for s in (0..size).rev() {
            recv_displs[s] = at;
            at += recv_counts[s] + 1;
        }
        let total = at as usize + 1;
        let mut want = vec![T::from_i64(-1); total];
        let mut got = vec![T::from_i64(-1); total];
        let send_part =
            mpi::datatype::Partition::new(&send[..all], &send_counts[..], &send_displs[..]);
        let mut recv_part =
            mpi::datatype::PartitionMut::new(&mut want[..], &recv_counts[..], &recv_displs[..]);
        self.world
            .all_to_all_varcount_into(&send_part, &mut recv_part);
        self.topo.all_to_all_varcount_into(
            &send[..all],
            &send_counts,
            &send_displs,
            &mut got[..],
            &recv_counts,
            &recv_displs,
        );
        self.record(&tag("alltoallv"), got == want);
        let mut igot = vec![T::from_i64(-1); total];
        let topo = &mut self.topo;
        mpi::request::scope(|scope| {
            topo.immediate_all_to_all_varcount_into(
                scope,
                &send[..all],
                &send_counts,
                &send_displs,
                &mut igot[..],
                &recv_counts,
                &recv_displs,
            )
            .wait();
        });
        self.record(&tag("ialltoallv"), igot == want);
        // Allgatherv: rank r contributes `(r * 3) % 4 * n / 2` elements (none for some),
        // received in reversed rank order with one element left alone after each.
        let counts: Vec<i32> = (0..size32).map(|r| (r * 3) % 4 * (n as i32 / 2)).collect();
        let mut displs = vec![0i32; size];
        let mut at = 0;
        for r in (0..size).rev() {
            displs[r] = at;
            at += counts[r] + 1;
        }
        let mine = &send[..counts[rank as usize] as usize];
        let mut want = vec![T::from_i64(-1); at as usize + 1];
        let mut got = want.clone();
        let mut part = mpi::datatype::PartitionMut::new(&mut want[..], &counts[..], &displs[..]);
        self.world.all_gather_varcount_into(mine, &mut part);
        self.topo
            .all_gather_varcount_into(mine, &mut got[..], &counts, &displs);
        self.record(&tag("allgatherv"), got == want);
        let mut igot = vec![T::from_i64(-1); at as usize + 1];
        let topo = &mut self.topo;
        mpi::request::scope(|scope| {
            topo.immediate_all_gather_varcount_into(scope, mine, &mut igot[..], &counts, &displs)
                .wait();
        });
        self.record(&tag("iallgatherv"), igot == want);
    }

    /// Gather and Scatter of `n` elements per rank (fewer when all blocks would pass 16
    /// MiB; with `quick`, 1 MiB, and one root: the last, which the first rank of its node
    /// serves in a job on several nodes) at each root, out of place against MPI's (and
    /// Scatter back against the blocks gathered) and in place at the root.
    fn check_gather_scatter<T: Value>(&mut self, n: usize, roots: &[i32], quick: bool) {
        let size = self.world.size() as usize;
        let e = std::mem::size_of::<T>();
        let cap = if quick { 1 << 20 } else { 16 << 20 };
        let n = if n * size * e > cap {
            (cap / (size * e)).min(n)
        } else {
            n
        };
        let roots = if quick {
            &roots[roots.len() - 1..]
        } else {
            roots
        };
        let rank = self.world.rank();
        for &root in roots {
            let tag = |c: &str| format!("{c} {} x{n} root={root}", T::NAME);
            let send: Vec<T> = self.values(n, 13, "sum");
            let is_root = rank == root;
            let mut want = vec![T::from_i64(0); n * size + 1];
            let mut got = vec![T::from_i64(0); n * size + 1];
            let p = self.world.process_at_rank(root);
            if is_root {
                p.gather_into_root(&send[..n], &mut want[..n * size]);
                self.topo.gather_into_root(&send[..n], &mut got[..n * size]);
            } else {
                p.gather_into(&send[..n]);
                self.topo.gather_into(root, &send[..n]);
            }
            self.record(
                &tag("gather"),
                !is_root || got[..n * size] == want[..n * size],
            );
            let at = rank as usize * n;
            let mut inplace = vec![T::from_i64(0); n * size + 1];
            if is_root {
                inplace[at..at + n].copy_from_slice(&send[..n]);
                self.topo
                    .gather_into_root_in_place(&mut inplace[..n * size]);
            } else {
                self.topo.gather_into(root, &send[..n]);
            }
            self.record(
                &tag("gather in-place"),
                !is_root || inplace[..n * size] == want[..n * size],
            );
            // Scatter the blocks gathered back: each rank gets its own.
            let mut mine = vec![T::from_i64(0); n + 1];
            let mut native = vec![T::from_i64(0); n + 1];
            if is_root {
                p.scatter_into_root(&want[..n * size], &mut native[..n]);
                self.topo
                    .scatter_into_root(&got[..n * size], &mut mine[..n]);
            } else {
                p.scatter_into(&mut native[..n]);
                self.topo.scatter_into(root, &mut mine[..n]);
            }
            self.record(
                &tag("scatter"),
                mine[..n] == native[..n] && mine[..n] == send[..n],
            );
            let mut back = vec![T::from_i64(0); n + 1];
            if is_root {
                self.topo.scatter_into_root_in_place(&got[..n * size]);
                back[..n].copy_from_slice(&got[at..at + n]);
            } else {
                self.topo.scatter_into(root, &mut back[..n]);
            }
            self.record(&tag("scatter in-place"), back[..n] == send[..n]);
            // Gatherv: rank r contributes `(r * 2 + 1) % 3 * n / 2` elements (none for
            // some), placed in reversed rank order with one element left alone after each;
            // then Scatterv of the same blocks back.
            let counts: Vec<i32> = (0..size as i32)
                .map(|r| (r * 2 + 1) % 3 * (n as i32 / 2))
                .collect();
            let mut displs = vec![0i32; size];
            let mut end = 0;
            for r in (0..size).rev() {
                displs[r] = end;
                end += counts[r] + 1;
            }
            let native_all = want;
            let mine = &send[..counts[rank as usize] as usize];
            let mut want = vec![T::from_i64(-1); end as usize + 1];
            let mut got = want.clone();
            if is_root {
                let mut part =
                    mpi::datatype::PartitionMut::new(&mut want[..], &counts[..], &displs[..]);
                p.gather_varcount_into_root(mine, &mut part);
                self.topo
                    .gather_varcount_into_root(mine, &mut got[..], &counts, &displs);
            } else {
                p.gather_varcount_into(mine);
                self.topo.gather_varcount_into(root, mine);
            }
            self.record(&tag("gatherv"), got == want);
            let mut back = vec![T::from_i64(-1); mine.len() + 1];
            let mut native = back.clone();
            let k = mine.len();
            if is_root {
                let part = mpi::datatype::Partition::new(&want[..], &counts[..], &displs[..]);
                p.scatter_varcount_into_root(&part, &mut native[..k]);
                self.topo
                    .scatter_varcount_into_root(&got[..], &counts, &displs, &mut back[..k]);
            } else {
                p.scatter_varcount_into(&mut native[..k]);
                self.topo.scatter_varcount_into(root, &mut back[..k]);
            }
            self.record(&tag("scatterv"), back == native && back[..k] == mine[..]);
            // The nonblocking forms, Igather and Igatherv in flight at once, then Iscatter
            // and Iscatterv.
            let mut igot = vec![T::from_i64(0); n * size + 1];
            let mut igotv = vec![T::from_i64(-1); end as usize + 1];
            let topo = &mut self.topo;
            mpi::request::scope(|scope| {
                let (a, b) = if is_root {
                    (
                        topo.immediate_gather_into_root(scope, &send[..n], &mut igot[..n * size]),
                        topo.immediate_gather_varcount_into_root(
                            scope,
                            mine,
                            &mut igotv[..],
                            &counts,
                            &displs,
                        ),
                    )
                } else {
                    (
                        topo.immediate_gather_into(scope, root, &send[..n]),
                        topo.immediate_gather_varcount_into(scope, root, mine),
                    )
                };
                a.wait();
                b.wait();
            });
            self.record(
                &tag("igather"),
                !is_root || igot[..n * size] == native_all[..n * size],
            );
            self.record(&tag("igatherv"), !is_root || igotv == want);
            let mut iback = vec![T::from_i64(0); n + 1];
            let mut ibackv = vec![T::from_i64(-1); k + 1];
            let topo = &mut self.topo;
            mpi::request::scope(|scope| {
                let (a, b) = if is_root {
                    (
                        topo.immediate_scatter_into_root(
                            scope,
                            &native_all[..n * size],
                            &mut iback[..n],
                        ),
                        topo.immediate_scatter_varcount_into_root(
                            scope,
                            &want[..],
                            &counts,
                            &displs,
                            &mut ibackv[..k],
                        ),
                    )
                } else {
                    (
                        topo.immediate_scatter_into(scope, root, &mut iback[..n]),
                        topo.immediate_scatter_varcount_into(scope, root, &mut ibackv[..k]),
                    )
                };
                a.wait();
                b.wait();
            });
            self.record(&tag("iscatter"), iback[..n] == send[..n]);
            self.record(&tag("iscatterv"), ibackv == back);
        }
    }

    fn check_type<T: Value>(&mut self, quick: bool) {
        let size = self.world.size();
        let roots: Vec<i32> = {
            let mut r = vec![0, size / 2, size - 1];
            r.dedup();
            r
        };
        let e = std::mem::size_of::<T>();
        // The default fragment and pipeline chunks, 8 KiB (the fragment of earlier
        // versions, the Allgather's in-place block size), 64 KiB (where the Allreduce of a
        // job on several nodes turns to Rabenseifner's), and the single-copy threshold and
        // its double (where messages among ranks that share a cache switch), each +-1
        // element.
        let defaults = topo_runtime::Settings::default();
        let mut sizes = vec![0, 1, 7, 1021];
        let single = defaults.single_copy as usize;
        // Every chunk of the built-in rules, and the sizes where they change.
        let mut edges: Vec<usize> = defaults
            .chunk_rules()
            .flat_map(|r| [Some(r.bytes as usize), r.below.map(|b| b as usize)])
            .flatten()
            .filter(|&b| !quick || b <= 4 << 20)
            .collect();
        edges.sort_unstable();
        edges.dedup();
        for b in [
            8 << 10,
            64 << 10,
            single,
            2 * single,
            defaults.fragment as usize,
        ]
        .into_iter()
        .chain(edges)
        {
            sizes.extend([b / e - 1, b / e, b / e + 1]);
        }
        if !quick {
            sizes.push((16 << 20) / e);
        }
        let sum = SystemOperation::sum();
        for &n in &sizes {
            self.check_bcast::<T>(n, &roots);
            self.check_allgather::<T>(n);
            self.check_gather_scatter::<T>(n, &roots, quick);
            self.check_alltoall::<T>(n, quick);
            self.check_op::<T, _>("sum", sum, n, &roots);
            self.check_nonblocking_bcast::<T>(n, &roots);
            self.check_nonblocking_op::<T, _>("sum", sum, n, &roots);
        }
        // Every predefined operation that applies to the type, at a few sizes.
        let mut ops = vec![
            ("max", SystemOperation::max()),
            ("min", SystemOperation::min()),
            ("product", SystemOperation::product()),
        ];
        if T::INTEGER {
            ops.extend([
                ("bitwise_and", SystemOperation::bitwise_and()),
                ("bitwise_or", SystemOperation::bitwise_or()),
                ("bitwise_xor", SystemOperation::bitwise_xor()),
                ("logical_and", SystemOperation::logical_and()),
                ("logical_or", SystemOperation::logical_or()),
                ("logical_xor", SystemOperation::logical_xor()),
            ]);
        }
        for (name, op) in ops {
            for n in [1, 1021, (8 << 10) / e + 1] {
                self.check_op::<T, _>(name, op, n, &roots);
                if n == 1021 || !quick {
                    self.check_nonblocking_op::<T, _>(name, op, n, &roots);
                }
            }
        }
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let universe = topo_examples::init_mpi(args.thread_multiple)?;
    let world = universe.world();
    let topo = Topo::from_env(&world).context("topo-run could not set up its collectives")?;
    let rank = world.rank();
    if rank == 0 {
        eprintln!(
            "coll-check: {} ranks, {}",
            world.size(),
            topo_examples::describe(&topo)
        );
    }
    if args.require_topo && !topo.is_hierarchical() {
        anyhow::bail!("--require-topo: topo-run fell back to MPI's collectives");
    }
    if args.drop_request {
        let mut topo = topo;
        let mut buf = vec![0u8; 1 << 20];
        mpi::request::scope(|scope| {
            // The root's broadcast cannot complete before the others receive, so the
            // request is surely in flight when it is dropped.
            drop(topo.immediate_broadcast_into(scope, 0, &mut buf[..]));
        });
        anyhow::bail!("a dropped request went unnoticed");
    }
    let mut c = Checker {
        topo,
        world: &world,
        passed: 0,
        failed: 0,
        reported: 0,
    };
    c.check_type::<i32>(args.quick);
    c.check_type::<i64>(true);
    c.check_type::<u8>(args.quick);
    c.check_type::<f32>(true);
    c.check_type::<f64>(args.quick);
    // A user-defined commutative operation takes the hierarchical path; a
    // non-commutative one must keep MPI's order (it is handed to MPI).
    let absmax = UserOperation::commutative(|x, y| {
        let (x, y) = (x.downcast::<i64>().unwrap(), y.downcast::<i64>().unwrap());
        for (a, b) in x.iter().zip(y.iter_mut()) {
            *b = (*a).abs().max((*b).abs());
        }
    });
    let first = UserOperation::associative(|x, y| {
        let (x, y) = (x.downcast::<i64>().unwrap(), y.downcast::<i64>().unwrap());
        y.copy_from_slice(x);
    });
    let roots = [0, world.size() - 1];
    for n in [1, 1025, 70_000] {
        c.check_op::<i64, _>("user-commutative", &absmax, n, &roots);
        c.check_op::<i64, _>("user-noncommutative", &first, n, &roots);
        c.check_nonblocking_op::<i64, _>("user-commutative", &absmax, n, &roots);
        c.check_nonblocking_op::<i64, _>("user-noncommutative", &first, n, &roots);
    }
    // Back-to-back small calls: slot reuse under pressure.
    let reps = if args.quick {
        args.repeat / 4
    } else {
        args.repeat
    };
    let mut all_ok = true;
    for i in 0..reps {
        if args.die == Some(rank) && i == reps / 2 {
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
        }
        let v = [i as i64 + i64::from(rank); 3];
        let mut got = [0i64; 3];
        c.topo
            .all_reduce_into(&v[..], &mut got[..], SystemOperation::sum());
        let s = world.size() as i64;
        all_ok &= got == [i as i64 * s + s * (s - 1) / 2; 3];
        let root = (i % world.size() as usize) as i32;
        let mut b = [if rank == root { i as u8 } else { 0 }; 5];
        c.topo.broadcast_into(root, &mut b[..]);
        all_ok &= b == [i as u8; 5];
        if i % 64 == 0 {
            c.topo.barrier();
        }
    }
    c.record(&format!("{reps} back-to-back allreduce+bcast"), all_ok);
    // Back-to-back nonblocking calls, several in flight, mixed with blocking ones. The
    // barrier's request is completed first while the other two are left in flight.
    let mut all_ok = true;
    for i in 0..reps / 4 {
        if args.die_nonblocking == Some(rank) && i == (reps / 8) | 1 {
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
        }
        let v = [i as i64 + i64::from(rank); 3];
        let mut got = [0i64; 3];
        let root = (i % world.size() as usize) as i32;
        let mut b = [if rank == root { i as u8 } else { 0 }; 5];
        let mut blocking = [0i64; 3];
        let topo = &mut c.topo;
        mpi::request::scope(|scope| {
            let a =
                topo.immediate_all_reduce_into(scope, &v[..], &mut got[..], SystemOperation::sum());
            let bc = topo.immediate_broadcast_into(scope, root, &mut b[..]);
            let bar = topo.immediate_barrier();
            if i % 2 == 0 {
                topo.all_reduce_into(&v[..], &mut blocking[..], SystemOperation::sum());
            }
            bar.wait();
            bc.wait();
            a.wait();
        });
        let s = world.size() as i64;
        let want = [i as i64 * s + s * (s - 1) / 2; 3];
        all_ok &= got == want && b == [i as u8; 5] && (i % 2 == 1 || blocking == want);
    }
    c.record(
        &format!(
            "{} back-to-back nonblocking allreduce+bcast+barrier",
            reps / 4
        ),
        all_ok,
    );
    c.topo.barrier();
    let (passed, failed) = (c.passed, c.failed);
    drop(c);
    if rank == 0 {
        println!("{passed} passed, {failed} failed");
    }
    if failed > 0 {
        std::process::exit(1);
    }
    Ok(())
}
