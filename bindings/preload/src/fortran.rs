//! The Fortran entry points: gfortran's names for `mpif.h` and `use mpi` (`mpi_bcast_`)
//! and Open MPI's for `use mpi_f08` (`mpi_bcast_f08_`).
//!
//! Open MPI's Fortran bindings, all three, call `PMPI_*` directly, so they never reach the
//! C exports. These symbols take the Fortran calls first: they translate the handles and
//! the Fortran `MPI_IN_PLACE` and `MPI_BOTTOM`, try topo-run's path, and otherwise call
//! MPI's own Fortran profiling entry (`pmpi_bcast_`, `pmpi_bcast_f08_`) with the original
//! arguments. Both names of a call take the same arguments the same way: every argument by
//! reference (an `mpi_f08` handle is a derived type holding the Fortran integer handle), a
//! buffer as its address, and the error code last, which `use mpi_f08` may leave out (a
//! null pointer). MPICH's `use mpi_f08` entries have names of their own (`_f08ts_`) and
//! call the C functions, which the library serves.

use std::ffi::{CStr, c_void};
use std::os::raw::c_int;
use std::sync::OnceLock;

use crate::abi::{self, MPI_Comm, MPI_Request, SUCCESS};
use crate::classify::Call;
use crate::{
    allgather, allgatherv, alltoall, alltoallv, calls, collective, gather, gatherv, scatter,
};

type Fint = c_int;

/// The address of a symbol in the process's global scope (0 if there is none): the first
/// definition, which for a common block such as `mpi_fortran_in_place_` may be the
/// program's own copy (a copy relocation) rather than libmpi's. This library defines none
/// of the names it looks up.
fn symbol(name: &str) -> usize {
    let Ok(name) = CStr::from_bytes_with_nul(name.as_bytes()) else {
        return 0;
    };
    // SAFETY: dlsym with a NUL-terminated name.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) as usize }
}

/// [`symbol`], looked up once per name.
fn lookup(cell: &'static OnceLock<usize>, name: &str) -> usize {
    *cell.get_or_init(|| symbol(name))
}

/// Fortran's `MPI_IN_PLACE` (a common block in libmpi, shared by the three bindings), as a
/// buffer address.
fn fortran_in_place() -> usize {
    static CELL: OnceLock<usize> = OnceLock::new();
    lookup(&CELL, "mpi_fortran_in_place_\0")
}

/// Fortran's `MPI_BOTTOM`.
fn fortran_bottom() -> usize {
    static CELL: OnceLock<usize> = OnceLock::new();
    lookup(&CELL, "mpi_fortran_bottom_\0")
}

/// Whether this MPI's Fortran `MPI_IN_PLACE` and `MPI_BOTTOM` are known here (Open MPI's
/// `mpi_fortran_in_place_` and `mpi_fortran_bottom_`). Other MPI libraries (MPICH) mark
/// them otherwise, so a call with buffers goes to their own Fortran entry, which
/// translates them and calls the C function, which this library serves.
fn sentinels_known() -> bool {
    fortran_in_place() != 0 && fortran_bottom() != 0
}

/// Whether MPI's `mpif.h` and `use mpi` entries call the C functions, which this library
/// serves (MPICH's), rather than `PMPI_*` (Open MPI's, told apart by its sentinels): the
/// library's entries of those two bindings then pass the call on at once, so that it is
/// served, and counted, once.
fn mpifh_calls_c() -> bool {
    !sentinels_known()
}

/// Runs a Fortran entry with buffer arguments: `ours` as [`collective::entry_rc`] does, where
/// the buffers can be read here; `-1` (MPI's own entry) otherwise.
fn buffers_entry(cc: MPI_Comm, ours: impl FnOnce() -> Option<c_int>) -> c_int {
    if !sentinels_known() {
        return -1;
    }
    collective::entry_rc(cc, ours, || -1)
}

/// A Fortran buffer argument as the C API sees it.
fn buffer(p: *const c_void) -> *const c_void {
    match p as usize {
        a if a != 0 && a == fortran_in_place() => abi::in_place(),
        a if a != 0 && a == fortran_bottom() => abi::bottom(),
        _ => p,
    }
}

/// The C communicator of a Fortran handle argument.
fn comm(c: *const Fint) -> MPI_Comm {
    // SAFETY: every argument is passed by reference.
    abi::comm_f2c(unsafe { *c })
}

/// Reads an integer argument.
fn int(p: *const Fint) -> c_int {
    // SAFETY: every argument is passed by reference.
    unsafe { *p }
}

/// Calls MPI's own Fortran entry: the first of the `names` (NUL-terminated) this process
/// has (Open MPI's `pmpi_*_f08_`, MPICH's `pmpir_*_f08_`), looked up once, with the given
/// arguments.
macro_rules! next {
    ([$($name:expr),+], fn($($t:ty),* $(,)?), $($arg:expr),* $(,)?) => {{
        static CELL: OnceLock<usize> = OnceLock::new();
        let names: &[&str] = &[$($name),+];
        let f = *CELL.get_or_init(|| names.iter().map(|n| symbol(n)).find(|&f| f != 0).unwrap_or(0));
        if f == 0 {
            eprintln!(
                "topo-run: error: {} not found; the program calls MPI from Fortran but MPI's \
                 Fortran library is not loaded",
                names[0].trim_end_matches('\0')
            );
            std::process::abort();
        }
        // SAFETY: `f` is the MPI library's Fortran entry of that name, whose C signature is
        // this one (all arguments by reference).
        let f: unsafe extern "C" fn($($t),*) = unsafe { std::mem::transmute(f) };
        // SAFETY: the application's own arguments, passed on.
        unsafe { f($($arg),*) }
    }};
}

/// Exports one Fortran call under its two names (`mpif.h`/`use mpi`, then `use mpi_f08`),
/// each passing the call on to MPI's entry of the same binding (named after `$call`:
/// `pmpi_bcast_`, `pmpi_bcast_f08_` or MPICH's `pmpir_bcast_f08_`). The first does
/// nothing of its own where [`mpifh_calls_c`].
/// The body says what the library does around MPI's entry:
/// - `first { .. }` runs before it and is `true` when the call is done (MPI's entry is
///   then not called); `profile(Call, comm, bytes) first { .. }` also profiles the call
///   (`crate::profile::span`) from start to end, MPI's entry included;
/// - `before { .. }` runs before it (MPI's entry is always called);
/// - `after { .. }` runs after it.
macro_rules! fortran {
    (
        $(#[$doc:meta])*
        $f77:ident, $f08:ident => $call:literal,
        ($($a:ident: $t:ty),* $(,)?)
        profile($pc:ident, $comm:ident, $bytes:expr)
        first $body:block
    ) => {
        fortran!(
            @profiled $(#[$doc])* $f77, mpifh_calls_c(), [concat!("pmpi_", $call, "_\0")],
            ($($a: $t),*) ($pc, $comm, $bytes) $body
        );
        fortran!(
            @profiled $(#[$doc])* $f08, false,
            [concat!("pmpi_", $call, "_f08_\0"), concat!("pmpir_", $call, "_f08_\0")],
            ($($a: $t),*) ($pc, $comm, $bytes) $body
        );
    };
    (
        $(#[$doc:meta])*
        $f77:ident, $f08:ident => $call:literal,
        ($($a:ident: $t:ty),* $(,)?)
        $when:ident $body:block
    ) => {
        fortran!(
            @one $(#[$doc])* $f77, mpifh_calls_c(), [concat!("pmpi_", $call, "_\0")],
            ($($a: $t),*) $when $body
        );
        fortran!(
            @one $(#[$doc])* $f08, false,
            [concat!("pmpi_", $call, "_f08_\0"), concat!("pmpir_", $call, "_f08_\0")],
            ($($a: $t),*) $when $body
        );
    };
    (
        @profiled $(#[$doc:meta])* $f:ident, $via_c:expr, [$($n:expr),+], ($($a:ident: $t:ty),*)
        ($pc:ident, $comm:ident, $bytes:expr) $body:block
    ) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As the Fortran call: every argument by reference.
        #[unsafe(no_mangle)]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn $f($($a: $t),*) {
            // Where the C entry serves the call, its span is the call's.
            let _profile = if $via_c {
                None
            } else {
                crate::profile::span(Call::$pc, comm($comm), || $bytes)
            };
            if !$via_c && $body {
                return;
            }
            next!([$($n),+], fn($($t),*), $($a),*)
        }
    };
    (@one $(#[$doc:meta])* $f:ident, $via_c:expr, [$($n:expr),+], ($($a:ident: $t:ty),*) first $body:block) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As the Fortran call: every argument by reference.
        #[unsafe(no_mangle)]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn $f($($a: $t),*) {
            if !$via_c && $body {
                return;
            }
            next!([$($n),+], fn($($t),*), $($a),*)
        }
    };
    (@one $(#[$doc:meta])* $f:ident, $via_c:expr, [$($n:expr),+], ($($a:ident: $t:ty),*) before $body:block) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As the Fortran call: every argument by reference.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $f($($a: $t),*) {
            if !$via_c $body
            next!([$($n),+], fn($($t),*), $($a),*)
        }
    };
    (@one $(#[$doc:meta])* $f:ident, $via_c:expr, [$($n:expr),+], ($($a:ident: $t:ty),*) after $body:block) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As the Fortran call: every argument by reference.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $f($($a: $t),*) {
            next!([$($n),+], fn($($t),*), $($a),*);
            if !$via_c $body
        }
    };
}

/// Ends a call that took topo-run's path (`rc` not -1): sets `*ierr` (if the caller passed
/// one) to its code, success or the internal error of a panic, which is returned as is and
/// never retried through MPI (the peers may be inside topo-run's collective by then).
/// Returns whether the call is done.
fn done(ierr: *mut Fint, rc: c_int) -> bool {
    if rc == -1 {
        return false;
    }
    if !ierr.is_null() {
        // SAFETY: the error argument, by reference.
        unsafe { *ierr = rc as Fint };
    }
    true
}

/// Runs a nonblocking collective's start on topo-run's path (`ours` writes the C request
/// and says whether it took the path) and hands the caller the request's Fortran handle:
/// `Some(MPI_SUCCESS)`, or `None` if the call goes to MPI.
fn started(request: *mut Fint, ours: impl FnOnce(*mut MPI_Request) -> bool) -> Option<c_int> {
    let mut r = abi::request_null();
    ours(&mut r).then(|| {
        // SAFETY: the request argument, by reference.
        unsafe { *request = abi::request_c2f(r) };
        SUCCESS
    })
}

/// After MPI made communicator `*newcomm` from `c` (the Fortran handles) with error code
/// `*ierr`: a context for it if it is congruent to world, as the C calls do.
fn adopt(c: *const Fint, newcomm: *const Fint, ierr: *const Fint) {
    // SAFETY: the error argument, by reference (absent in `use mpi_f08`); MPI wrote it.
    let ok = ierr.is_null() || unsafe { *ierr } == SUCCESS;
    if ok && !newcomm.is_null() {
        crate::exports::adopt_created(comm(c), comm(newcomm));
    }
}

type Buf = *const c_void;
type BufMut = *mut c_void;
type I = *const Fint;
type E = *mut Fint;

/// The profile's bytes of `count` elements of `dt` (Fortran handles).
fn fbytes(count: I, dt: I) -> u64 {
    abi::bytes_of(int(count), abi::type_f2c(int(dt)))
}

/// A Fortran buffer argument for the profile's byte counts (`crate::exports::block` and
/// the others): `MPI_IN_PLACE` translated where this MPI's sentinels are known.
fn profiled_buffer(p: Buf) -> Buf {
    if sentinels_known() { buffer(p) } else { p }
}

/// [`crate::exports::block`] of a Fortran call's arguments.
fn fblock(buf: Buf, count: I, dt: I, other_count: I, other_type: I) -> u64 {
    crate::exports::block(
        profiled_buffer(buf),
        int(count),
        abi::type_f2c(int(dt)),
        int(other_count),
        abi::type_f2c(int(other_type)),
    )
}

/// [`crate::exports::own_block`] of a Fortran call's arguments.
fn fown_block(counts: I, c: I, dt: I) -> u64 {
    // SAFETY: a count array holds an entry per rank of the communicator.
    unsafe { crate::exports::own_block(counts, comm(c), abi::type_f2c(int(dt))) }
}

/// [`crate::exports::block_v`] of a Fortran call's arguments.
fn fblock_v(buf: Buf, count: I, dt: I, counts: I, counts_type: I, c: I) -> u64 {
    let (dt, counts_type) = (abi::type_f2c(int(dt)), abi::type_f2c(int(counts_type)));
    // SAFETY: a count array holds an entry per rank of the communicator.
    unsafe {
        crate::exports::block_v(
            profiled_buffer(buf),
            int(count),
            dt,
            counts,
            counts_type,
            comm(c),
        )
    }
}

/// [`crate::exports::mean_block_v`] of a Fortran Alltoallv's arguments.
fn fmean_block_v(send: Buf, scounts: I, stype: I, rcounts: I, rtype: I, c: I) -> u64 {
    let (stype, rtype) = (abi::type_f2c(int(stype)), abi::type_f2c(int(rtype)));
    // SAFETY: a count array holds an entry per peer of the communicator.
    unsafe {
        crate::exports::mean_block_v(
            profiled_buffer(send),
            scounts,
            stype,
            rcounts,
            rtype,
            comm(c),
        )
    }
}

fortran! {
    /// `MPI_BCAST(BUFFER, COUNT, DATATYPE, ROOT, COMM, IERROR)`.
    mpi_bcast_, mpi_bcast_f08_ => "bcast",
    (buf: BufMut, count: I, dt: I, root: I, c: I, ierr: E)
    profile(Bcast, c, fbytes(count, dt))
    first {
        let cc = comm(c);
        done(ierr, buffers_entry(cc, || {
            // SAFETY: the translated arguments of this call.
            unsafe {
                calls::bcast(buffer(buf).cast_mut(), int(count), abi::type_f2c(int(dt)), int(root), cc)
            }
        }))
    }
}

fortran! {
    /// `MPI_REDUCE(SENDBUF, RECVBUF, COUNT, DATATYPE, OP, ROOT, COMM, IERROR)`.
    mpi_reduce_, mpi_reduce_f08_ => "reduce",
    (send: Buf, recv: BufMut, count: I, dt: I, op: I, root: I, c: I, ierr: E)
    profile(Reduce, c, fbytes(count, dt))
    first {
        let cc = comm(c);
        done(ierr, buffers_entry(cc, || {
            let (dt, op) = (abi::type_f2c(int(dt)), abi::op_f2c(int(op)));
            // SAFETY: the translated arguments of this call.
            unsafe {
                calls::reduce(buffer(send), buffer(recv).cast_mut(), int(count), dt, op, int(root), cc)
            }
            .then_some(SUCCESS)
        }))
    }
}

fortran! {
    /// `MPI_ALLREDUCE(SENDBUF, RECVBUF, COUNT, DATATYPE, OP, COMM, IERROR)`.
    mpi_allreduce_, mpi_allreduce_f08_ => "allreduce",
    (send: Buf, recv: BufMut, count: I, dt: I, op: I, c: I, ierr: E)
    profile(Allreduce, c, fbytes(count, dt))
    first {
        let cc = comm(c);
        done(ierr, buffers_entry(cc, || {
            let (dt, op) = (abi::type_f2c(int(dt)), abi::op_f2c(int(op)));
            // SAFETY: the translated arguments of this call.
            unsafe { calls::allreduce(buffer(send), buffer(recv).cast_mut(), int(count), dt, op, cc) }
                .then_some(SUCCESS)
        }))
    }
}

/// The Fortran `MPI_SCAN` (`exclusive` false) or `MPI_EXSCAN` (true), its arguments by
/// reference: whether it is done.
#[allow(clippy::too_many_arguments)]
fn scan(send: Buf, recv: BufMut, count: I, dt: I, op: I, c: I, ierr: E, exclusive: bool) -> bool {
    let cc = comm(c);
    done(
        ierr,
        buffers_entry(cc, || {
            let (dt, op) = (abi::type_f2c(int(dt)), abi::op_f2c(int(op)));
            // SAFETY: the translated arguments of this call.
            unsafe {
                calls::scan(
                    buffer(send),
                    buffer(recv).cast_mut(),
                    int(count),
                    dt,
                    op,
                    cc,
                    exclusive,
                )
            }
            .then_some(SUCCESS)
        }),
    )
}

fortran! {
    /// `MPI_SCAN(SENDBUF, RECVBUF, COUNT, DATATYPE, OP, COMM, IERROR)`.
    mpi_scan_, mpi_scan_f08_ => "scan",
    (send: Buf, recv: BufMut, count: I, dt: I, op: I, c: I, ierr: E)
    profile(Scan, c, fbytes(count, dt))
    first { scan(send, recv, count, dt, op, c, ierr, false) }
}

fortran! {
    /// `MPI_EXSCAN(SENDBUF, RECVBUF, COUNT, DATATYPE, OP, COMM, IERROR)`.
    mpi_exscan_, mpi_exscan_f08_ => "exscan",
    (send: Buf, recv: BufMut, count: I, dt: I, op: I, c: I, ierr: E)
    profile(Exscan, c, fbytes(count, dt))
    first { scan(send, recv, count, dt, op, c, ierr, true) }
}

fortran! {
    /// `MPI_REDUCE_SCATTER_BLOCK(SENDBUF, RECVBUF, RECVCOUNT, DATATYPE, OP, COMM, IERROR)`.
    mpi_reduce_scatter_block_, mpi_reduce_scatter_block_f08_ => "reduce_scatter_block",
    (send: Buf, recv: BufMut, count: I, dt: I, op: I, c: I, ierr: E)
    profile(ReduceScatterBlock, c, fbytes(count, dt))
    first {
        let cc = comm(c);
        done(ierr, buffers_entry(cc, || {
            let (dt, op) = (abi::type_f2c(int(dt)), abi::op_f2c(int(op)));
            // SAFETY: the translated arguments of this call.
            unsafe {
                calls::reduce_scatter_block(buffer(send), buffer(recv).cast_mut(), int(count), dt, op, cc)
            }
            .then_some(SUCCESS)
        }))
    }
}

fortran! {
    /// `MPI_REDUCE_SCATTER(SENDBUF, RECVBUF, RECVCOUNTS, DATATYPE, OP, COMM, IERROR)`: the
    /// counts are an array of default integers, as C's `int`s.
    mpi_reduce_scatter_, mpi_reduce_scatter_f08_ => "reduce_scatter",
    (send: Buf, recv: BufMut, counts: I, dt: I, op: I, c: I, ierr: E)
    profile(ReduceScatter, c, fown_block(counts, c, dt))
    first {
        let cc = comm(c);
        done(ierr, buffers_entry(cc, || {
            let (dt, op) = (abi::type_f2c(int(dt)), abi::op_f2c(int(op)));
            // SAFETY: the translated arguments of this call.
            unsafe {
                calls::reduce_scatter(buffer(send), buffer(recv).cast_mut(), counts, dt, op, cc)
            }
            .then_some(SUCCESS)
        }))
    }
}

/// The Fortran `MPI_ISCAN` (`exclusive` false) or `MPI_IEXSCAN` (true), its arguments by
/// reference: whether it is done.
#[allow(clippy::too_many_arguments)]
fn iscan(
    send: Buf,
    recv: BufMut,
    count: I,
    dt: I,
    op: I,
    c: I,
    req: E,
    ierr: E,
    exclusive: bool,
) -> bool {
    let cc = comm(c);
    done(
        ierr,
        buffers_entry(cc, || {
            started(req, |r| {
                let (dt, op) = (abi::type_f2c(int(dt)), abi::op_f2c(int(op)));
                // SAFETY: as in `mpi_ibcast_`.
                unsafe {
                    calls::iscan(
                        buffer(send),
                        buffer(recv).cast_mut(),
                        int(count),
                        dt,
                        op,
                        cc,
                        r,
                        exclusive,
                    )
                }
            })
        }),
    )
}

fortran! {
    /// `MPI_ISCAN(SENDBUF, RECVBUF, COUNT, DATATYPE, OP, COMM, REQUEST, IERROR)`.
    mpi_iscan_, mpi_iscan_f08_ => "iscan",
    (send: Buf, recv: BufMut, count: I, dt: I, op: I, c: I, req: E, ierr: E)
    profile(Iscan, c, fbytes(count, dt))
    first { iscan(send, recv, count, dt, op, c, req, ierr, false) }
}

fortran! {
    /// `MPI_IEXSCAN(SENDBUF, RECVBUF, COUNT, DATATYPE, OP, COMM, REQUEST, IERROR)`.
    mpi_iexscan_, mpi_iexscan_f08_ => "iexscan",
    (send: Buf, recv: BufMut, count: I, dt: I, op: I, c: I, req: E, ierr: E)
    profile(Iexscan, c, fbytes(count, dt))
    first { iscan(send, recv, count, dt, op, c, req, ierr, true) }
}

fortran! {
    /// `MPI_ALLGATHER(SENDBUF, SENDCOUNT, SENDTYPE, RECVBUF, RECVCOUNT, RECVTYPE, COMM,
    /// IERROR)`.
    mpi_allgather_, mpi_allgather_f08_ => "allgather",
    (send: Buf, scount: I, stype: I, recv: BufMut, rcount: I, rtype: I, c: I, ierr: E)
    profile(Allgather, c, fblock(send, scount, stype, rcount, rtype))
    first {
        let cc = comm(c);
        done(ierr, buffers_entry(cc, || {
            let (stype, rtype) = (abi::type_f2c(int(stype)), abi::type_f2c(int(rtype)));
            // SAFETY: the translated arguments of this call.
            unsafe {
                allgather::allgather(
                    buffer(send), int(scount), stype, buffer(recv).cast_mut(), int(rcount), rtype, cc,
                )
            }
        }))
    }
}

fortran! {
    /// `MPI_ALLTOALL(SENDBUF, SENDCOUNT, SENDTYPE, RECVBUF, RECVCOUNT, RECVTYPE, COMM,
    /// IERROR)`.
    mpi_alltoall_, mpi_alltoall_f08_ => "alltoall",
    (send: Buf, scount: I, stype: I, recv: BufMut, rcount: I, rtype: I, c: I, ierr: E)
    profile(Alltoall, c, fblock(send, scount, stype, rcount, rtype))
    first {
        let cc = comm(c);
        done(ierr, buffers_entry(cc, || {
            let (stype, rtype) = (abi::type_f2c(int(stype)), abi::type_f2c(int(rtype)));
            // SAFETY: the translated arguments of this call.
            unsafe {
                alltoall::alltoall(
                    buffer(send), int(scount), stype, buffer(recv).cast_mut(), int(rcount), rtype, cc,
                )
            }
        }))
    }
}

fortran! {
    /// `MPI_ALLGATHERV(SENDBUF, SENDCOUNT, SENDTYPE, RECVBUF, RECVCOUNTS, DISPLS, RECVTYPE,
    /// COMM, IERROR)`: the counts and displacements are arrays of default integers, as C's
    /// `int`s.
    mpi_allgatherv_, mpi_allgatherv_f08_ => "allgatherv",
    (send: Buf, scount: I, stype: I, recv: BufMut, rcounts: I, displs: I, rtype: I, c: I,
     ierr: E)
    profile(Allgatherv, c, fblock_v(send, scount, stype, rcounts, rtype, c))
    first {
        let cc = comm(c);
        done(ierr, buffers_entry(cc, || {
            let (stype, rtype) = (abi::type_f2c(int(stype)), abi::type_f2c(int(rtype)));
            // SAFETY: the translated arguments of this call.
            unsafe {
                allgatherv::allgatherv(
                    buffer(send), int(scount), stype, buffer(recv).cast_mut(), rcounts, displs,
                    rtype, cc,
                )
            }
        }))
    }
}

fortran! {
    /// `MPI_ALLTOALLV(SENDBUF, SENDCOUNTS, SDISPLS, SENDTYPE, RECVBUF, RECVCOUNTS, RDISPLS,
    /// RECVTYPE, COMM, IERROR)`: the counts and displacements are arrays of default
    /// integers, as C's `int`s.
    mpi_alltoallv_, mpi_alltoallv_f08_ => "alltoallv",
    (send: Buf, scounts: I, sdispls: I, stype: I, recv: BufMut, rcounts: I, rdispls: I, rtype: I,
     c: I, ierr: E)
    profile(Alltoallv, c, fmean_block_v(send, scounts, stype, rcounts, rtype, c))
    first {
        let cc = comm(c);
        done(ierr, buffers_entry(cc, || {
            let (stype, rtype) = (abi::type_f2c(int(stype)), abi::type_f2c(int(rtype)));
            // SAFETY: the translated arguments of this call.
            unsafe {
                alltoallv::alltoallv(
                    buffer(send), scounts, sdispls, stype, buffer(recv).cast_mut(), rcounts,
                    rdispls, rtype, cc,
                )
            }
        }))
    }
}

fortran! {
    /// `MPI_GATHER(SENDBUF, SENDCOUNT, SENDTYPE, RECVBUF, RECVCOUNT, RECVTYPE, ROOT, COMM,
    /// IERROR)`.
    mpi_gather_, mpi_gather_f08_ => "gather",
    (send: Buf, scount: I, stype: I, recv: BufMut, rcount: I, rtype: I, root: I, c: I, ierr: E)
    profile(Gather, c, fblock(send, scount, stype, rcount, rtype))
    first {
        let cc = comm(c);
        done(ierr, buffers_entry(cc, || {
            let (stype, rtype) = (abi::type_f2c(int(stype)), abi::type_f2c(int(rtype)));
            // SAFETY: the translated arguments of this call.
            unsafe {
                gather::gather(
                    buffer(send), int(scount), stype, buffer(recv).cast_mut(), int(rcount), rtype,
                    int(root), cc,
                )
            }
        }))
    }
}

fortran! {
    /// `MPI_GATHERV(SENDBUF, SENDCOUNT, SENDTYPE, RECVBUF, RECVCOUNTS, DISPLS, RECVTYPE, ROOT,
    /// COMM, IERROR)`: the counts and displacements are arrays of default integers, as C's
    /// `int`s.
    mpi_gatherv_, mpi_gatherv_f08_ => "gatherv",
    (send: Buf, scount: I, stype: I, recv: BufMut, rcounts: I, displs: I, rtype: I, root: I,
     c: I, ierr: E)
    profile(Gatherv, c, fblock_v(send, scount, stype, rcounts, rtype, c))
    first {
        let cc = comm(c);
        done(ierr, buffers_entry(cc, || {
            let (stype, rtype) = (abi::type_f2c(int(stype)), abi::type_f2c(int(rtype)));
            // SAFETY: the translated arguments of this call.
            unsafe {
                gatherv::gatherv(
                    buffer(send), int(scount), stype, buffer(recv).cast_mut(), rcounts, displs,
                    rtype, int(root), cc,
                )
            }
        }))
    }
}

fortran! {
    /// `MPI_SCATTERV(SENDBUF, SENDCOUNTS, DISPLS, SENDTYPE, RECVBUF, RECVCOUNT, RECVTYPE,
    /// ROOT, COMM, IERROR)`.
    mpi_scatterv_, mpi_scatterv_f08_ => "scatterv",
    (send: Buf, scounts: I, displs: I, stype: I, recv: BufMut, rcount: I, rtype: I, root: I,
     c: I, ierr: E)
    profile(Scatterv, c, fblock_v(recv, rcount, rtype, scounts, stype, c))
    first {
        let cc = comm(c);
        done(ierr, buffers_entry(cc, || {
            let (stype, rtype) = (abi::type_f2c(int(stype)), abi::type_f2c(int(rtype)));
            // SAFETY: the translated arguments of this call.
            unsafe {
                gatherv::scatterv(
                    buffer(send), scounts, displs, stype, buffer(recv).cast_mut(), int(rcount),
                    rtype, int(root), cc,
                )
            }
        }))
    }
}

fortran! {
    /// `MPI_SCATTER(SENDBUF, SENDCOUNT, SENDTYPE, RECVBUF, RECVCOUNT, RECVTYPE, ROOT, COMM,
    /// IERROR)`.
    mpi_scatter_, mpi_scatter_f08_ => "scatter",
    (send: Buf, scount: I, stype: I, recv: BufMut, rcount: I, rtype: I, root: I, c: I, ierr: E)
    profile(Scatter, c, fblock(recv, rcount, rtype, scount, stype))
    first {
        let cc = comm(c);
        done(ierr, buffers_entry(cc, || {
            let (stype, rtype) = (abi::type_f2c(int(stype)), abi::type_f2c(int(rtype)));
            // SAFETY: the translated arguments of this call.
            unsafe {
                scatter::scatter(
                    buffer(send), int(scount), stype, buffer(recv).cast_mut(), int(rcount), rtype,
                    int(root), cc,
                )
            }
        }))
    }
}

fortran! {
    /// `MPI_BARRIER(COMM, IERROR)`.
    mpi_barrier_, mpi_barrier_f08_ => "barrier",
    (c: I, ierr: E)
    profile(Barrier, c, 0)
    first {
        let cc = comm(c);
        done(ierr, collective::entry_rc(cc, || calls::barrier(cc).then_some(SUCCESS), || -1))
    }
}

fortran! {
    /// `MPI_IBCAST(BUFFER, COUNT, DATATYPE, ROOT, COMM, REQUEST, IERROR)`.
    mpi_ibcast_, mpi_ibcast_f08_ => "ibcast",
    (buf: BufMut, count: I, dt: I, root: I, c: I, req: E, ierr: E)
    profile(Ibcast, c, fbytes(count, dt))
    first {
        let cc = comm(c);
        done(ierr, buffers_entry(cc, || started(req, |r| {
            // SAFETY: the translated arguments of this call; MPI lets the collective use
            // the buffer until the request completes.
            unsafe {
                calls::ibcast(buffer(buf).cast_mut(), int(count), abi::type_f2c(int(dt)), int(root), cc, r)
            }
        })))
    }
}

fortran! {
    /// `MPI_IREDUCE(SENDBUF, RECVBUF, COUNT, DATATYPE, OP, ROOT, COMM, REQUEST, IERROR)`.
    mpi_ireduce_, mpi_ireduce_f08_ => "ireduce",
    (send: Buf, recv: BufMut, count: I, dt: I, op: I, root: I, c: I, req: E, ierr: E)
    profile(Ireduce, c, fbytes(count, dt))
    first {
        let cc = comm(c);
        done(ierr, buffers_entry(cc, || started(req, |r| {
            let (dt, op) = (abi::type_f2c(int(dt)), abi::op_f2c(int(op)));
            // SAFETY: as in `mpi_ibcast_`.
            unsafe {
                calls::ireduce(buffer(send), buffer(recv).cast_mut(), int(count), dt, op, int(root), cc, r)
            }
        })))
    }
}

fortran! {
    /// `MPI_IALLREDUCE(SENDBUF, RECVBUF, COUNT, DATATYPE, OP, COMM, REQUEST, IERROR)`.
    mpi_iallreduce_, mpi_iallreduce_f08_ => "iallreduce",
    (send: Buf, recv: BufMut, count: I, dt: I, op: I, c: I, req: E, ierr: E)
    profile(Iallreduce, c, fbytes(count, dt))
    first {
        let cc = comm(c);
        done(ierr, buffers_entry(cc, || started(req, |r| {
            let (dt, op) = (abi::type_f2c(int(dt)), abi::op_f2c(int(op)));
            // SAFETY: as in `mpi_ibcast_`.
            unsafe {
                calls::iallreduce(buffer(send), buffer(recv).cast_mut(), int(count), dt, op, cc, r)
            }
        })))
    }
}

fortran! {
    /// `MPI_IREDUCE_SCATTER_BLOCK(SENDBUF, RECVBUF, RECVCOUNT, DATATYPE, OP, COMM, REQUEST,
    /// IERROR)`.
    mpi_ireduce_scatter_block_, mpi_ireduce_scatter_block_f08_ => "ireduce_scatter_block",
    (send: Buf, recv: BufMut, count: I, dt: I, op: I, c: I, req: E, ierr: E)
    profile(IreduceScatterBlock, c, fbytes(count, dt))
    first {
        let cc = comm(c);
        done(ierr, buffers_entry(cc, || started(req, |r| {
            let (dt, op) = (abi::type_f2c(int(dt)), abi::op_f2c(int(op)));
            // SAFETY: as in `mpi_ibcast_`.
            unsafe {
                calls::ireduce_scatter_block(buffer(send), buffer(recv).cast_mut(), int(count), dt, op, cc, r)
            }
        })))
    }
}

fortran! {
    /// `MPI_IREDUCE_SCATTER(SENDBUF, RECVBUF, RECVCOUNTS, DATATYPE, OP, COMM, REQUEST,
    /// IERROR)`: the counts as `MPI_REDUCE_SCATTER`'s.
    mpi_ireduce_scatter_, mpi_ireduce_scatter_f08_ => "ireduce_scatter",
    (send: Buf, recv: BufMut, counts: I, dt: I, op: I, c: I, req: E, ierr: E)
    profile(IreduceScatter, c, fown_block(counts, c, dt))
    first {
        let cc = comm(c);
        done(ierr, buffers_entry(cc, || started(req, |r| {
            let (dt, op) = (abi::type_f2c(int(dt)), abi::op_f2c(int(op)));
            // SAFETY: as in `mpi_ibcast_`.
            unsafe {
                calls::ireduce_scatter(buffer(send), buffer(recv).cast_mut(), counts, dt, op, cc, r)
            }
        })))
    }
}

fortran! {
    /// `MPI_IALLGATHER(SENDBUF, SENDCOUNT, SENDTYPE, RECVBUF, RECVCOUNT, RECVTYPE, COMM,
    /// REQUEST, IERROR)`.
    mpi_iallgather_, mpi_iallgather_f08_ => "iallgather",
    (send: Buf, scount: I, stype: I, recv: BufMut, rcount: I, rtype: I, c: I, req: E, ierr: E)
    profile(Iallgather, c, fblock(send, scount, stype, rcount, rtype))
    first {
        let cc = comm(c);
        done(ierr, buffers_entry(cc, || started(req, |r| {
            let (stype, rtype) = (abi::type_f2c(int(stype)), abi::type_f2c(int(rtype)));
            // SAFETY: as in `mpi_ibcast_`.
            unsafe {
                allgather::iallgather(
                    buffer(send), int(scount), stype, buffer(recv).cast_mut(), int(rcount), rtype, cc, r,
                )
            }
        })))
    }
}

fortran! {
    /// `MPI_IGATHER(SENDBUF, SENDCOUNT, SENDTYPE, RECVBUF, RECVCOUNT, RECVTYPE, ROOT, COMM,
    /// REQUEST, IERROR)`.
    mpi_igather_, mpi_igather_f08_ => "igather",
    (send: Buf, scount: I, stype: I, recv: BufMut, rcount: I, rtype: I, root: I, c: I, req: E,
     ierr: E)
    profile(Igather, c, fblock(send, scount, stype, rcount, rtype))
    first {
        let cc = comm(c);
        done(ierr, buffers_entry(cc, || started(req, |r| {
            let (stype, rtype) = (abi::type_f2c(int(stype)), abi::type_f2c(int(rtype)));
            // SAFETY: as in `mpi_ibcast_`.
            unsafe {
                gather::igather(
                    buffer(send), int(scount), stype, buffer(recv).cast_mut(), int(rcount), rtype,
                    int(root), cc, r,
                )
            }
        })))
    }
}

fortran! {
    /// `MPI_ISCATTER(SENDBUF, SENDCOUNT, SENDTYPE, RECVBUF, RECVCOUNT, RECVTYPE, ROOT, COMM,
    /// REQUEST, IERROR)`.
    mpi_iscatter_, mpi_iscatter_f08_ => "iscatter",
    (send: Buf, scount: I, stype: I, recv: BufMut, rcount: I, rtype: I, root: I, c: I, req: E,
     ierr: E)
    profile(Iscatter, c, fblock(recv, rcount, rtype, scount, stype))
    first {
        let cc = comm(c);
        done(ierr, buffers_entry(cc, || started(req, |r| {
            let (stype, rtype) = (abi::type_f2c(int(stype)), abi::type_f2c(int(rtype)));
            // SAFETY: as in `mpi_ibcast_`.
            unsafe {
                scatter::iscatter(
                    buffer(send), int(scount), stype, buffer(recv).cast_mut(), int(rcount), rtype,
                    int(root), cc, r,
                )
            }
        })))
    }
}

fortran! {
    /// `MPI_IGATHERV(SENDBUF, SENDCOUNT, SENDTYPE, RECVBUF, RECVCOUNTS, DISPLS, RECVTYPE, ROOT,
    /// COMM, REQUEST, IERROR)`.
    mpi_igatherv_, mpi_igatherv_f08_ => "igatherv",
    (send: Buf, scount: I, stype: I, recv: BufMut, rcounts: I, displs: I, rtype: I, root: I,
     c: I, req: E, ierr: E)
    profile(Igatherv, c, fblock_v(send, scount, stype, rcounts, rtype, c))
    first {
        let cc = comm(c);
        done(ierr, buffers_entry(cc, || started(req, |r| {
            let (stype, rtype) = (abi::type_f2c(int(stype)), abi::type_f2c(int(rtype)));
            // SAFETY: as in `mpi_ibcast_`.
            unsafe {
                gatherv::igatherv(
                    buffer(send), int(scount), stype, buffer(recv).cast_mut(), rcounts, displs,
                    rtype, int(root), cc, r,
                )
            }
        })))
    }
}

fortran! {
    /// `MPI_ISCATTERV(SENDBUF, SENDCOUNTS, DISPLS, SENDTYPE, RECVBUF, RECVCOUNT, RECVTYPE,
    /// ROOT, COMM, REQUEST, IERROR)`.
    mpi_iscatterv_, mpi_iscatterv_f08_ => "iscatterv",
    (send: Buf, scounts: I, displs: I, stype: I, recv: BufMut, rcount: I, rtype: I, root: I,
     c: I, req: E, ierr: E)
    profile(Iscatterv, c, fblock_v(recv, rcount, rtype, scounts, stype, c))
    first {
        let cc = comm(c);
        done(ierr, buffers_entry(cc, || started(req, |r| {
            let (stype, rtype) = (abi::type_f2c(int(stype)), abi::type_f2c(int(rtype)));
            // SAFETY: as in `mpi_ibcast_`.
            unsafe {
                gatherv::iscatterv(
                    buffer(send), scounts, displs, stype, buffer(recv).cast_mut(), int(rcount),
                    rtype, int(root), cc, r,
                )
            }
        })))
    }
}

fortran! {
    /// `MPI_IALLGATHERV(SENDBUF, SENDCOUNT, SENDTYPE, RECVBUF, RECVCOUNTS, DISPLS, RECVTYPE,
    /// COMM, REQUEST, IERROR)`.
    mpi_iallgatherv_, mpi_iallgatherv_f08_ => "iallgatherv",
    (send: Buf, scount: I, stype: I, recv: BufMut, rcounts: I, displs: I, rtype: I, c: I,
     req: E, ierr: E)
    profile(Iallgatherv, c, fblock_v(send, scount, stype, rcounts, rtype, c))
    first {
        let cc = comm(c);
        done(ierr, buffers_entry(cc, || started(req, |r| {
            let (stype, rtype) = (abi::type_f2c(int(stype)), abi::type_f2c(int(rtype)));
            // SAFETY: as in `mpi_ibcast_`.
            unsafe {
                allgatherv::iallgatherv(
                    buffer(send), int(scount), stype, buffer(recv).cast_mut(), rcounts, displs,
                    rtype, cc, r,
                )
            }
        })))
    }
}

fortran! {
    /// `MPI_IALLTOALL(SENDBUF, SENDCOUNT, SENDTYPE, RECVBUF, RECVCOUNT, RECVTYPE, COMM,
    /// REQUEST, IERROR)`.
    mpi_ialltoall_, mpi_ialltoall_f08_ => "ialltoall",
    (send: Buf, scount: I, stype: I, recv: BufMut, rcount: I, rtype: I, c: I, req: E, ierr: E)
    profile(Ialltoall, c, fblock(send, scount, stype, rcount, rtype))
    first {
        let cc = comm(c);
        done(ierr, buffers_entry(cc, || started(req, |r| {
            let (stype, rtype) = (abi::type_f2c(int(stype)), abi::type_f2c(int(rtype)));
            // SAFETY: as in `mpi_ibcast_`.
            unsafe {
                alltoall::ialltoall(
                    buffer(send), int(scount), stype, buffer(recv).cast_mut(), int(rcount), rtype, cc, r,
                )
            }
        })))
    }
}

fortran! {
    /// `MPI_IALLTOALLV(SENDBUF, SENDCOUNTS, SDISPLS, SENDTYPE, RECVBUF, RECVCOUNTS, RDISPLS,
    /// RECVTYPE, COMM, REQUEST, IERROR)`.
    mpi_ialltoallv_, mpi_ialltoallv_f08_ => "ialltoallv",
    (send: Buf, scounts: I, sdispls: I, stype: I, recv: BufMut, rcounts: I, rdispls: I, rtype: I,
     c: I, req: E, ierr: E)
    profile(Ialltoallv, c, fmean_block_v(send, scounts, stype, rcounts, rtype, c))
    first {
        let cc = comm(c);
        done(ierr, buffers_entry(cc, || started(req, |r| {
            let (stype, rtype) = (abi::type_f2c(int(stype)), abi::type_f2c(int(rtype)));
            // SAFETY: as in `mpi_ibcast_`.
            unsafe {
                alltoallv::ialltoallv(
                    buffer(send), scounts, sdispls, stype, buffer(recv).cast_mut(), rcounts,
                    rdispls, rtype, cc, r,
                )
            }
        })))
    }
}

fortran! {
    /// `MPI_IBARRIER(COMM, REQUEST, IERROR)`.
    mpi_ibarrier_, mpi_ibarrier_f08_ => "ibarrier",
    (c: I, req: E, ierr: E)
    profile(Ibarrier, c, 0)
    first {
        let cc = comm(c);
        done(ierr, collective::entry_rc(cc, || started(req, |r| {
            // SAFETY: `r` is a request of this call's.
            unsafe { calls::ibarrier(cc, r) }
        }), || -1))
    }
}

fortran! {
    /// `MPI_FINALIZE(IERROR)`: topo-run's teardown (and statistics), then MPI's.
    mpi_finalize_, mpi_finalize_f08_ => "finalize",
    (ierr: E)
    before {
        crate::exports::teardown();
    }
}

fortran! {
    /// `MPI_COMM_FREE(COMM, IERROR)`: drops the communicator's context, then MPI frees it,
    /// as the C `MPI_Comm_free`.
    mpi_comm_free_, mpi_comm_free_f08_ => "comm_free",
    (c: E, ierr: E)
    before {
        if !c.is_null() {
            crate::exports::forget(&comm(c));
        }
    }
}

fortran! {
    /// `MPI_COMM_DUP(COMM, NEWCOMM, IERROR)`: MPI's, then a context for the duplicate of
    /// a communicator congruent to world, as the C `MPI_Comm_dup`.
    mpi_comm_dup_, mpi_comm_dup_f08_ => "comm_dup",
    (c: I, newcomm: E, ierr: E)
    after { adopt(c, newcomm, ierr) }
}

fortran! {
    /// `MPI_COMM_DUP_WITH_INFO(COMM, INFO, NEWCOMM, IERROR)`: as `MPI_COMM_DUP`.
    mpi_comm_dup_with_info_, mpi_comm_dup_with_info_f08_
        => "comm_dup_with_info",
    (c: I, info: I, newcomm: E, ierr: E)
    after { adopt(c, newcomm, ierr) }
}

fortran! {
    /// `MPI_COMM_SPLIT(COMM, COLOR, KEY, NEWCOMM, IERROR)`: the library's own split over a
    /// communicator with a context, as the C `MPI_Comm_split`; MPI's (its C function),
    /// then the kept contexts' exchange, otherwise.
    mpi_comm_split_, mpi_comm_split_f08_ => "comm_split",
    (c: I, color: I, key: I, newcomm: E, ierr: E)
    first {
        if newcomm.is_null() {
            false
        } else {
            let (cc, mut new) = (comm(c), abi::comm_null());
            // SAFETY: the application's arguments, by reference, as C values; MPI writes
            // the new communicator to a local.
            let rc = unsafe { crate::exports::MPI_Comm_split(cc, int(color), int(key), &mut new) };
            // SAFETY: `newcomm` is the application's handle argument (checked non-null);
            // the error argument may be absent (`use mpi_f08`).
            unsafe {
                *newcomm = abi::comm_c2f(new);
                if !ierr.is_null() {
                    *ierr = rc;
                }
            }
            true
        }
    }
}

fortran! {
    /// `MPI_COMM_CREATE(COMM, GROUP, NEWCOMM, IERROR)`: as `MPI_COMM_SPLIT`.
    mpi_comm_create_, mpi_comm_create_f08_ => "comm_create",
    (c: I, group: I, newcomm: E, ierr: E)
    after { adopt(c, newcomm, ierr) }
}
