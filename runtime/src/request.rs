//! The requests of nonblocking collectives, in rsmpi's style: the [`Request`]s that the
//! `immediate_*` methods of [`crate::Topo`] return (`topo/immediate.rs`), and the
//! [`RawRequest`]s and [`Progress`] handles of the PMPI library.
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

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::Arc;

use mpi::request::{Scope, StaticScope};

use crate::backoff::Backoff;
use crate::context::{self, Shared};

/// Something a request keeps alive until it completes (its operation).
pub(crate) trait KeepAlive {}
impl<T: ?Sized> KeepAlive for T {}

/// A nonblocking collective in flight, borrowing its buffers for `'a`.
#[must_use = "a request must be completed with wait or test"]
pub struct Request<'a, S: Scope<'a> = StaticScope> {
    core: Shared,
    id: u64,
    scope: S,
    done: bool,
    _keep: Option<Box<dyn KeepAlive + 'a>>,
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
    pub(crate) fn new(
        core: &Shared,
        id: u64,
        scope: S,
        keep: Option<Box<dyn KeepAlive + 'a>>,
    ) -> Self {
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

    /// The request's id in its context.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Lends `buf`, borrowed for `'a`, to the collective this request tracks, for good:
    /// the engine's schedules and MPI hold buffers without their lifetime.
    ///
    /// Sound because this request is registered with a scope of `'a`: the scope ends only
    /// after the request has completed (a scope with a request left aborts the process),
    /// and a request dropped before it completes poisons its context, which then aborts
    /// the job instead of running anything further. A completed collective holds nothing
    /// (the engine drops a schedule when it completes).
    pub(crate) fn lend<T: ?Sized>(&self, buf: &'a T) -> &'static T {
        // SAFETY: as above: `buf` outlives the collective's use of it.
        unsafe { &*(buf as *const T) }
    }

    /// As [`Request::lend`], for a buffer the collective writes.
    pub(crate) fn lend_mut<T: ?Sized>(&self, buf: &'a mut T) -> &'static mut T {
        // SAFETY: as in `lend`; the caller gave up its `&mut` for `'a`.
        unsafe { &mut *(buf as *mut T) }
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
/// ([`crate::Topo::from_env_instance`]): each is looked up in its own, and every context involved
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
pub struct RawRequest(pub(crate) Request<'static, StaticScope>);

impl RawRequest {
    /// Whether the collective has completed (without advancing anything; see
    /// [`Progress::poll`]). `false` while another thread holds the context (running a
    /// collective of its own under `MPI_THREAD_MULTIPLE`, or the progress thread's turn):
    /// a caller that looks from outside the context never waits for it.
    pub fn is_complete(&self) -> bool {
        context::try_lock(&self.0.core).is_some_and(|c| c.is_complete(self.0.id))
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
pub struct Progress(pub(crate) Shared, pub(crate) PhantomData<*const ()>);

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

// The schedule starters, shared by the typed and the byte-level entry points.

// Byte-level entry points, for callers that hold raw MPI buffers (the PMPI library). Each
// starts the hierarchical schedule and returns its request, or returns `None` without
// doing anything when the collectives go to MPI's own; the caller then hands the call to
// MPI. Ranks are world ranks.
