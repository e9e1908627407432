//! A context's shared state ([`ContextState`]): the hierarchy, the nonblocking schedules in flight
//! and the collectives handed to MPI. A [`crate::Topo`] owns it with its requests, and
//! two things advance it from outside the caller's own calls: Open MPI's progress engine
//! ([`crate::mpi_hook`]) and the optional progress thread ([`crate::progress_thread`]).
//! It lives behind a mutex ([`Shared`]); every holder only ever tries the lock except
//! the caller's own calls, so nobody waits for the progress thread.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use mpi::topology::Communicator;
use topo_hierarchy::Settings;
use topo_hierarchy::remap::RingPeers;
use topo_hierarchy::remap::halving::{HalvingOrder, HalvingPeers};
use topo_hierarchy::remap::partition::Placement;
use topo_hierarchy::settings::{AllgatherAlg, AllreduceAlg, BarrierAlg, ReduceScatterAlg};

use crate::backoff::Backoff;
use crate::error::{Error, Result};
use crate::ffi::native::NativeRequest;
use crate::lane::Lane;
use crate::links::Links;
use crate::nonblocking::iallgather::Exchange;
use crate::nonblocking::{Builder, Engine, Reach, Schedule, Shape};
use crate::nonblocking::{iallreduce, ibarrier};
use crate::reduce::Scratch;
use crate::serial_lock::{SerialGuard, SerialLock};
use crate::transport::mpi::MpiTransport;
use crate::view::View;

/// Exit code of a job aborted by the runtime (a peer died, or a collective failed).
pub const ABORT_CODE: i32 = 20;

/// What the hierarchical path needs: the rank's view, its settings and its transports.
pub(crate) struct HierarchicalPath {
    pub(crate) view: View,
    /// The view whose network part is one group of every rank that reaches the network
    /// ([`View::over_network`]), for Barrier and small Allreduce.
    pub(crate) network_view: View,
    /// The view whose network part is one group of every rank that reaches the network in
    /// rank order, for Scan's larger messages ([`crate::scan::view_for`]).
    pub(crate) scan_view: View,
    pub(crate) settings: Settings,
    pub(crate) links: Links<MpiTransport>,
    pub(crate) scratch: Scratch,
    /// This rank's peers in the flat Allgather exchanges the settings may choose, worked
    /// out at setup.
    pub(crate) exchanges: Exchanges,
    /// The context's part in the node's lanes, for a context without a segment of its
    /// own (`crate::lane`).
    pub(crate) lane: Option<Lane>,
    /// The ranks under each member of this rank's groups, for Gather, Scatter and Scan: learned
    /// at the first of them (collective: every rank makes it) and kept.
    pub(crate) subtrees: Option<crate::subtrees::Subtrees>,
    /// Whether Scan and Exscan take their hierarchical form ([`crate::scan::in_order`]):
    /// agreed at the first of them and kept.
    pub(crate) scan_in_order: Option<bool>,
    /// Rank 0's whole result of a Reduce_scatter_block, kept between calls.
    pub(crate) reduced: Vec<u8>,
    /// An Allgatherv's blocks one after another, where the caller's displacements do not
    /// lay them out so, kept between calls.
    pub(crate) gathered: Vec<u8>,
}

impl HierarchicalPath {
    /// Runs `f`, a blocking collective that runs the hierarchical algorithms directly, on
    /// a lane claimed for it if the context uses the node's lanes.
    // Inlined: a closure's captures (a buffer's pointer and length) stored into its
    // environment one by one and copied as one 16-byte piece stall the load.
    #[inline(always)]
    pub(crate) fn on_lane<R>(&mut self, f: impl FnOnce(&mut Self) -> Result<R>) -> Result<R> {
        let Some(mut lane) = self.lane.take() else {
            return f(self);
        };
        let r = lane.bind(&mut self.links).and_then(|()| f(self));
        lane.unbind(&mut self.links);
        self.lane = Some(lane);
        r
    }

    /// What [`crate::subtrees::Subtrees::learn`] learns, learned first if it is not yet
    /// (collective: call it where every rank of the context calls it).
    pub(crate) fn subtrees(&mut self) -> Result<&crate::subtrees::Subtrees> {
        if self.subtrees.is_none() {
            self.subtrees = Some(crate::subtrees::Subtrees::learn(
                &self.view,
                &mut self.links,
            )?);
        }
        Ok(self.subtrees.as_ref().expect("learned above"))
    }

    /// [`crate::scan::in_order`]'s answer, agreed first if it is not yet (collective:
    /// call it where every rank of the context calls it).
    pub(crate) fn scan_is_hierarchical(&mut self) -> Result<bool> {
        if let Some(known) = self.scan_in_order {
            return Ok(known);
        }
        self.subtrees()?;
        let sub = self.subtrees.as_ref().expect("learned above");
        let known = crate::scan::in_order(
            &self.view,
            &mut self.links,
            sub,
            &self.settings,
            &mut self.scratch,
        )?;
        self.scan_in_order = Some(known);
        Ok(known)
    }

    /// The halving order of a Reduce_scatter_block (`block`) or Reduce_scatter of `total`
    /// bytes of contribution, if the settings choose recursive halving for its blocks
    /// ([`Settings::reduce_scatter_v_halving`] for a Reduce_scatter).
    pub(crate) fn halving_blocks(
        &self,
        total: usize,
        block: bool,
    ) -> Option<&crate::nonblocking::ireduce_scatter::HalvingBlocks> {
        let size = self.view.size as usize;
        let mean = total / size.max(1);
        // (The ring's rules run as halving where the context keeps no ring order.) On two
        // ranks halving is one exchange, whatever the rules: the other forms move more.
        let halving = size == 2
            || if block {
                matches!(
                    self.settings.reduce_scatter_for(mean),
                    ReduceScatterAlg::Halving | ReduceScatterAlg::Ring
                )
            } else {
                self.settings.reduce_scatter_v_halving(mean)
            };
        halving
            .then(|| self.exchanges.halving_blocks(size, self.view.rank))
            .flatten()
    }

    /// The view an Allreduce of `bytes` runs on ([`crate::allreduce::view_for`]).
    pub(crate) fn allreduce_view(&self, bytes: usize) -> &View {
        crate::allreduce::view_for(&self.view, &self.network_view, &self.settings, bytes)
    }

    /// The flat form an Allreduce of `len` bytes takes and the peers it runs with, when
    /// the settings choose one ([`AllreduceAlg::is_flat`]) and its order is known.
    fn flat_allreduce_peers(&self, len: usize) -> Option<(AllreduceAlg, FlatPeers<'_>)> {
        let alg = self.settings.allreduce_for(len);
        let peers = match alg {
            AllreduceAlg::Ring => FlatPeers::Ring(self.exchanges.ring()?),
            a if a.uses_halving_order() => FlatPeers::Halving(self.exchanges.halving.as_ref()?),
            _ => return None,
        };
        Some((alg, peers))
    }

    /// The steps of a flat Allreduce of `len` bytes of `elem`-byte elements (`send`: the
    /// contribution is in the send buffer), and how many bytes of
    /// [`crate::nonblocking::Buf::Tmp`] they use, when it takes a flat form
    /// ([`HierarchicalPath::flat_allreduce_peers`]); `None` for the hierarchical forms.
    pub(crate) fn flat_allreduce(
        &self,
        elem: usize,
        send: bool,
        len: usize,
    ) -> Option<(Builder, usize)> {
        Some(match self.flat_allreduce_peers(len)? {
            (_, FlatPeers::Ring(p)) => (iallreduce::build_ring(p, elem, send, len), 0),
            (AllreduceAlg::Rabenseifner(piece), FlatPeers::Halving(p)) => {
                let piece = piece as usize;
                (iallreduce::build_rabenseifner(p, elem, send, len, piece), 0)
            }
            (_, FlatPeers::Halving(p)) => iallreduce::build_recursive_doubling(p, send, len),
        })
    }

    /// Whether an Allreduce of `len` bytes takes a flat form ([`HierarchicalPath::flat_allreduce`]).
    pub(crate) fn allreduce_is_flat(&self, len: usize) -> bool {
        self.flat_allreduce_peers(len).is_some()
    }

    /// The flat barrier's rounds, when the settings choose it and its order is known.
    fn flat_barrier_rounds(&self) -> Option<&[(u32, u32)]> {
        (self.settings.barrier_alg() == BarrierAlg::Flat)
            .then_some(self.exchanges.dissemination.as_deref())
            .flatten()
    }

    /// The flat barrier's steps, when the settings choose it and its order is known.
    pub(crate) fn flat_barrier(&self) -> Option<Builder> {
        self.flat_barrier_rounds().map(ibarrier::build_flat)
    }

    /// Whether the barrier takes the flat form ([`HierarchicalPath::flat_barrier`]).
    pub(crate) fn barrier_is_flat(&self) -> bool {
        self.flat_barrier_rounds().is_some()
    }
}

/// The peers of a flat Allreduce form: the ring's, or the halving order's
/// (Rabenseifner's and recursive doubling).
enum FlatPeers<'a> {
    Ring(&'a RingPeers),
    Halving(&'a HalvingPeers),
}

/// The flat exchanges a context has worked out, one per Allgather algorithm that uses one,
/// and the orders of the flat Allreduce algorithms.
#[derive(Debug, Default)]
pub(crate) struct Exchanges {
    /// `rd`: recursive doubling or Bruck.
    doubling: Option<Exchange>,
    /// `ring`, the Allgather's and the Allreduce's.
    ring: Option<Exchange>,
    /// The Allreduce's `rabenseifner` and `rd`.
    pub(crate) halving: Option<HalvingPeers>,
    /// The flat barrier's rounds, `(to, from)` ([`crate::nonblocking::ibarrier::build_flat`]).
    pub(crate) dissemination: Option<Vec<(u32, u32)>>,
    /// Every rank's node label (its node's lowest world rank), kept from the setup on a
    /// context of several nodes (empty on one node), and the ranks by node worked out from
    /// them at the first Alltoall or Alltoallv ([`Exchanges::by_node`]).
    pub(crate) node_labels: Vec<u32>,
    /// Every rank's leaf switch (`u32::MAX` where the network map names none), kept with
    /// the node labels.
    pub(crate) switch_labels: Vec<u32>,
    by_node: std::cell::OnceCell<crate::by_node::ByNode>,
    /// The Reduce_scatter_block's halving order, worked out at its first call
    /// ([`Exchanges::halving_blocks`]).
    halving_blocks: std::cell::OnceCell<Option<crate::nonblocking::ireduce_scatter::HalvingBlocks>>,
}

impl Exchanges {
    /// Where algorithm `alg`'s exchange is kept; `None` for the hierarchical form, which
    /// has none.
    pub(crate) fn slot(&mut self, alg: AllgatherAlg) -> Option<&mut Option<Exchange>> {
        match alg {
            AllgatherAlg::Hierarchical(_) => None,
            AllgatherAlg::RecursiveDoubling => Some(&mut self.doubling),
            AllgatherAlg::Ring => Some(&mut self.ring),
        }
    }

    /// The ring's order, if worked out.
    pub(crate) fn ring(&self) -> Option<&RingPeers> {
        match &self.ring {
            Some(Exchange::Ring(p)) => Some(p),
            _ => None,
        }
    }

    /// The context's ranks by node, on a context of several nodes: worked out at the first
    /// call (local: from the labels every rank learned at setup) and kept.
    pub(crate) fn by_node(&self) -> Option<&crate::by_node::ByNode> {
        if self.node_labels.is_empty() {
            return None;
        }
        Some(
            self.by_node
                .get_or_init(|| crate::by_node::ByNode::new(&self.node_labels)),
        )
    }

    /// The blocks' order of a Reduce_scatter_block by recursive halving in the hierarchy's
    /// order over the context's `size` ranks, with rank `rank`'s part: worked out at the
    /// first call (local: from the labels every rank learned at setup; on one node every
    /// rank shares it) and kept.
    pub(crate) fn halving_blocks(
        &self,
        size: usize,
        rank: u32,
    ) -> Option<&crate::nonblocking::ireduce_scatter::HalvingBlocks> {
        self.halving_blocks
            .get_or_init(|| {
                let place = if self.node_labels.is_empty() {
                    Placement::nodes(&vec![0; size])
                } else {
                    Placement::with_switches(&self.node_labels, &self.switch_labels)
                };
                let order = HalvingOrder::new(&place);
                crate::nonblocking::ireduce_scatter::HalvingBlocks::of(&order)(rank)
            })
            .as_ref()
    }

    /// Algorithm `alg`'s exchange, if worked out.
    pub(crate) fn get(&self, alg: AllgatherAlg) -> Option<&Exchange> {
        match alg {
            AllgatherAlg::Hierarchical(_) => None,
            AllgatherAlg::RecursiveDoubling => self.doubling.as_ref(),
            AllgatherAlg::Ring => self.ring.as_ref(),
        }
    }
}

/// A context's state, shared with its requests and the progress hooks. Its lock is a
/// plain flag unless a progress thread shares it ([`crate::serial_lock`]).
pub(crate) type Shared = Arc<SerialLock<ContextState>>;

/// A context's state behind its lock: a mutex if another thread may reach it at the same
/// time (`shared_by_threads`: a progress thread, or `MPI_THREAD_MULTIPLE`), a flag
/// otherwise.
pub(crate) fn shared(state: ContextState, shared_by_threads: bool) -> Shared {
    Arc::new(if shared_by_threads {
        SerialLock::new(state)
    } else {
        // SAFETY: without a progress thread, below MPI_THREAD_MULTIPLE, the state is
        // reached only through this context, its requests and `Progress` handles (none of
        // them `Send`), and this thread's MPI progress hook: one thread. (The PMPI
        // library, which moves contexts between threads under MPI_THREAD_SERIALIZED, has
        // the program's own ordering of its MPI calls between such uses.)
        unsafe { SerialLock::new_serial(state) }
    })
}

/// The guard of a context's state.
pub(crate) type Locked<'a> = SerialGuard<'a, ContextState>;

/// Locks `shared`, waiting for it. A panic while it was held (a request dropped before it
/// completed panics) leaves the state consistent: every change to it is made whole
/// before anything can panic, and poisoning is reported by [`ContextState::check_poison`].
#[inline]
pub(crate) fn lock(shared: &Shared) -> Locked<'_> {
    shared.lock()
}

/// Locks `shared` if nobody holds it.
#[inline]
pub(crate) fn try_lock(shared: &Shared) -> Option<Locked<'_>> {
    shared.try_lock()
}

/// State shared by a [`crate::Topo`] and its requests.
pub(crate) struct ContextState {
    pub(crate) hier: Option<Box<HierarchicalPath>>,
    engine: Engine,
    /// Collectives handed to MPI, by request id.
    native: BTreeMap<u64, NativeRequest>,
    next_id: u64,
    /// A request was dropped before it completed.
    pub(crate) poisoned: bool,
    /// MPI was initialised with `MPI_THREAD_MULTIPLE`: the progress thread may call it.
    thread_multiple: bool,
    /// A failure met by the progress thread, reported by the caller's next call.
    deferred: Option<Error>,
    /// Set when a collective starts, cleared (under the lock) by MPI's progress callback
    /// when it finds none in flight, so that the callback skips an idle context with one
    /// load (see `mpi_hook`).
    busy: Arc<AtomicBool>,
    rank: i32,
    node: String,
}

// SAFETY: `ContextState` holds raw pointers of three kinds, each safe to use from the thread that
// holds the mutex: the caller's buffers in schedules (kept valid until the schedule
// completes: a request lends them, `crate::request`), whichever thread polls it), the mapping of the
// node's segment (process-wide memory), and MPI handles. MPI is called through the state
// only by the thread that called MPI's initialisation, or by the progress thread when
// `thread_multiple` says MPI allows every thread to call it; otherwise that thread polls
// only the steps that make no MPI call (`Reach::WithoutMpi`).
unsafe impl Send for ContextState {}

impl ContextState {
    pub(crate) fn new(hier: Option<Box<HierarchicalPath>>, rank: i32, node: String) -> Self {
        ContextState {
            hier,
            engine: Engine::default(),
            native: BTreeMap::new(),
            next_id: 0,
            poisoned: false,
            thread_multiple: crate::ffi::comm::thread_multiple(),
            deferred: None,
            busy: Arc::new(AtomicBool::new(false)),
            rank,
            node,
        }
    }

    /// The flag that says this context may have collectives in flight (see `busy`).
    pub(crate) fn busy_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.busy)
    }

    /// Clears the busy flag if nothing is in flight. Returns whether something is.
    pub(crate) fn settle(&self) -> bool {
        let busy = !self.is_idle();
        if !busy {
            // Relaxed: set and cleared under the lock; a reader that sees a stale value
            // either takes the lock for nothing or looks again at its next turn.
            self.busy.store(false, Ordering::Relaxed);
        }
        busy
    }

    pub(crate) fn check_poison(&self) {
        if self.poisoned {
            eprintln!(
                "topo-run: rank {} on {}: a nonblocking collective's request was dropped \
                 before it completed, so its buffers may be gone; aborting the job (complete \
                 every request with wait or test)",
                self.rank, self.node
            );
            mpi::topology::SimpleCommunicator::world().abort(ABORT_CODE);
        }
    }

    /// Advances everything in flight without waiting.
    pub(crate) fn progress(&mut self) -> Result<()> {
        self.check_poison();
        if let Some(e) = self.deferred.take() {
            return Err(e);
        }
        if let Some(h) = &mut self.hier {
            self.engine.progress(&mut h.links, Reach::All)?;
        }
        self.native.retain(|_, req| !req.test());
        Ok(())
    }

    /// One turn of MPI's progress engine (`crate::mpi_hook`): advances what is in flight,
    /// and with `check` also checks the peers waited on; a failure aborts the job.
    pub(crate) fn advance_from_mpi(&mut self, check: bool) {
        if self.is_idle() {
            return;
        }
        let r = self
            .progress()
            .and_then(|()| if check { self.check_peers() } else { Ok(()) });
        if let Err(e) = r {
            self.fail(e);
        }
    }

    /// One turn of the progress thread: advances the schedules as far as that thread may
    /// (every step under `MPI_THREAD_MULTIPLE`, else the steps that make no MPI call).
    /// Returns how many moves the schedules have made so far, to tell whether this turn
    /// made any. A failure is kept for the caller's next call, which reports it.
    pub(crate) fn advance_from_thread(&mut self) -> u64 {
        let reach = if self.thread_multiple {
            Reach::All
        } else {
            Reach::WithoutMpi
        };
        if self.deferred.is_none()
            && !self.poisoned
            && let Some(h) = &mut self.hier
            && let Err(e) = self.engine.progress(&mut h.links, reach)
        {
            self.deferred = Some(e);
        }
        self.engine.moves()
    }

    /// Whether a schedule of topo-run's is in flight.
    pub(crate) fn has_schedules(&self) -> bool {
        !self.engine.is_idle()
    }

    /// Whether nothing is in flight.
    pub(crate) fn is_idle(&self) -> bool {
        !self.has_schedules() && self.native.is_empty()
    }

    pub(crate) fn is_complete(&self, id: u64) -> bool {
        self.engine.is_done(id) && !self.native.contains_key(&id)
    }

    /// The spin setting of waits on this context.
    pub(crate) fn spin(&self) -> u32 {
        self.hier.as_ref().map_or(0, |h| h.settings.spin)
    }

    /// Fails if a local peer that the oldest collective in flight waits on has died.
    pub(crate) fn check_peers(&mut self) -> Result<()> {
        match &mut self.hier {
            Some(h) => self.engine.check_peers(&mut h.links),
            None => Ok(()),
        }
    }

    /// Advances everything in flight until `done` holds: spins, then yields the core,
    /// checking now and then that the local peers waited on are alive.
    pub(crate) fn wait_until(&mut self, mut done: impl FnMut(&ContextState) -> bool) -> Result<()> {
        let mut backoff = Backoff::new(self.spin());
        loop {
            self.progress()?;
            if done(self) {
                return Ok(());
            }
            if backoff.pause() {
                self.check_peers()?;
            }
        }
    }

    /// Completes everything in flight.
    #[inline]
    pub(crate) fn quiesce(&mut self) -> Result<()> {
        // The common case, first and inlined: a blocking collective after blocking ones.
        if self.is_idle() && !self.poisoned && self.deferred.is_none() {
            return Ok(());
        }
        self.quiesce_slow()
    }

    #[cold]
    fn quiesce_slow(&mut self) -> Result<()> {
        if self.is_idle() {
            self.check_poison();
            return match self.deferred.take() {
                Some(e) => Err(e),
                None => Ok(()),
            };
        }
        self.wait_until(ContextState::is_idle)
    }

    pub(crate) fn fail(&self, e: Error) -> ! {
        let op = self.engine.current().unwrap_or("a nonblocking collective");
        abort(self.rank, &self.node, op, e)
    }

    /// Starts schedule `sched` as request `id`; a failure aborts the job.
    pub(crate) fn start(&mut self, id: u64, sched: Schedule) {
        let h = self
            .hier
            .as_mut()
            .expect("schedules run on the hierarchical path");
        self.busy.store(true, Ordering::Relaxed);
        if let Err(e) = self.engine.start(id, sched, &mut h.links) {
            self.fail(e);
        }
    }

    /// The steps of a completed schedule of the shape `head` with the blocks `parts`, and
    /// that shape, if kept (see [`Engine::reuse`]).
    pub(crate) fn reuse(
        &mut self,
        head: &Shape,
        parts: &[&[std::ops::Range<usize>]],
    ) -> Option<(Shape, Builder, usize, usize)> {
        self.engine.reuse(head, parts)
    }

    /// A buffer of `len` bytes for a schedule's accumulator or scratch (see
    /// [`Engine::buffer`]).
    pub(crate) fn buffer(&mut self, len: usize) -> Vec<u8> {
        self.engine.buffer(len)
    }

    /// Records an MPI request as request `id`.
    pub(crate) fn start_native(&mut self, id: u64, req: NativeRequest) {
        self.busy.store(true, Ordering::Relaxed);
        self.native.insert(id, req);
    }

    pub(crate) fn take_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }
}

/// Reports a failed collective and aborts the job with [`ABORT_CODE`].
pub(crate) fn abort(rank: i32, node: &str, op: &'static str, e: Error) -> ! {
    let e = e.during(op);
    eprintln!("topo-run: rank {rank} on {node}: {op} failed: {e}; aborting the job");
    mpi::topology::SimpleCommunicator::world().abort(ABORT_CODE)
}
