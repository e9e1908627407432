//! Bcast, Barrier and the reductions (Reduce, Allreduce, Scan, Exscan, the
//! Reduce_scatters), blocking and nonblocking: whether a call can take topo-run's path,
//! and running it.
//! Each function returns whether it did the call; if not, the caller hands it to MPI
//! unchanged. The conditions follow the MPI standard, so that whatever MPI would report as
//! an error goes to MPI, which reports it.

use std::ffi::c_void;
use std::os::raw::c_int;

use topo_runtime::{MpiCombine, RawRequest};

use crate::abi::{self, MPI_Comm, MPI_Datatype, MPI_Op, MPI_Request, SUCCESS, TypeInfo};
use crate::classify::{
    Call, HandOff, Numeric, TypeClass, overlaps, overlaps_range, signature_bytes,
};
use crate::packed::{Finish, Packed};
use crate::state::{self, Active, TypeCache};

/// The element size of `count` elements of `dt` in a call topo-run can take.
fn elements(types: &mut TypeCache<'_>, count: c_int, dt: MPI_Datatype) -> Result<usize, HandOff> {
    let size = match types.datatype(dt) {
        TypeInfo::Invalid => return Err(HandOff::Arguments),
        TypeInfo::Derived => return Err(HandOff::DerivedDatatype),
        TypeInfo::Plain {
            class: TypeClass::Pair,
            ..
        } => return Err(HandOff::PairDatatype),
        TypeInfo::Plain { size, .. } => size,
    };
    match count {
        ..0 => Err(HandOff::Arguments),
        0 => Err(HandOff::ZeroCount),
        _ => Ok(size),
    }
}

/// A buffer MPI must check: null, `MPI_BOTTOM` or `MPI_IN_PLACE`.
fn special(p: *const c_void) -> bool {
    p.is_null() || p == abi::bottom() || p == abi::in_place()
}

fn check_root(a: &Active, root: c_int) -> Result<(), HandOff> {
    if (0..a.size).contains(&root) {
        Ok(())
    } else {
        Err(HandOff::Arguments)
    }
}

/// The send buffer (`None` for `MPI_IN_PLACE`) and receive buffer of `n` bytes each of a
/// reduction at a rank that receives the result; `Err` when MPI must check them (a special
/// address, or buffers that overlap).
///
/// # Safety
/// Unless special, `send` and `recv` are valid for `n` bytes for the lifetime `'b`.
unsafe fn send_recv<'b>(
    send: *const c_void,
    recv: *mut c_void,
    n: usize,
) -> Result<(Option<&'b [u8]>, &'b mut [u8]), HandOff> {
    let in_place = send == abi::in_place();
    if special(recv) || (!in_place && (special(send) || overlaps(send as usize, recv as usize, n)))
    {
        return Err(HandOff::Arguments);
    }
    // SAFETY: per the contract, and the two ranges do not overlap (checked above).
    unsafe {
        Ok((
            (!in_place).then(|| std::slice::from_raw_parts(send.cast::<u8>(), n)),
            std::slice::from_raw_parts_mut(recv.cast::<u8>(), n),
        ))
    }
}

/// The outcome of a runtime entry point: `false` means its path is off.
fn path_taken(done: bool) -> Result<(), HandOff> {
    done.then_some(()).ok_or(HandOff::Inactive)
}

/// A broadcast's buffer on topo-run's path.
enum BcastBuf<'b> {
    /// The application's own bytes (one gap-free predefined type).
    Unpacked(&'b mut [u8]),
    /// Any other datatype, packed (see [`crate::packed`]).
    Packed(Packed),
}

/// A broadcast's buffer, if topo-run can take the call. With `keep_type`, a packed
/// receiving rank keeps its own duplicate of `dt` (nonblocking calls).
///
/// # Safety
/// The arguments are those of an `MPI_Bcast` call: `buf` holds `count` elements of `dt`,
/// valid for `'b`.
#[allow(clippy::too_many_arguments)]
unsafe fn bcast_args<'b>(
    a: &Active,
    types: &mut TypeCache<'_>,
    buf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    keep_type: bool,
) -> Result<BcastBuf<'b>, HandOff> {
    let size = match elements(types, count, dt) {
        // The same limit as the packed path's, on the same signature bytes.
        Ok(size) => signature_bytes(count, size).map(|_| size)?,
        // Derived and pair types: the decision rests on the packed size alone, the same
        // at every rank whatever datatype each passes.
        Err(HandOff::DerivedDatatype | HandOff::PairDatatype) => {
            check_root(a, root)?;
            // Every rank checks its own type, so that one not committed goes to MPI,
            // which reports it, on every rank that passes one (as MPI's own checks do).
            if buf.cast_const() == abi::in_place() || !types.committed(dt) {
                return Err(HandOff::Arguments);
            }
            // SAFETY: per the contract (MPI checks the buffer as it packs and unpacks).
            let p = unsafe { Packed::new(buf, count, dt, comm, root == a.rank, keep_type) }?;
            return Ok(BcastBuf::Packed(p));
        }
        Err(why) => return Err(why),
    };
    check_root(a, root)?;
    if special(buf) {
        return Err(HandOff::Arguments);
    }
    // SAFETY: the caller's buffer holds `count` gap-free elements of `size` bytes.
    let bytes = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), count as usize * size) };
    Ok(BcastBuf::Unpacked(bytes))
}

/// The bytes of `count` elements of `dt` and the combine of `op` on them, if topo-run can
/// take a reduction of them (Reduce's and Allreduce's alike).
///
/// The datatype's checks are [`elements`]'s, on the type's fields one by one: built from
/// a struct of them returned through memory, the result was loaded from the stores of its
/// parts at other offsets, and each such load waited for them (perf put a tenth of a
/// back-to-back 8-byte `MPI_Reduce`'s samples in this function). Inlined, so that its
/// result is not returned through memory either (its caller loaded it in wider pieces
/// than it was stored in, and waited as long).
#[inline(always)]
fn reduction_of(
    types: &mut TypeCache<'_>,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
) -> Result<(usize, MpiCombine), HandOff> {
    let (n, e) = reduction_parts(types, count, dt, op)?;
    Ok((n, combine(dt, op, e)))
}

/// An element's size and what it holds, for [`combine`].
type Elem = (usize, Option<Numeric>);

/// [`reduction_of`] with the combine still in parts: the bytes and the element. A caller
/// that builds the combine where it passes it on (by reference) keeps the
/// combine's fields from being copied as a whole out of the stores of their parts (a
/// stall on every back-to-back `MPI_Reduce`, by perf).
#[inline(always)]
fn reduction_parts(
    types: &mut TypeCache<'_>,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
) -> Result<(usize, Elem), HandOff> {
    let (size, class, numeric) = match types.datatype(dt) {
        TypeInfo::Invalid => return Err(HandOff::Arguments),
        TypeInfo::Derived => return Err(HandOff::DerivedDatatype),
        TypeInfo::Plain {
            class: TypeClass::Pair,
            ..
        } => return Err(HandOff::PairDatatype),
        TypeInfo::Plain {
            size,
            class,
            numeric,
        } => (size, class, numeric),
    };
    match count {
        ..0 => return Err(HandOff::Arguments),
        0 => return Err(HandOff::ZeroCount),
        _ => {}
    }
    let kind = abi::op_kind(op).ok_or(HandOff::Operation)?;
    if !kind.defined_on(class) {
        return Err(HandOff::OpOnDatatype);
    }
    Ok((count as usize * size, (size, numeric)))
}

/// The combine of `op` on `dt`, whose element [`reduction_parts`] found.
#[inline(always)]
fn combine(dt: MPI_Datatype, op: MPI_Op, (size, numeric): Elem) -> MpiCombine {
    // SAFETY: `reduction_parts` found `op` a predefined operation defined on the
    // predefined, gap-free `dt` of `size` bytes holding `numeric`; both handles live
    // until MPI_Finalize.
    unsafe { MpiCombine::from_raw_numeric(dt, op, size, numeric) }
}

/// A reduction's send buffer (`None` in place), receive buffer (`None` off the root) and
/// element (for [`combine`]).
type ReduceArgs<'b> = (Option<&'b [u8]>, Option<&'b mut [u8]>, Elem);

/// The arguments of a reduction to `root`, if topo-run can take the call.
///
/// # Safety
/// The arguments are those of an `MPI_Reduce` call, the buffers valid for `'b`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn reduce_args<'b>(
    a: &Active,
    types: &mut TypeCache<'_>,
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    root: c_int,
) -> Result<ReduceArgs<'b>, HandOff> {
    let (n, e) = reduction_parts(types, count, dt, op)?;
    check_root(a, root)?;
    if root != a.rank {
        // Only the root may pass MPI_IN_PLACE; the receive buffer is not used here.
        if special(send) {
            return Err(HandOff::Arguments);
        }
        // SAFETY: the send buffer holds `count` elements (`n` bytes).
        let send = unsafe { std::slice::from_raw_parts(send.cast::<u8>(), n) };
        return Ok((Some(send), None, e));
    }
    // SAFETY: both buffers hold `count` elements (`n` bytes).
    let (send, recv) = unsafe { send_recv(send, recv, n) }?;
    Ok((send, Some(recv), e))
}

/// A Reduce_scatter_block's send buffer (`None` in place), receive buffer and operation.
type BlockArgs<'b> = (Option<&'b [u8]>, &'b mut [u8], MpiCombine);

/// A scan's send buffer (`None` in place), receive buffer (`None` where not significant)
/// and operation.
type ScanArgs<'b> = (Option<&'b [u8]>, Option<&'b mut [u8]>, MpiCombine);

/// An allreduce's send buffer (`None` in place), receive buffer and element (for
/// [`combine`]).
type AllreduceArgs<'b> = (Option<&'b [u8]>, &'b mut [u8], Elem);

/// The arguments of an allreduce, if topo-run can take the call.
///
/// # Safety
/// The arguments are those of an `MPI_Allreduce` call, the buffers valid for `'b`.
#[inline(always)]
unsafe fn allreduce_args<'b>(
    types: &mut TypeCache<'_>,
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
) -> Result<AllreduceArgs<'b>, HandOff> {
    let (n, e) = reduction_parts(types, count, dt, op)?;
    // SAFETY: both buffers hold `count` elements (`n` bytes).
    let (send, recv) = unsafe { send_recv(send, recv, n) }?;
    Ok((send, recv, e))
}

/// `MPI_Bcast`.
///
/// # Safety
/// The arguments are those of an `MPI_Bcast` call: `buf` holds `count` elements of `dt`.
pub(crate) unsafe fn bcast(
    buf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> Option<c_int> {
    let mut packed = None;
    state::run(Call::Bcast, comm, |a, types| {
        // SAFETY: per the contract.
        match unsafe { bcast_args(a, types, buf, count, dt, root, comm, false) }? {
            BcastBuf::Unpacked(bytes) => path_taken(a.topo.raw_broadcast(root, bytes)),
            BcastBuf::Packed(mut p) => {
                path_taken(a.topo.raw_broadcast(root, &mut p.bytes))?;
                packed = Some(p);
                Ok(())
            }
        }
    })?;
    // Unpacked outside the library's lock.
    Some(packed.map_or(SUCCESS, Packed::finish))
}

/// `MPI_Reduce`.
///
/// # Safety
/// The arguments are those of an `MPI_Reduce` call.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn reduce(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    root: c_int,
    comm: MPI_Comm,
) -> bool {
    state::run_reduction(Call::Reduce, comm, op, |a, types| {
        // SAFETY: per the contract.
        let (send, recv, e) = unsafe { reduce_args(a, types, send, recv, count, dt, op, root) }?;
        path_taken(a.topo.raw_reduce(root, send, recv, &combine(dt, op, e)))
    })
    .is_some()
}

/// `MPI_Allreduce`.
///
/// # Safety
/// The arguments are those of an `MPI_Allreduce` call.
pub(crate) unsafe fn allreduce(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> bool {
    state::run_reduction(Call::Allreduce, comm, op, |a, types| {
        // SAFETY: per the contract.
        let (send, recv, e) = unsafe { allreduce_args(types, send, recv, count, dt, op) }?;
        path_taken(a.topo.raw_all_reduce(send, recv, &combine(dt, op, e)))
    })
    .is_some()
}

/// The arguments of a Scan or Exscan (`exclusive`), if topo-run can take the call: the
/// send buffer (`None` in place) and the receive buffer, which is `None` at Exscan's rank
/// 0 (not in place): MPI says it is not significant there, so it is neither checked nor
/// written.
///
/// # Safety
/// The arguments are those of an `MPI_Scan` or `MPI_Exscan` call, the buffers valid for
/// `'b`.
#[allow(clippy::too_many_arguments)]
unsafe fn scan_args<'b>(
    a: &Active,
    types: &mut TypeCache<'_>,
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    exclusive: bool,
) -> Result<ScanArgs<'b>, HandOff> {
    let (n, combine) = reduction_of(types, count, dt, op)?;
    if exclusive && a.rank == 0 && send != abi::in_place() {
        if special(send) {
            return Err(HandOff::Arguments);
        }
        // SAFETY: the send buffer holds `count` elements (`n` bytes).
        let send = unsafe { std::slice::from_raw_parts(send.cast::<u8>(), n) };
        return Ok((Some(send), None, combine));
    }
    // SAFETY: both buffers hold `count` elements (`n` bytes).
    let (send, recv) = unsafe { send_recv(send, recv, n) }?;
    Ok((send, Some(recv), combine))
}

/// `MPI_Scan` (`exclusive` false) or `MPI_Exscan` (true).
///
/// # Safety
/// The arguments are those of an `MPI_Scan` or `MPI_Exscan` call.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn scan(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    exclusive: bool,
) -> bool {
    let call = if exclusive { Call::Exscan } else { Call::Scan };
    state::run_reduction(call, comm, op, |a, types| {
        // SAFETY: per the contract.
        let (send, recv, op) =
            unsafe { scan_args(a, types, send, recv, count, dt, op, exclusive) }?;
        path_taken(a.topo.raw_scan(send, recv, &op, exclusive))
    })
    .is_some()
}

/// The contribution (`None` in place) and the receive buffer of a Reduce_scatter: `total`
/// bytes of contribution, `mine` bytes of result; in place the receive buffer holds the
/// contribution (`total` bytes). `Err` when MPI must check them.
///
/// # Safety
/// Unless special, `send` holds `total` bytes and `recv` `mine` (in place `total`), valid
/// for `'b`.
unsafe fn scatter_reduced<'b>(
    send: *const c_void,
    recv: *mut c_void,
    total: usize,
    mine: usize,
) -> Result<(Option<&'b [u8]>, &'b mut [u8]), HandOff> {
    if send == abi::in_place() {
        if special(recv) {
            return Err(HandOff::Arguments);
        }
        // SAFETY: in place, the receive buffer holds the contribution.
        return Ok((None, unsafe {
            std::slice::from_raw_parts_mut(recv.cast::<u8>(), total)
        }));
    }
    if special(send)
        || (mine > 0 && special(recv))
        || overlaps_range(send as usize, total, recv as usize, mine)
    {
        return Err(HandOff::Arguments);
    }
    // SAFETY: per the contract; the two ranges do not overlap (checked above). An empty
    // result may come with any address (MPI does not read it): an empty slice then.
    unsafe {
        let send = std::slice::from_raw_parts(send.cast::<u8>(), total);
        let recv: &mut [u8] = if mine == 0 {
            &mut []
        } else {
            std::slice::from_raw_parts_mut(recv.cast::<u8>(), mine)
        };
        Ok((Some(send), recv))
    }
}

/// `MPI_Reduce_scatter_block`.
///
/// # Safety
/// The arguments are those of an `MPI_Reduce_scatter_block` call.
pub(crate) unsafe fn reduce_scatter_block(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> bool {
    state::run_reduction(Call::ReduceScatterBlock, comm, op, |a, types| {
        // SAFETY: per the contract.
        let (send, recv, combine) = unsafe { block_args(a, types, send, recv, count, dt, op) }?;
        path_taken(a.topo.raw_reduce_scatter_block(send, recv, &combine))
    })
    .is_some()
}

/// The arguments of a Reduce_scatter_block, if topo-run can take the call.
///
/// # Safety
/// The arguments are those of an `MPI_Reduce_scatter_block` call, the buffers valid for
/// `'b`.
unsafe fn block_args<'b>(
    a: &Active,
    types: &mut TypeCache<'_>,
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
) -> Result<BlockArgs<'b>, HandOff> {
    let (block, combine) = reduction_of(types, count, dt, op)?;
    let total = block.checked_mul(a.size as usize).ok_or(HandOff::Large)?;
    // SAFETY: per the contract: `count` elements per rank.
    let (send, recv) = unsafe { scatter_reduced(send, recv, total, block) }?;
    Ok((send, recv, combine))
}

/// `MPI_Reduce_scatter`.
///
/// # Safety
/// The arguments are those of an `MPI_Reduce_scatter` call: `counts` holds the
/// communicator's size of counts.
pub(crate) unsafe fn reduce_scatter(
    send: *const c_void,
    recv: *mut c_void,
    counts: *const c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> bool {
    state::run_reduction(Call::ReduceScatter, comm, op, |a, types| {
        // SAFETY: per the contract.
        let (send, recv, lens, combine) =
            unsafe { counts_args(a, types, send, recv, counts, dt, op) }?;
        path_taken(a.topo.raw_reduce_scatter(send, recv, &lens, &combine))
    })
    .is_some()
}

/// The arguments of a Reduce_scatter, with the blocks' bytes, if topo-run can take the
/// call.
///
/// # Safety
/// The arguments are those of an `MPI_Reduce_scatter` call, the buffers valid for `'b`.
#[allow(clippy::type_complexity)]
unsafe fn counts_args<'b>(
    a: &Active,
    types: &mut TypeCache<'_>,
    send: *const c_void,
    recv: *mut c_void,
    counts: *const c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
) -> Result<(Option<&'b [u8]>, &'b mut [u8], Vec<usize>, MpiCombine), HandOff> {
    if counts.is_null() {
        return Err(HandOff::Arguments);
    }
    // SAFETY: per the contract.
    let counts = unsafe { std::slice::from_raw_parts(counts, a.size as usize) };
    if counts.iter().any(|&c| c < 0) {
        return Err(HandOff::Arguments);
    }
    let all: i64 = counts.iter().map(|&c| i64::from(c)).sum();
    let all = c_int::try_from(all).map_err(|_| HandOff::Large)?;
    let (total, combine) = reduction_of(types, all, dt, op)?;
    let elem = total / all as usize;
    let lens: Vec<usize> = counts.iter().map(|&c| c as usize * elem).collect();
    let mine = lens[a.rank as usize];
    // SAFETY: per the contract.
    let (send, recv) = unsafe { scatter_reduced(send, recv, total, mine) }?;
    Ok((send, recv, lens, combine))
}

/// `MPI_Barrier`.
pub(crate) fn barrier(comm: MPI_Comm) -> bool {
    state::run(Call::Barrier, comm, |a, _| path_taken(a.topo.raw_barrier())).is_some()
}

/// A started nonblocking collective (with nothing to unpack at completion), or `Inactive`
/// if its path is off.
fn request_taken(r: Option<RawRequest>) -> Result<(RawRequest, Option<Box<dyn Finish>>), HandOff> {
    r.map(|r| (r, None)).ok_or(HandOff::Inactive)
}

/// Runs a nonblocking collective on topo-run's path (`start` starts it; see
/// [`state::run_nonblocking`]) and writes the generalized request that completes with it
/// to the application's `request`. Returns whether the call was done.
///
/// # Safety
/// `request` is the application's `MPI_Request *` argument.
pub(crate) unsafe fn nonblocking(
    call: Call,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    start: impl FnOnce(
        &mut Active,
        &mut TypeCache<'_>,
    ) -> Result<(RawRequest, Option<Box<dyn Finish>>), HandOff>,
) -> bool {
    if request.is_null() {
        return false;
    }
    let Some(handle) = state::run_nonblocking(call, comm, start) else {
        return false;
    };
    // SAFETY: per the contract: MPI's caller passes a valid `MPI_Request *`.
    unsafe { *request = handle };
    true
}

/// `MPI_Ibcast`.
///
/// # Safety
/// The arguments are those of an `MPI_Ibcast` call; MPI lets the collective use `buf`
/// until the request completes.
pub(crate) unsafe fn ibcast(
    buf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> bool {
    let start = |a: &mut Active, types: &mut TypeCache<'_>| {
        // SAFETY: per the contract; the buffer is the collective's until completion.
        match unsafe { bcast_args(a, types, buf, count, dt, root, comm, true) }? {
            BcastBuf::Unpacked(bytes) => request_taken(a.topo.raw_immediate_broadcast(root, bytes)),
            BcastBuf::Packed(mut p) => {
                let (req, _) = request_taken(a.topo.raw_immediate_broadcast(root, p.lend()))?;
                Ok((req, Some(Box::new(p) as Box<dyn Finish>)))
            }
        }
    };
    // SAFETY: `request` is the caller's.
    unsafe { nonblocking(Call::Ibcast, comm, request, start) }
}

/// `MPI_Ireduce`.
///
/// # Safety
/// The arguments are those of an `MPI_Ireduce` call; MPI lets the collective use the
/// buffers until the request completes.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn ireduce(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> bool {
    let start = |a: &mut Active, types: &mut TypeCache<'_>| {
        // SAFETY: per the contract; the buffers are the collective's until completion.
        request_taken(unsafe {
            let (send, recv, e) = reduce_args(a, types, send, recv, count, dt, op, root)?;
            a.topo
                .raw_immediate_reduce(root, send, recv, combine(dt, op, e))
        })
    };
    // SAFETY: `request` is the caller's.
    unsafe { nonblocking(Call::Ireduce, comm, request, start) }
}

/// `MPI_Iallreduce`.
///
/// # Safety
/// The arguments are those of an `MPI_Iallreduce` call; MPI lets the collective use the
/// buffers until the request completes.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn iallreduce(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> bool {
    let start = |a: &mut Active, types: &mut TypeCache<'_>| {
        // SAFETY: per the contract; the buffers are the collective's until completion.
        request_taken(unsafe {
            let (send, recv, e) = allreduce_args(types, send, recv, count, dt, op)?;
            a.topo
                .raw_immediate_all_reduce(send, recv, combine(dt, op, e))
        })
    };
    // SAFETY: `request` is the caller's.
    unsafe { nonblocking(Call::Iallreduce, comm, request, start) }
}

/// `MPI_Ireduce_scatter_block`.
///
/// # Safety
/// The arguments are those of an `MPI_Ireduce_scatter_block` call; MPI lets the
/// collective use the buffers until the request completes.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn ireduce_scatter_block(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> bool {
    let start = |a: &mut Active, types: &mut TypeCache<'_>| {
        // SAFETY: per the contract; the buffers are the collective's until completion.
        request_taken(unsafe {
            let (send, recv, op) = block_args(a, types, send, recv, count, dt, op)?;
            a.topo.raw_immediate_reduce_scatter_block(send, recv, op)
        })
    };
    // SAFETY: `request` is the caller's.
    unsafe { nonblocking(Call::IreduceScatterBlock, comm, request, start) }
}

/// `MPI_Ireduce_scatter`.
///
/// # Safety
/// The arguments are those of an `MPI_Ireduce_scatter` call; MPI lets the collective use
/// the buffers until the request completes (the counts are read at the start).
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn ireduce_scatter(
    send: *const c_void,
    recv: *mut c_void,
    counts: *const c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> bool {
    let start = |a: &mut Active, types: &mut TypeCache<'_>| {
        // SAFETY: per the contract; the buffers are the collective's until completion.
        request_taken(unsafe {
            let (send, recv, lens, op) = counts_args(a, types, send, recv, counts, dt, op)?;
            a.topo.raw_immediate_reduce_scatter(send, recv, &lens, op)
        })
    };
    // SAFETY: `request` is the caller's.
    unsafe { nonblocking(Call::IreduceScatter, comm, request, start) }
}

/// `MPI_Iscan` (`exclusive` false) or `MPI_Iexscan` (true).
///
/// # Safety
/// The arguments are those of an `MPI_Iscan` or `MPI_Iexscan` call; MPI lets the
/// collective use the buffers until the request completes.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn iscan(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    exclusive: bool,
) -> bool {
    let start = |a: &mut Active, types: &mut TypeCache<'_>| {
        // SAFETY: per the contract; the buffers are the collective's until completion.
        request_taken(unsafe {
            let (send, recv, op) = scan_args(a, types, send, recv, count, dt, op, exclusive)?;
            a.topo.raw_immediate_scan(send, recv, op, exclusive)
        })
    };
    let call = if exclusive {
        Call::Iexscan
    } else {
        Call::Iscan
    };
    // SAFETY: `request` is the caller's.
    unsafe { nonblocking(call, comm, request, start) }
}

/// `MPI_Ibarrier`.
///
/// # Safety
/// `request` is the `MPI_Ibarrier` call's.
pub(crate) unsafe fn ibarrier(comm: MPI_Comm, request: *mut MPI_Request) -> bool {
    // SAFETY: `request` is the caller's.
    unsafe {
        nonblocking(Call::Ibarrier, comm, request, |a, _| {
            request_taken(a.topo.raw_immediate_barrier())
        })
    }
}
