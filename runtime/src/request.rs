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
//! ([`crate::mpi_hook`]); while it computes, they stand still.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::os::raw::c_int;
use std::rc::Rc;

use mpi::collective::Operation;
use mpi::datatype::Equivalence;
use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::request::{Scope, StaticScope};
use mpi::topology::Communicator;

use crate::backoff::Backoff;
use crate::error::Result;
use crate::nonblocking::{Builder, Engine, Schedule, iallreduce, ibarrier, ibcast, ireduce};
use crate::plain::{self, MpiCombine};
use crate::topo::{Hier, Topo, abort};

/// State shared by a [`Topo`] and its requests.
pub(crate) struct Core {
    pub(crate) hier: Option<Box<Hier>>,
    engine: Engine,
    /// Collectives handed to MPI, by request id.
    native: BTreeMap<u64, ffi::MPI_Request>,
    next_id: u64,
    /// A request was dropped before it completed.
    poisoned: bool,
    rank: i32,
    node: String,
}

impl Core {
    pub(crate) fn new(hier: Option<Box<Hier>>, rank: i32, node: String) -> Self {
        Core {
            hier,
            engine: Engine::default(),
            native: BTreeMap::new(),
            next_id: 0,
            poisoned: false,
            rank,
            node,
        }
    }

    fn check_poison(&self) {
        if self.poisoned {
            eprintln!(
                "topo-run: rank {} on {}: a nonblocking collective's request was dropped \
                 before it completed, so its buffers may be gone; aborting the job (complete \
                 every request with wait or test)",
                self.rank, self.node
            );
            mpi::topology::SimpleCommunicator::world().abort(crate::ABORT_CODE);
        }
    }

    /// Advances everything in flight without waiting.
    fn progress(&mut self) -> Result<()> {
        self.check_poison();
        if let Some(h) = &mut self.hier {
            self.engine.progress(&mut h.links)?;
        }
        self.native.retain(|_, req| {
            let mut flag: c_int = 0;
            // SAFETY: `req` is an active request started by this module; MPI_Test frees
            // it (and sets it to null) once it completes, and then we forget it.
            unsafe { ffi::MPI_Test(req, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
            flag == 0
        });
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

    /// Whether nothing is in flight.
    pub(crate) fn is_idle(&self) -> bool {
        self.engine.is_idle() && self.native.is_empty()
    }

    fn is_complete(&self, id: u64) -> bool {
        self.engine.is_done(id) && !self.native.contains_key(&id)
    }

    /// The spin setting of waits on this context.
    fn spin(&self) -> u32 {
        self.hier.as_ref().map_or(0, |h| h.settings.spin)
    }

    /// Fails if a local peer that the oldest collective in flight waits on has died.
    fn check_peers(&mut self) -> Result<()> {
        match &mut self.hier {
            Some(h) => self.engine.check_peers(&mut h.links),
            None => Ok(()),
        }
    }

    /// Advances everything in flight until `done` holds: spins, then yields the core,
    /// checking now and then that the local peers waited on are alive.
    fn wait_until(&mut self, mut done: impl FnMut(&Core) -> bool) -> Result<()> {
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
    pub(crate) fn quiesce(&mut self) -> Result<()> {
        if self.is_idle() {
            self.check_poison();
            return Ok(());
        }
        self.wait_until(Core::is_idle)
    }

    pub(crate) fn fail(&self, e: crate::Error) -> ! {
        let op = self.engine.current().unwrap_or("a nonblocking collective");
        abort(self.rank, &self.node, op, e)
    }

    fn take_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }
}

/// Something a request keeps alive until it completes (its operation).
trait Keep {}
impl<T: ?Sized> Keep for T {}

/// A nonblocking collective in flight, borrowing its buffers for `'a`.
#[must_use = "a request must be completed with wait or test"]
pub struct Request<'a, S: Scope<'a> = StaticScope> {
    core: Rc<RefCell<Core>>,
    id: u64,
    scope: S,
    done: bool,
    _keep: Option<Box<dyn Keep + 'a>>,
    _borrow: PhantomData<Cell<&'a ()>>,
}

impl<'a, S: Scope<'a>> std::fmt::Debug for Request<'a, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request").field("id", &self.id).finish()
    }
}

impl<'a, S: Scope<'a>> Request<'a, S> {
    fn new(core: &Rc<RefCell<Core>>, id: u64, scope: S, keep: Option<Box<dyn Keep + 'a>>) -> Self {
        scope.register();
        Request {
            core: Rc::clone(core),
            id,
            scope,
            done: false,
            _keep: keep,
            _borrow: PhantomData,
        }
    }

    fn finish(&mut self) {
        self.done = true;
        // SAFETY: registered once in `new`, unregistered once here, after completion.
        unsafe { self.scope.unregister() };
    }

    /// Whether the collective has completed, advancing everything in flight first.
    fn poll(&self) -> bool {
        let mut core = self.core.borrow_mut();
        if let Err(e) = core.progress() {
            core.fail(e);
        }
        core.is_complete(self.id)
    }

    /// Waits for the collective to complete (rsmpi: `Request::wait`).
    pub fn wait(mut self) {
        {
            let mut core = self.core.borrow_mut();
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
            if let Ok(mut core) = self.core.try_borrow_mut() {
                core.poisoned = true;
            }
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
    let mut cores: Vec<Rc<RefCell<Core>>> = Vec::new();
    for r in requests.iter() {
        if !cores.iter().any(|c| Rc::ptr_eq(c, &r.core)) {
            cores.push(Rc::clone(&r.core));
        }
    }
    let spin = cores.first()?.borrow().spin();
    let mut backoff = Backoff::new(spin);
    let i = loop {
        for c in &cores {
            let mut core = c.borrow_mut();
            if let Err(e) = core.progress() {
                core.fail(e);
            }
        }
        if let Some(i) = requests
            .iter()
            .position(|r| r.core.borrow().is_complete(r.id))
        {
            break i;
        }
        if backoff.pause() {
            for c in &cores {
                let mut core = c.borrow_mut();
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
        self.0.core.borrow().is_complete(self.0.id)
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
pub struct Progress(Rc<RefCell<Core>>);

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Progress")
    }
}

impl Progress {
    /// Advances everything in flight without waiting. Does nothing while the context is
    /// itself running a call (that call makes the progress). A failure (a dead peer) aborts
    /// the job, naming the collective.
    pub fn poll(&self) {
        if let Ok(mut core) = self.0.try_borrow_mut()
            && let Err(e) = core.progress()
        {
            core.fail(e);
        }
    }

    /// Fails (aborting the job, naming the collective) if a local peer that the oldest
    /// collective in flight waits on has died.
    pub fn check_peers(&self) {
        if let Ok(mut core) = self.0.try_borrow_mut()
            && let Err(e) = core.check_peers()
        {
            core.fail(e);
        }
    }

    /// Whether no nonblocking collective is in flight.
    pub fn is_idle(&self) -> bool {
        self.0.try_borrow().is_ok_and(|c| c.is_idle())
    }

    /// Whether both handles advance the same context.
    pub fn same(&self, other: &Progress) -> bool {
        Rc::ptr_eq(&self.0, &other.0)
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

/// A raw MPI call that starts a request on a communicator.
type Post<'b> = Box<dyn FnOnce(ffi::MPI_Comm, &mut ffi::MPI_Request) -> c_int + 'b>;

impl Topo {
    /// Starts a schedule built from this rank's view and settings.
    #[allow(clippy::too_many_arguments)]
    fn start<'a, S: Scope<'a>>(
        &mut self,
        scope: S,
        name: &'static str,
        send: Option<&'a [u8]>,
        recv: Option<&'a mut [u8]>,
        op: Option<Box<dyn crate::combine::Combine>>,
        keep: Option<Box<dyn Keep + 'a>>,
        build: impl FnOnce(&Hier) -> (Builder, usize, usize),
    ) -> Request<'a, S> {
        let mut core = self.core.borrow_mut();
        core.check_poison();
        let id = core.take_id();
        let c = &mut *core;
        let h = c
            .hier
            .as_mut()
            .expect("schedules run on the hierarchical path");
        let (b, acc, tmp) = build(h);
        // SAFETY: `send` and `recv` are borrowed for `'a`. The request registered with
        // `scope` below lives no longer than `'a` and completes before it ends (a scope
        // with a request left aborts the process; a dropped request poisons the engine,
        // which then aborts instead of running the schedule), and the engine drops the
        // schedule when it completes.
        let sched = unsafe { Schedule::new(name, b, send, recv, acc, tmp, op) };
        if let Err(e) = c.engine.start(id, sched, &mut h.links) {
            c.fail(e);
        }
        drop(core);
        Request::new(&self.core, id, scope, keep)
    }

    /// Hands a collective to MPI: `post` starts it on topo-run's world communicator.
    fn start_native<'a, S: Scope<'a>>(
        &mut self,
        scope: S,
        keep: Option<Box<dyn Keep + 'a>>,
        post: Post<'_>,
    ) -> Request<'a, S> {
        let mut core = self.core.borrow_mut();
        core.check_poison();
        let id = core.take_id();
        // SAFETY: reading a constant MPI handle.
        let mut req = unsafe { ffi::RSMPI_REQUEST_NULL };
        post(self.world.as_raw(), &mut req);
        core.native.insert(id, req);
        drop(core);
        Request::new(&self.core, id, scope, keep)
    }

    /// Whether a reduction over `T` with `op` takes the hierarchical path.
    fn ours<T: 'static, O: Operation>(&self, op: &O) -> bool {
        self.is_hierarchical() && plain::is_plain::<T>() && op.is_commutative()
    }

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
            let bytes = plain::bytes_mut(buf);
            let len = bytes.len();
            return self.start(scope, "MPI_Ibcast", None, Some(bytes), None, None, |h| {
                (ibcast::build(&h.view, &h.settings, root as u32, len), 0, 0)
            });
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
            let has_send = send.is_some();
            let len = send.map_or_else(|| recv.as_ref().map_or(0, |r| r.len()), <[T]>::len);
            let len = len * std::mem::size_of::<T>();
            let (send, recv) = (send.map(plain::bytes), recv.map(plain::bytes_mut));
            return self.start(
                scope,
                "MPI_Ireduce",
                send,
                recv,
                Some(combine),
                Some(Box::new(op)),
                |h| {
                    let (b, acc) = ireduce::build(&h.view, &h.settings, root as u32, has_send, len);
                    (b, acc, 0)
                },
            );
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
            let has_send = send.is_some();
            let (send, recv) = (send.map(plain::bytes), plain::bytes_mut(recv));
            let len = recv.len();
            return self.start(
                scope,
                "MPI_Iallreduce",
                send,
                Some(recv),
                Some(combine),
                Some(Box::new(op)),
                |h| {
                    let (b, tmp) = iallreduce::build(&h.view, &h.settings, has_send, len);
                    (b, 0, tmp)
                },
            );
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

    /// Starts a barrier (rsmpi: `Communicator::immediate_barrier`).
    pub fn immediate_barrier(&mut self) -> Request<'static> {
        if self.is_hierarchical() {
            return self.start(StaticScope, "MPI_Ibarrier", None, None, None, None, |h| {
                (ibarrier::build(&h.view, &h.settings), 0, 0)
            });
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
        Progress(Rc::clone(&self.core))
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
        let len = buf.len();
        // SAFETY: per the contract.
        let buf = unsafe { forever_mut(buf) };
        let r = self.start(
            StaticScope,
            "MPI_Ibcast",
            None,
            Some(buf),
            None,
            None,
            |h| (ibcast::build(&h.view, &h.settings, root as u32, len), 0, 0),
        );
        Some(RawRequest(r))
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
        let has_send = send.is_some();
        let len = send.map_or_else(|| recv.as_ref().map_or(0, |r| r.len()), <[u8]>::len);
        // SAFETY: per the contract.
        let (send, recv) = unsafe { (send.map(|s| forever(s)), recv.map(|r| forever_mut(r))) };
        let r = self.start(
            StaticScope,
            "MPI_Ireduce",
            send,
            recv,
            Some(Box::new(op)),
            None,
            |h| {
                let (b, acc) = ireduce::build(&h.view, &h.settings, root as u32, has_send, len);
                (b, acc, 0)
            },
        );
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
        let has_send = send.is_some();
        let len = recv.len();
        // SAFETY: per the contract.
        let (send, recv) = unsafe { (send.map(|s| forever(s)), forever_mut(recv)) };
        let r = self.start(
            StaticScope,
            "MPI_Iallreduce",
            send,
            Some(recv),
            Some(Box::new(op)),
            None,
            |h| {
                let (b, tmp) = iallreduce::build(&h.view, &h.settings, has_send, len);
                (b, 0, tmp)
            },
        );
        Some(RawRequest(r))
    }

    /// Starts a barrier.
    pub fn raw_immediate_barrier(&mut self) -> Option<RawRequest> {
        self.is_hierarchical()
            .then(|| RawRequest(self.immediate_barrier()))
    }
}

/// An MPI element count.
fn count(n: usize) -> c_int {
    c_int::try_from(n).expect("MPI element counts are limited to i32::MAX")
}
