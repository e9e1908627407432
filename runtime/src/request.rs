//! Nonblocking collectives for applications: the `immediate_*` methods of [`Topo`] and
//! the [`Request`]s they return, in rsmpi's style.
//!
//! A request borrows its buffers for the lifetime `'a` of an rsmpi scope
//! ([`mpi::request::scope`], or [`StaticScope`] for `'static` buffers). Complete it with
//! [`Request::wait`], [`Request::test`], [`wait_all`] or [`wait_any`]. Dropping a request
//! before it completes is a bug: it panics, as rsmpi's requests do, and any later call
//! into topo-run aborts the job, because the collective may still write into the
//! request's buffers.
//!
//! Every wait or test advances every collective in flight (topo-run's schedules and the
//! MPI requests of calls handed to MPI), so requests may be completed in any order. Under
//! Open MPI they also advance while the application is inside its own MPI calls
//! ([`crate::mpi_hook`]). While it computes, they stand still, unless the progress thread
//! runs ([`crate::progress_thread`]).
//!
//! The typed methods are thin wrappers: a plain type becomes bytes and goes to the same
//! schedule starters as the byte-level entry points of the PMPI library (`raw_*`);
//! anything else is handed to MPI's own nonblocking collective.

use std::cell::Cell;
use std::marker::PhantomData;
use std::os::raw::c_int;
use std::sync::Arc;

use mpi::collective::Operation;
use mpi::datatype::Equivalence;
use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::request::{Scope, StaticScope};
use mpi::topology::Communicator;
use topo_hierarchy::settings::AllgatherAlg;

use crate::backoff::Backoff;
use crate::combine::Combine;
use crate::context::{self, Hier, Shared};
use crate::nonblocking::{Builder, Schedule, Shape, iallreduce, ibarrier, ibcast, ireduce};
use crate::plain::{self, MpiCombine};
use crate::topo::Topo;

/// Something a request keeps alive until it completes (its operation).
trait Keep {}
impl<T: ?Sized> Keep for T {}

/// A nonblocking collective in flight, borrowing its buffers for `'a`.
#[must_use = "a request must be completed with wait or test"]
pub struct Request<'a, S: Scope<'a> = StaticScope> {
    core: Shared,
    id: u64,
    scope: S,
    done: bool,
    _keep: Option<Box<dyn Keep + 'a>>,
    _borrow: PhantomData<Cell<&'a ()>>,
    /// Completed on the thread that started it, which is the thread that calls MPI.
    _not_send: PhantomData<*const ()>,
}

impl<'a, S: Scope<'a>> std::fmt::Debug for Request<'a, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request").field("id", &self.id).finish()
    }
}

impl<'a, S: Scope<'a>> Request<'a, S> {
    fn new(core: &Shared, id: u64, scope: S, keep: Option<Box<dyn Keep + 'a>>) -> Self {
        scope.register();
        Request {
            core: Arc::clone(core),
            id,
            scope,
            done: false,
            _keep: keep,
            _borrow: PhantomData,
            _not_send: PhantomData,
        }
    }

    fn finish(&mut self) {
        self.done = true;
        // SAFETY: registered once in `new`, unregistered once here, after completion.
        unsafe { self.scope.unregister() };
    }

    /// Whether the collective has completed, advancing everything in flight first.
    fn poll(&self) -> bool {
        let mut core = context::lock(&self.core);
        if let Err(e) = core.progress() {
            core.fail(e);
        }
        core.is_complete(self.id)
    }

    /// Waits for the collective to complete (rsmpi: `Request::wait`).
    pub fn wait(mut self) {
        {
            let mut core = context::lock(&self.core);
            let id = self.id;
            if let Err(e) = core.wait_until(|c| c.is_complete(id)) {
                core.fail(e);
            }
        }
        self.finish();
    }

    /// Completes the request if the collective is done, else gives it back
    /// (rsmpi: `Request::test`). Advances every collective in flight.
    pub fn test(mut self) -> std::result::Result<(), Self> {
        if self.poll() {
            self.finish();
            Ok(())
        } else {
            Err(self)
        }
    }
}

impl<'a, S: Scope<'a>> Drop for Request<'a, S> {
    fn drop(&mut self) {
        if !self.done {
            context::lock(&self.core).poisoned = true;
            panic!("topo-run: a nonblocking collective's request was dropped before it completed");
        }
    }
}

/// Waits for every request (rsmpi: `wait_all`).
pub fn wait_all<'a, S: Scope<'a>>(requests: Vec<Request<'a, S>>) {
    for r in requests {
        r.wait();
    }
}

/// Waits until one of `requests` completes, removes it and returns its index; `None` if
/// there are none (rsmpi: `wait_any`). The requests may come from different contexts
/// ([`Topo::from_env_instance`]): each is looked up in its own, and every context involved
/// advances while it waits.
pub fn wait_any<'a, S: Scope<'a>>(requests: &mut Vec<Request<'a, S>>) -> Option<usize> {
    let mut cores: Vec<Shared> = Vec::new();
    for r in requests.iter() {
        if !cores.iter().any(|c| Arc::ptr_eq(c, &r.core)) {
            cores.push(Arc::clone(&r.core));
        }
    }
    let spin = context::lock(cores.first()?).spin();
    let mut backoff = Backoff::new(spin);
    let i = loop {
        for c in &cores {
            let mut core = context::lock(c);
            if let Err(e) = core.progress() {
                core.fail(e);
            }
        }
        if let Some(i) = requests
            .iter()
            .position(|r| context::lock(&r.core).is_complete(r.id))
        {
            break i;
        }
        if backoff.pause() {
            for c in &cores {
                let mut core = context::lock(c);
                if let Err(e) = core.check_peers() {
                    core.fail(e);
                }
            }
        }
    };
    requests.remove(i).finish();
    Some(i)
}

/// A nonblocking collective started through a byte-level entry point (the PMPI
/// library's): it borrows nothing, so its caller keeps the buffers valid until it has
/// completed. Finish it with [`RawRequest::complete`] once [`RawRequest::is_complete`].
#[must_use = "a request must be completed"]
#[derive(Debug)]
pub struct RawRequest(Request<'static, StaticScope>);

impl RawRequest {
    /// Whether the collective has completed (without advancing anything; see
    /// [`Progress::poll`]).
    pub fn is_complete(&self) -> bool {
        context::lock(&self.0.core).is_complete(self.0.id)
    }

    /// Releases a completed request; gives it back if it has not completed.
    pub fn complete(mut self) -> std::result::Result<(), Self> {
        if self.is_complete() {
            self.0.finish();
            Ok(())
        } else {
            Err(self)
        }
    }
}

/// A handle that advances a context's nonblocking collectives from outside it (from a
/// progress hook, while another context waits).
#[derive(Clone)]
pub struct Progress(Shared, PhantomData<*const ()>);

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Progress")
    }
}

impl Progress {
    /// Advances everything in flight without waiting. Does nothing while the context is
    /// itself running a call (that call makes the progress) or the progress thread holds
    /// it. A failure (a dead peer) aborts the job, naming the collective.
    pub fn poll(&self) {
        if let Some(mut core) = context::try_lock(&self.0)
            && let Err(e) = core.progress()
        {
            core.fail(e);
        }
    }

    /// Fails (aborting the job, naming the collective) if a local peer that the oldest
    /// collective in flight waits on has died.
    pub fn check_peers(&self) {
        if let Some(mut core) = context::try_lock(&self.0)
            && let Err(e) = core.check_peers()
        {
            core.fail(e);
        }
    }

    /// Whether no nonblocking collective is in flight (false while the context is busy).
    pub fn is_idle(&self) -> bool {
        context::try_lock(&self.0).is_some_and(|c| c.is_idle())
    }

    /// Whether both handles advance the same context.
    pub fn same(&self, other: &Progress) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Extends a borrow to `'static` for a [`RawRequest`].
///
/// # Safety
/// The referent must stay valid (and, for `&mut`, untouched by others) until the request
/// that holds it has completed.
unsafe fn forever<T: ?Sized>(r: &T) -> &'static T {
    // SAFETY: per the contract.
    unsafe { &*(r as *const T) }
}

/// As [`forever`], for a mutable borrow.
///
/// # Safety
/// As [`forever`].
unsafe fn forever_mut<T: ?Sized>(r: &mut T) -> &'static mut T {
    // SAFETY: per the contract.
    unsafe { &mut *(r as *mut T) }
}

/// The shape of a call (see [`Shape`]).
fn shape(
    op: &'static str,
    alg: Option<AllgatherAlg>,
    root: i32,
    len: usize,
    has_send: bool,
) -> Shape {
    Shape {
        op,
        alg,
        root: root as u32,
        len,
        has_send,
        elem: 0,
    }
}

/// A raw MPI call that starts a request on a communicator.
type Post<'b> = Box<dyn FnOnce(ffi::MPI_Comm, &mut ffi::MPI_Request) -> c_int + 'b>;

/// What a schedule runs on: the caller's buffers and the operation.
struct Args<'a> {
    name: &'static str,
    send: Option<&'a [u8]>,
    recv: Option<&'a mut [u8]>,
    op: Option<Box<dyn Combine>>,
}

// The schedule starters, shared by the typed and the byte-level entry points.
impl Topo {
    /// Starts a schedule built from this rank's view and settings; `build` returns the
    /// rounds and the sizes of the accumulator and the scratch. Calls of one `shape` reuse
    /// the steps of the last one that completed instead of building them again.
    fn start<'a, S: Scope<'a>>(
        &mut self,
        scope: S,
        args: Args<'a>,
        keep: Option<Box<dyn Keep + 'a>>,
        shape: Shape,
        build: impl FnOnce(&Hier) -> (Builder, usize, usize),
    ) -> Request<'a, S> {
        let mut core = context::lock(&self.core);
        core.check_poison();
        let id = core.take_id();
        let (b, acc, tmp) = match core.reuse(&shape) {
            Some(kept) => kept,
            None => build(
                core.hier
                    .as_ref()
                    .expect("schedules run on the hierarchical path"),
            ),
        };
        let bytes = args
            .send
            .map_or(0, <[u8]>::len)
            .max(args.recv.as_ref().map_or(0, |r| r.len()));
        let (acc, tmp) = (core.buffer(acc), core.buffer(tmp));
        // SAFETY: `send` and `recv` are borrowed for `'a`. The request registered with
        // `scope` below lives no longer than `'a` and completes before it ends (a scope
        // with a request left aborts the process; a dropped request poisons the engine,
        // which then aborts instead of running the schedule), and the engine drops the
        // schedule when it completes.
        let sched = unsafe {
            Schedule::with_buffers(args.name, b, args.send, args.recv, acc, tmp, args.op)
        }
        .shaped(shape);
        core.start(id, sched);
        let in_flight = core.has_schedules();
        drop(core);
        if in_flight {
            crate::progress_thread::kick(bytes);
        }
        Request::new(&self.core, id, scope, keep)
    }

    /// Hands a collective to MPI: `post` starts it on topo-run's world communicator.
    fn start_native<'a, S: Scope<'a>>(
        &mut self,
        scope: S,
        keep: Option<Box<dyn Keep + 'a>>,
        post: Post<'_>,
    ) -> Request<'a, S> {
        let mut core = context::lock(&self.core);
        core.check_poison();
        let id = core.take_id();
        // SAFETY: reading a constant MPI handle.
        let mut req = unsafe { ffi::RSMPI_REQUEST_NULL };
        post(self.world.as_raw(), &mut req);
        core.start_native(id, req);
        drop(core);
        Request::new(&self.core, id, scope, keep)
    }

    fn sched_bcast<'a, S: Scope<'a>>(
        &mut self,
        scope: S,
        root: i32,
        buf: &'a mut [u8],
    ) -> Request<'a, S> {
        let len = buf.len();
        let args = Args {
            name: "MPI_Ibcast",
            send: None,
            recv: Some(buf),
            op: None,
        };
        let shape = shape(args.name, None, root, len, false);
        self.start(scope, args, None, shape, |h| {
            (ibcast::build(&h.view, &h.settings, root as u32, len), 0, 0)
        })
    }

    fn sched_reduce<'a, S: Scope<'a>>(
        &mut self,
        scope: S,
        root: i32,
        send: Option<&'a [u8]>,
        recv: Option<&'a mut [u8]>,
        op: Box<dyn Combine>,
        keep: Option<Box<dyn Keep + 'a>>,
    ) -> Request<'a, S> {
        let has_send = send.is_some();
        let len = send.map_or_else(|| recv.as_ref().map_or(0, |r| r.len()), <[u8]>::len);
        let elem = op.elem_size();
        let args = Args {
            name: "MPI_Ireduce",
            send,
            recv,
            op: Some(op),
        };
        let shape = shape(args.name, None, root, len, has_send);
        self.start(scope, args, keep, shape, |h| {
            let (b, acc) = ireduce::build(&h.view, &h.settings, root as u32, has_send, len, elem);
            (b, acc, 0)
        })
    }

    /// A flat Allreduce ([`crate::context::Hier::flat_allreduce`]) run as its schedule and
    /// waited for: the blocking form.
    pub(crate) fn flat_all_reduce(&mut self, send: Option<&[u8]>, recv: &mut [u8], op: MpiCombine) {
        mpi::request::scope(|scope| {
            self.sched_all_reduce(scope, send, recv, Box::new(op), None)
                .wait()
        });
    }

    fn sched_all_reduce<'a, S: Scope<'a>>(
        &mut self,
        scope: S,
        send: Option<&'a [u8]>,
        recv: &'a mut [u8],
        op: Box<dyn Combine>,
        keep: Option<Box<dyn Keep + 'a>>,
    ) -> Request<'a, S> {
        let has_send = send.is_some();
        let len = recv.len();
        let args = Args {
            name: "MPI_Iallreduce",
            send,
            recv: Some(recv),
            op: Some(op),
        };
        let elem = args.op.as_ref().map_or(1, |op| op.elem_size());
        let shape = Shape {
            elem,
            ..shape(args.name, None, 0, len, has_send)
        };
        self.start(scope, args, keep, shape, |h| {
            if let Some((b, tmp)) = h.flat_allreduce(elem, has_send, len) {
                return (b, 0, tmp);
            }
            let (b, tmp) =
                iallreduce::build(h.allreduce_view(len), &h.settings, has_send, len, elem);
            (b, 0, tmp)
        })
    }

    /// Flat exchange `alg`'s schedule; the caller has checked [`Topo::exchange_for`].
    pub(crate) fn sched_all_gather<'a, S: Scope<'a>>(
        &mut self,
        scope: S,
        alg: AllgatherAlg,
        send: Option<&'a [u8]>,
        recv: &'a mut [u8],
    ) -> Request<'a, S> {
        let has_send = send.is_some();
        let len = recv.len() / self.world.size() as usize;
        let rank = self.world.rank() as u32;
        let args = Args {
            name: "MPI_Iallgather",
            send,
            recv: Some(recv),
            op: None,
        };
        let shape = shape(args.name, Some(alg), 0, len, has_send);
        self.start(scope, args, None, shape, |h| {
            let e = h.exchanges.get(alg).expect("exchange_for found the peers");
            let (b, tmp) = e.build(rank, len, has_send);
            (b, 0, tmp)
        })
    }

    fn sched_barrier(&mut self) -> Request<'static> {
        let args = Args {
            name: "MPI_Ibarrier",
            send: None,
            recv: None,
            op: None,
        };
        let shape = shape(args.name, None, 0, 0, false);
        self.start(StaticScope, args, None, shape, |h| {
            let b = h.flat_barrier();
            (
                b.unwrap_or_else(|| ibarrier::build(&h.network_view, &h.settings)),
                0,
                0,
            )
        })
    }

    /// Whether a reduction over `T` with `op` takes the hierarchical path.
    fn ours<T: 'static, O: Operation>(&self, op: &O) -> bool {
        self.is_hierarchical() && plain::is_plain::<T>() && plain::commutes(op)
    }
}

impl Topo {
    /// Starts a broadcast of `buf` from `root` (rsmpi: `Root::immediate_broadcast_into`).
    pub fn immediate_broadcast_into<'a, T, S>(
        &mut self,
        scope: S,
        root: i32,
        buf: &'a mut [T],
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        S: Scope<'a>,
    {
        if self.is_hierarchical() && plain::is_plain::<T>() {
            return self.sched_bcast(scope, root, plain::bytes_mut(buf));
        }
        let (count, dt) = (count(buf.len()), T::equivalent_datatype().as_raw());
        let ptr = buf.as_mut_ptr();
        self.start_native(
            scope,
            None,
            Box::new(move |comm, req| {
                // SAFETY: `buf` is borrowed for the request's lifetime `'a`.
                unsafe { ffi::MPI_Ibcast(ptr.cast(), count, dt, root, comm, req) }
            }),
        )
    }

    /// Starts a reduction of everyone's `send` into `recv` at this rank, the root
    /// (rsmpi: `Root::immediate_reduce_into_root`).
    pub fn immediate_reduce_into_root<'a, T, O, S>(
        &mut self,
        scope: S,
        send: &'a [T],
        recv: &'a mut [T],
        op: O,
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        O: Operation + 'a,
        S: Scope<'a>,
    {
        assert_eq!(
            send.len(),
            recv.len(),
            "immediate_reduce_into_root: send and receive lengths differ"
        );
        let root = self.world.rank();
        self.ireduce(scope, root, Some(send), Some(recv), op)
    }

    /// Like [`Topo::immediate_reduce_into_root`], with the root's contribution in `buf`.
    pub fn immediate_reduce_into_root_in_place<'a, T, O, S>(
        &mut self,
        scope: S,
        buf: &'a mut [T],
        op: O,
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        O: Operation + 'a,
        S: Scope<'a>,
    {
        let root = self.world.rank();
        self.ireduce(scope, root, None, Some(buf), op)
    }

    /// Starts this rank's contribution to a reduction whose result goes to `root`
    /// (rsmpi: `Root::immediate_reduce_into`).
    pub fn immediate_reduce_into<'a, T, O, S>(
        &mut self,
        scope: S,
        root: i32,
        send: &'a [T],
        op: O,
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        O: Operation + 'a,
        S: Scope<'a>,
    {
        assert_ne!(
            root,
            self.world.rank(),
            "immediate_reduce_into is for non-root ranks; the root calls immediate_reduce_into_root"
        );
        self.ireduce(scope, root, Some(send), None, op)
    }

    fn ireduce<'a, T, O, S>(
        &mut self,
        scope: S,
        root: i32,
        send: Option<&'a [T]>,
        recv: Option<&'a mut [T]>,
        op: O,
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        O: Operation + 'a,
        S: Scope<'a>,
    {
        if self.ours::<T, O>(&op) {
            let combine = Box::new(MpiCombine::new::<T, O>(&op));
            let (send, recv) = (send.map(plain::bytes), recv.map(plain::bytes_mut));
            return self.sched_reduce(scope, root, send, recv, combine, Some(Box::new(op)));
        }
        let n = send.map_or_else(|| recv.as_ref().map_or(0, |r| r.len()), <[T]>::len);
        let (count, dt, raw_op) = (count(n), T::equivalent_datatype().as_raw(), op.as_raw());
        // In place, MPI gets a copy of the contribution (rsmpi has no MPI_IN_PLACE), which
        // the request keeps alive with the operation.
        let copy: Option<Box<[T]>> = match (&send, &recv) {
            (None, Some(r)) => Some(r.to_vec().into_boxed_slice()),
            _ => None,
        };
        let sp = send
            .or(copy.as_deref())
            .map_or(std::ptr::null(), |s| s.as_ptr().cast());
        let rp = recv.map_or(std::ptr::null_mut(), |r| r.as_mut_ptr().cast());
        self.start_native(
            scope,
            Some(Box::new((op, copy))),
            Box::new(move |comm, req| {
                // SAFETY: the user's buffers are borrowed for the request's lifetime `'a`;
                // the copy and `op` live in the request until it completes.
                unsafe { ffi::MPI_Ireduce(sp, rp, count, dt, raw_op, root, comm, req) }
            }),
        )
    }

    /// Starts a reduction of everyone's `send` into every rank's `recv`
    /// (rsmpi: `CommunicatorCollectives::immediate_all_reduce_into`).
    pub fn immediate_all_reduce_into<'a, T, O, S>(
        &mut self,
        scope: S,
        send: &'a [T],
        recv: &'a mut [T],
        op: O,
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        O: Operation + 'a,
        S: Scope<'a>,
    {
        assert_eq!(
            send.len(),
            recv.len(),
            "immediate_all_reduce_into: send and receive lengths differ"
        );
        self.iallreduce(scope, Some(send), recv, op)
    }

    /// Like [`Topo::immediate_all_reduce_into`], with this rank's contribution in `buf`.
    pub fn immediate_all_reduce_in_place<'a, T, O, S>(
        &mut self,
        scope: S,
        buf: &'a mut [T],
        op: O,
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        O: Operation + 'a,
        S: Scope<'a>,
    {
        self.iallreduce(scope, None, buf, op)
    }

    fn iallreduce<'a, T, O, S>(
        &mut self,
        scope: S,
        send: Option<&'a [T]>,
        recv: &'a mut [T],
        op: O,
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        O: Operation + 'a,
        S: Scope<'a>,
    {
        if self.ours::<T, O>(&op) {
            let combine = Box::new(MpiCombine::new::<T, O>(&op));
            let (send, recv) = (send.map(plain::bytes), plain::bytes_mut(recv));
            return self.sched_all_reduce(scope, send, recv, combine, Some(Box::new(op)));
        }
        let (count, dt, raw_op) = (
            count(recv.len()),
            T::equivalent_datatype().as_raw(),
            op.as_raw(),
        );
        // In place, MPI gets a copy of the contribution, kept alive by the request.
        let copy: Option<Box<[T]>> = send.is_none().then(|| recv.to_vec().into_boxed_slice());
        let sp: *const T = send
            .or(copy.as_deref())
            .map_or(std::ptr::null(), <[T]>::as_ptr);
        let rp = recv.as_mut_ptr();
        self.start_native(
            scope,
            Some(Box::new((op, copy))),
            Box::new(move |comm, req| {
                // SAFETY: the user's buffers are borrowed for the request's lifetime `'a`;
                // the copy and `op` live in the request until it completes.
                unsafe { ffi::MPI_Iallreduce(sp.cast(), rp.cast(), count, dt, raw_op, comm, req) }
            }),
        )
    }

    /// Starts gathering every rank's `send` into `recv` on every rank, rank r's at
    /// `recv[r * send.len()..]` (rsmpi: `CommunicatorCollectives::immediate_all_gather_into`).
    /// Runs the remapped recursive doubling as a schedule where the blocking call would
    /// (`--allgather` rules, jobs of a power-of-two size); otherwise MPI's `MPI_Iallgather`.
    pub fn immediate_all_gather_into<'a, T, S>(
        &mut self,
        scope: S,
        send: &'a [T],
        recv: &'a mut [T],
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        S: Scope<'a>,
    {
        assert_eq!(
            send.len() * self.world.size() as usize,
            recv.len(),
            "immediate_all_gather_into: the receive buffer must hold size x send.len() elements"
        );
        self.iallgather(scope, Some(send), recv)
    }

    /// Like [`Topo::immediate_all_gather_into`], with this rank's block already at its place
    /// in `buf`.
    pub fn immediate_all_gather_in_place<'a, T, S>(
        &mut self,
        scope: S,
        buf: &'a mut [T],
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        S: Scope<'a>,
    {
        assert!(
            buf.len().is_multiple_of(self.world.size() as usize),
            "immediate_all_gather_in_place: the buffer must hold size blocks"
        );
        self.iallgather(scope, None, buf)
    }

    fn iallgather<'a, T, S>(
        &mut self,
        scope: S,
        send: Option<&'a [T]>,
        recv: &'a mut [T],
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        S: Scope<'a>,
    {
        if plain::is_plain::<T>()
            && let Some((alg, _)) = self.exchange_for(std::mem::size_of_val(recv))
        {
            let send = send.map(plain::bytes);
            return self.sched_all_gather(scope, alg, send, plain::bytes_mut(recv));
        }
        let size = self.world.size() as usize;
        let block = recv.len() / size;
        let dt = T::equivalent_datatype().as_raw();
        // In place, MPI gets a copy of this rank's block, kept alive by the request.
        let at = self.world.rank() as usize * block;
        let copy: Option<Box<[T]>> = send
            .is_none()
            .then(|| recv[at..at + block].to_vec().into_boxed_slice());
        let sp: *const T = send
            .or(copy.as_deref())
            .map_or(std::ptr::null(), <[T]>::as_ptr);
        let rp = recv.as_mut_ptr();
        let n = count(block);
        self.start_native(
            scope,
            Some(Box::new(copy)),
            Box::new(move |comm, req| {
                // SAFETY: the user's buffers are borrowed for the request's lifetime `'a`;
                // the copy lives in the request until it completes.
                unsafe { ffi::MPI_Iallgather(sp.cast(), n, dt, rp.cast(), n, dt, comm, req) }
            }),
        )
    }

    /// Starts a barrier (rsmpi: `Communicator::immediate_barrier`).
    pub fn immediate_barrier(&mut self) -> Request<'static> {
        if self.is_hierarchical() {
            return self.sched_barrier();
        }
        self.start_native(
            StaticScope,
            None,
            // SAFETY: a barrier has no buffers.
            Box::new(|comm, req| unsafe { ffi::MPI_Ibarrier(comm, req) }),
        )
    }
}

// Byte-level entry points, for callers that hold raw MPI buffers (the PMPI library). Each
// starts the hierarchical schedule and returns its request, or returns `None` without
// doing anything when the collectives go to MPI's own; the caller then hands the call to
// MPI. Ranks are world ranks.
impl Topo {
    /// A handle that advances this context's nonblocking collectives from a progress hook.
    pub fn progress_handle(&self) -> Progress {
        Progress(Arc::clone(&self.core), PhantomData)
    }

    /// Starts a broadcast of `buf` from `root`.
    ///
    /// # Safety
    /// `buf` must stay valid, and untouched by the caller, until the request completes.
    pub unsafe fn raw_immediate_broadcast(
        &mut self,
        root: i32,
        buf: &mut [u8],
    ) -> Option<RawRequest> {
        if !self.is_hierarchical() {
            return None;
        }
        // SAFETY: per the contract.
        let buf = unsafe { forever_mut(buf) };
        Some(RawRequest(self.sched_bcast(StaticScope, root, buf)))
    }

    /// Starts a reduction with `op` into `recv` at `root`. `send` is `None` in place (the
    /// root's contribution is in `recv`); `recv` is `None` on the other ranks.
    ///
    /// # Safety
    /// The buffers must stay valid, `send` unmodified and `recv` untouched by the caller,
    /// until the request completes.
    pub unsafe fn raw_immediate_reduce(
        &mut self,
        root: i32,
        send: Option<&[u8]>,
        recv: Option<&mut [u8]>,
        op: MpiCombine,
    ) -> Option<RawRequest> {
        if !self.is_hierarchical() {
            return None;
        }
        // SAFETY: per the contract.
        let (send, recv) = unsafe { (send.map(|s| forever(s)), recv.map(|r| forever_mut(r))) };
        let r = self.sched_reduce(StaticScope, root, send, recv, Box::new(op), None);
        Some(RawRequest(r))
    }

    /// Starts a reduction with `op` into every rank's `recv`; `send` is `None` in place.
    ///
    /// # Safety
    /// As [`Topo::raw_immediate_reduce`].
    pub unsafe fn raw_immediate_all_reduce(
        &mut self,
        send: Option<&[u8]>,
        recv: &mut [u8],
        op: MpiCombine,
    ) -> Option<RawRequest> {
        if !self.is_hierarchical() {
            return None;
        }
        // SAFETY: per the contract.
        let (send, recv) = unsafe { (send.map(|s| forever(s)), forever_mut(recv)) };
        let r = self.sched_all_reduce(StaticScope, send, recv, Box::new(op), None);
        Some(RawRequest(r))
    }

    /// Starts an Allgather into `recv` (rank r's block at `r * len`, `len = recv.len() /
    /// size`); `send` is `None` when this rank's block is in place. `None` (nothing done)
    /// where the blocking call would not run the remapped recursive doubling: the caller
    /// hands the call to MPI.
    ///
    /// # Safety
    /// As [`Topo::raw_immediate_reduce`].
    pub unsafe fn raw_immediate_all_gather(
        &mut self,
        send: Option<&[u8]>,
        recv: &mut [u8],
    ) -> Option<RawRequest> {
        let size = self.world.size() as usize;
        if !recv.len().is_multiple_of(size) || send.is_some_and(|b| b.len() * size != recv.len()) {
            return None;
        }
        let (alg, _) = self.exchange_for(recv.len())?;
        // SAFETY: per the contract.
        let (send, recv) = unsafe { (send.map(|s| forever(s)), forever_mut(recv)) };
        Some(RawRequest(self.sched_all_gather(
            StaticScope,
            alg,
            send,
            recv,
        )))
    }

    /// Starts a barrier.
    pub fn raw_immediate_barrier(&mut self) -> Option<RawRequest> {
        self.is_hierarchical()
            .then(|| RawRequest(self.sched_barrier()))
    }
}

/// An MPI element count.
fn count(n: usize) -> c_int {
    c_int::try_from(n).expect("MPI element counts are limited to i32::MAX")
}
