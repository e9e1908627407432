//! The collective profile (`topo-run --profile FILE`, `TOPO_RUN_PROFILE=FILE`): every
//! collective call of the program is counted, per call and communicator kind, with the
//! way it went (topo-run's path, or MPI and why), its size class and its time; at
//! `MPI_Finalize` the ranks combine their counts and rank 0 writes the JSON file
//! (`topo_profile`, docs/profile.md).
//!
//! Each exported collective opens a [`Span`] first ([`span`]): without a profile that is
//! one relaxed load of a flag. With one, the span computes the call's bytes and, for the
//! calls it times, reads the clock on both sides; the state tells it the communicator's
//! kind and the call's way when it counts the call (`note_outcome`), and the span adds
//! it all to the process's counters when it closes. Timing every call would double the
//! cost of the smallest ones (two clock reads, about 20 ns each here), so the process
//! times the first [`ALWAYS_TIMED`] calls of each call and size class, then every call of
//! a class whose calls take [`LONG_NANOS`] or more on average, and one in
//! [`SAMPLE_EVERY`] of the others; the profile extrapolates from those
//! (`topo_profile::summarize`).
//!
//! Below `MPI_THREAD_MULTIPLE` one thread at a time is in an MPI call, so the counters
//! are updated with plain loads and stores, and the open span and its outcome are
//! process-wide; at `MPI_THREAD_MULTIPLE` the counters take atomic adds and the span is
//! the thread's.
//!
//! A program's small calls come in runs: the same call on the same communicator with the
//! same bytes, back to back. Below `MPI_THREAD_MULTIPLE` the span keeps the last call it
//! counted as the open [`Run`]; a call that repeats it, and that the sampling would not
//! time, only adds one to the run's length (a few loads, compares and stores), and the
//! run is added to the counters when a different call comes or the profile is written.
//! The counts and the timed calls are exactly those of counting each call on its own.
//! A call given by a count and a predefined datatype ([`span_of`]) is known for a repeat
//! by those two, inline in the exported function, before its bytes are computed: a
//! predefined type's size never changes.

use std::cell::Cell;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use topo_profile::{CLASSES, RawIndex, Shape};

use std::os::raw::c_int;

use crate::abi::{self, MPI_Comm, MPI_Datatype};
use crate::classify::{Call, HandOff};
use crate::stats::CommKind;

const CALLS: usize = Call::ALL.len();
const KINDS: usize = CommKind::ALL.len();
const REASONS: usize = HandOff::ALL.len();
const LEN: usize = topo_profile::raw_len(CALLS, KINDS, REASONS);

/// The first this many calls of each call and size class are timed.
pub const ALWAYS_TIMED: u32 = 32;
/// Then every call of a class whose timed calls took this long on average ...
pub const LONG_NANOS: u64 = 2_000;
/// ... and one in this many of the others.
pub const SAMPLE_EVERY: u32 = 64;

/// Whether this process profiles its collectives.
static ON: AtomicBool = AtomicBool::new(false);
/// Whether threads may be in MPI calls at once (`MPI_THREAD_MULTIPLE`).
static MULTIPLE: AtomicBool = AtomicBool::new(false);
/// Whether the profile was combined and written (once, at the first finalize).
static WRITTEN: AtomicBool = AtomicBool::new(false);
/// This process's counters, laid out as `topo_profile::RawIndex` says.
static RAW: [AtomicU64; LEN] = [const { AtomicU64::new(0) }; LEN];
/// When profiling began (`MPI_Init`, or the setup that stood in for it).
static START: OnceLock<Instant> = OnceLock::new();
/// What a timed call's clock reads add to its time (the least of a few back-to-back
/// reads), taken off every timed call: about 20 ns here, a fifth of the smallest calls.
static CLOCK_NANOS: AtomicU64 = AtomicU64::new(0);
/// Where the profile goes, and whether rank 0 prints its table too.
static TARGET: OnceLock<(String, bool)> = OnceLock::new();

/// The timing decisions for one call and size class.
#[derive(Clone, Copy)]
struct Sampling {
    calls: u64,
    timed: u64,
    nanos: u64,
}

impl Sampling {
    #[cfg(test)]
    const NONE: Sampling = Sampling {
        calls: 0,
        timed: 0,
        nanos: 0,
    };

    /// Whether the next call is timed.
    fn times_next(&self) -> bool {
        self.timed < u64::from(ALWAYS_TIMED)
            || self.nanos >= LONG_NANOS * self.timed
            || self.calls.is_multiple_of(u64::from(SAMPLE_EVERY))
    }

    /// How many of the next calls in a row [`Sampling::times_next`] leaves untimed.
    fn untimed_ahead(&self) -> u64 {
        if self.timed < u64::from(ALWAYS_TIMED) || self.nanos >= LONG_NANOS * self.timed {
            return 0;
        }
        let every = u64::from(SAMPLE_EVERY);
        (every - self.calls % every) % every
    }
}

/// The process's [`Sampling`] per call and size class (calls, timed, nanoseconds): shared
/// by its threads, whose races at `MPI_THREAD_MULTIPLE` only shift which calls are timed.
static SAMPLING: [AtomicU64; 3 * CALLS * CLASSES] =
    [const { AtomicU64::new(0) }; 3 * CALLS * CLASSES];

/// Where the [`Sampling`] of `call` and size class `class` starts in [`SAMPLING`].
fn sampling_at(call: Call, class: usize) -> usize {
    3 * (call.index() * CLASSES + class)
}

fn sampling(i: usize) -> Sampling {
    let at = |k: usize| SAMPLING[i + k].load(Ordering::Relaxed);
    Sampling {
        calls: at(0),
        timed: at(1),
        nanos: at(2),
    }
}

// The span's word: [`CLOSED`] while no span is open (a Fortran entry that passes its call
// to the C one opens the only one), [`NO_OUTCOME`] once one is, then the state's word on
// its call. Per thread at `MPI_THREAD_MULTIPLE`, process-wide below it, where one thread
// at a time is in MPI and a thread-local costs more (`__tls_get_addr` in a shared
// library) than the profile may.
static WORD: AtomicU32 = AtomicU32::new(CLOSED);
thread_local! {
    static THREAD_WORD: Cell<u32> = const { Cell::new(CLOSED) };
}

/// The open run: the last call counted one by one, and how many calls repeated it since
/// (below `MPI_THREAD_MULTIPLE` only, where one thread at a time is in MPI).
struct Run {
    /// The call's index, or [`NO_RUN`].
    call: AtomicUsize,
    /// Its communicator's handle.
    comm: AtomicUsize,
    /// Its bytes.
    bytes: AtomicU64,
    /// Its count, where it was given by a count of a predefined datatype ([`span_of`]).
    count: AtomicU64,
    /// That datatype's handle, or [`NO_TYPE`] (the run is known by its bytes only).
    dt: AtomicUsize,
    /// Its size class.
    class: AtomicUsize,
    /// Its outcome word: a repeat with another outcome is counted on its own.
    outcome: AtomicU32,
    /// The repeats not yet added to the counters.
    repeats: AtomicU64,
    /// How many more repeats the sampling would not time (the next one after is timed,
    /// so it goes the whole way).
    untimed: AtomicU64,
}

const NO_RUN: usize = usize::MAX;
/// No datatype handle is this (Open MPI's are pointers, MPICH's 32-bit integers).
const NO_TYPE: usize = usize::MAX;

static RUN: Run = Run {
    call: AtomicUsize::new(NO_RUN),
    comm: AtomicUsize::new(0),
    bytes: AtomicU64::new(0),
    count: AtomicU64::new(0),
    dt: AtomicUsize::new(NO_TYPE),
    class: AtomicUsize::new(0),
    outcome: AtomicU32::new(NO_OUTCOME),
    repeats: AtomicU64::new(0),
    untimed: AtomicU64::new(0),
};

fn handle(comm: MPI_Comm) -> usize {
    comm.0 as usize
}

/// No span open.
const CLOSED: u32 = u32::MAX - 1;
/// A span open, no outcome noted (the state never counted the call).
const NO_OUTCOME: u32 = u32::MAX;

/// An outcome as one word: the kind, and the reason of a hand-off (0: topo-run's path).
fn encode(kind: CommKind, handed: Option<HandOff>) -> u32 {
    (kind as u32) << 8 | handed.map_or(0, |h| h.index() as u32 + 1)
}

fn decode(word: u32) -> (CommKind, Option<HandOff>) {
    if word == NO_OUTCOME {
        // A call the state never counted went to MPI before reaching it (the library
        // not set up yet, or finalized).
        return (CommKind::Other, Some(HandOff::Inactive));
    }
    let kind = CommKind::ALL[(word >> 8) as usize];
    let handed = match word & 0xff {
        0 => None,
        h => Some(HandOff::ALL[h as usize - 1]),
    };
    (kind, handed)
}

fn multiple() -> bool {
    MULTIPLE.load(Ordering::Relaxed)
}

/// This thread's span word (below `MPI_THREAD_MULTIPLE`, the process's).
fn word() -> u32 {
    if multiple() {
        THREAD_WORD.with(Cell::get)
    } else {
        WORD.load(Ordering::Relaxed)
    }
}

/// Sets the span word: a plain store (a swap would be a locked instruction, a fence on
/// every call).
fn set_word(word: u32) {
    if multiple() {
        THREAD_WORD.with(|w| w.set(word));
    } else {
        WORD.store(word, Ordering::Relaxed);
    }
}

/// Starts profiling if `TOPO_RUN_PROFILE` names a file (at `MPI_Init`, or the first call
/// that sets the library up). Returns whether it did.
pub(crate) fn start() -> bool {
    if ON.load(Ordering::Relaxed) {
        return true;
    }
    let Some(path) = std::env::var(topo_profile::PROFILE_ENV)
        .ok()
        .filter(|p| !p.trim().is_empty())
    else {
        return false;
    };
    let table = crate::stats::wanted(std::env::var("TOPO_RUN_VERBOSE").ok().as_deref());
    let _ = TARGET.set((path, table));
    let _ = START.set(Instant::now());
    CLOCK_NANOS.store(clock_cost(), Ordering::Relaxed);
    let multiple = abi::thread_multiple();
    MULTIPLE.store(multiple, Ordering::Relaxed);
    abi::size_cache(!multiple);
    ON.store(true, Ordering::Release);
    true
}

/// The least time between two clock reads back to back, of 64 tries: what the reads
/// around a timed call add to it.
fn clock_cost() -> u64 {
    (0..64)
        .map(|_| {
            let t = Instant::now();
            t.elapsed().as_nanos() as u64
        })
        .min()
        .unwrap_or(0)
}

/// Whether this process profiles its collectives.
pub(crate) fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// The state's word on the open span's call: its communicator's kind and its way.
pub(crate) fn note_outcome(kind: CommKind, handed: Option<HandOff>) {
    if on() && word() != CLOSED {
        set_word(encode(kind, handed));
    }
}

/// The outcome of a call handed to MPI before entering the library (`state::handed`):
/// its communicator has no context, for reason `why`.
#[inline]
pub(crate) fn note_handed(why: HandOff) {
    if on() {
        note_outcome(CommKind::Other, Some(why));
    }
}

/// A collective call being profiled; it is counted when dropped.
pub(crate) enum Span {
    /// A repeat of the open [`Run`] (below `MPI_THREAD_MULTIPLE`), not timed: the same
    /// call, communicator and size class as the run's.
    Repeat,
    /// A call counted on its own.
    Counted {
        call: Call,
        class: usize,
        comm: MPI_Comm,
        started: Option<Instant>,
    },
}

/// Opens the span of a `call` on `comm` whose block is `bytes()` bytes (computed only
/// when profiling): bind it to a variable that lives to the end of the call.
#[inline]
pub(crate) fn span(call: Call, comm: MPI_Comm, bytes: impl FnOnce() -> u64) -> Option<Span> {
    if !ON.load(Ordering::Relaxed) {
        return None;
    }
    open(call, comm, bytes, None)
}

/// [`span`] for a call whose block is `count` elements of `dt`: a repeat of the open run
/// with a predefined `dt` is known inline, without the bytes.
#[inline(always)]
pub(crate) fn span_of(call: Call, comm: MPI_Comm, count: c_int, dt: MPI_Datatype) -> Option<Span> {
    if !ON.load(Ordering::Relaxed) {
        return None;
    }
    // `untimed` is nonzero below `MPI_THREAD_MULTIPLE` only (`Span`'s drop sets it there).
    let untimed = RUN.untimed.load(Ordering::Relaxed);
    if untimed > 0
        && WORD.load(Ordering::Relaxed) == CLOSED
        && RUN.dt.load(Ordering::Relaxed) == dt.0 as usize
        && RUN.count.load(Ordering::Relaxed) == count as u64
        && RUN.call.load(Ordering::Relaxed) == call.index()
        && RUN.comm.load(Ordering::Relaxed) == handle(comm)
    {
        RUN.untimed.store(untimed - 1, Ordering::Relaxed);
        WORD.store(NO_OUTCOME, Ordering::Relaxed);
        return Some(Span::Repeat);
    }
    open(call, comm, || abi::bytes_of(count, dt), Some((count, dt)))
}

/// Opens a span: `raw`, the call's count and datatype where [`span_of`] gave them.
#[inline(never)]
fn open(
    call: Call,
    comm: MPI_Comm,
    bytes: impl FnOnce() -> u64,
    raw: Option<(c_int, MPI_Datatype)>,
) -> Option<Span> {
    if multiple() {
        if THREAD_WORD.with(Cell::get) != CLOSED {
            return None;
        }
        THREAD_WORD.with(|w| w.set(NO_OUTCOME));
        return Some(opened(call, comm, topo_profile::class_of(bytes())));
    }
    if WORD.load(Ordering::Relaxed) != CLOSED {
        return None;
    }
    WORD.store(NO_OUTCOME, Ordering::Relaxed);
    let bytes = bytes();
    let untimed = RUN.untimed.load(Ordering::Relaxed);
    if untimed > 0
        && RUN.call.load(Ordering::Relaxed) == call.index()
        && RUN.comm.load(Ordering::Relaxed) == handle(comm)
        && RUN.bytes.load(Ordering::Relaxed) == bytes
    {
        RUN.untimed.store(untimed - 1, Ordering::Relaxed);
        return Some(Span::Repeat);
    }
    flush();
    let class = topo_profile::class_of(bytes);
    // Known by count and datatype from now on where the type's size cannot change (a
    // predefined type), or no bytes whatever the type.
    let (count, dt) = match raw {
        Some((count, dt)) if count <= 0 || abi::predefined(dt) => (count as u64, dt.0 as usize),
        _ => (0, NO_TYPE),
    };
    RUN.call.store(call.index(), Ordering::Relaxed);
    RUN.comm.store(handle(comm), Ordering::Relaxed);
    RUN.bytes.store(bytes, Ordering::Relaxed);
    RUN.count.store(count, Ordering::Relaxed);
    RUN.dt.store(dt, Ordering::Relaxed);
    RUN.class.store(class, Ordering::Relaxed);
    Some(opened(call, comm, class))
}

/// The span of a call counted on its own: whether it is timed, as the sampling says.
fn opened(call: Call, comm: MPI_Comm, class: usize) -> Span {
    let i = sampling_at(call, class);
    let timed = sampling(i).times_next();
    add_to(&SAMPLING[i], 1);
    Span::Counted {
        call,
        class,
        comm,
        started: timed.then(Instant::now),
    }
}

/// Adds the open run's repeats to the counters (below `MPI_THREAD_MULTIPLE`).
fn flush() {
    let repeats = RUN.repeats.load(Ordering::Relaxed);
    RUN.untimed.store(0, Ordering::Relaxed);
    if repeats == 0 {
        return;
    }
    RUN.repeats.store(0, Ordering::Relaxed);
    let call = Call::ALL[RUN.call.load(Ordering::Relaxed)];
    let class = RUN.class.load(Ordering::Relaxed);
    let comm = RUN.comm.load(Ordering::Relaxed);
    count(
        call,
        class,
        comm,
        RUN.outcome.load(Ordering::Relaxed),
        repeats,
    );
    add_to(&SAMPLING[sampling_at(call, class)], repeats);
}

/// Adds `n` calls of `call` and size class `class` on `comm`, with outcome `word`, to the
/// counters; returns their index.
fn count(call: Call, class: usize, comm: usize, word: u32, n: u64) -> RawIndex {
    let (mut kind, handed) = decode(word);
    // World without a context (the path off, `--native`) is still world.
    if kind == CommKind::Other && comm == handle(abi::world()) {
        kind = CommKind::World;
    }
    let at = RawIndex::new(call.index(), kind as usize, KINDS, REASONS);
    add(at.calls(class), n);
    match handed {
        None => add(at.ours(), n),
        Some(why) => add(at.handed(why.index()), n),
    }
    at
}

impl Drop for Span {
    #[inline(always)]
    fn drop(&mut self) {
        match *self {
            Span::Repeat => {
                // Below `MPI_THREAD_MULTIPLE` (no run is kept at it): the process's word.
                let word = WORD.load(Ordering::Relaxed);
                WORD.store(CLOSED, Ordering::Relaxed);
                if word == RUN.outcome.load(Ordering::Relaxed) {
                    RUN.repeats
                        .store(RUN.repeats.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                } else {
                    repeat_apart(word);
                }
            }
            Span::Counted {
                call,
                class,
                comm,
                started,
            } => closed(call, class, comm, started),
        }
    }
}

/// A repeat of the open run whose outcome was another: counted on its own (the run stays
/// open).
#[inline(never)]
fn repeat_apart(word: u32) {
    let call = Call::ALL[RUN.call.load(Ordering::Relaxed)];
    let class = RUN.class.load(Ordering::Relaxed);
    count(call, class, RUN.comm.load(Ordering::Relaxed), word, 1);
    add_to(&SAMPLING[sampling_at(call, class)], 1);
}

/// Counts a call counted on its own, with its time if it was timed (`started`).
#[inline(never)]
fn closed(call: Call, class: usize, comm: MPI_Comm, started: Option<Instant>) {
    let nanos = started.map(|t| {
        (t.elapsed().as_nanos() as u64).saturating_sub(CLOCK_NANOS.load(Ordering::Relaxed))
    });
    let word = word();
    set_word(CLOSED);
    let i = sampling_at(call, class);
    let at = count(call, class, handle(comm), word, 1);
    if let Some(nanos) = nanos {
        add_to(&SAMPLING[i + 1], 1);
        add_to(&SAMPLING[i + 2], nanos);
        add(at.timed(class), 1);
        add(at.nanos(class), nanos);
        let ranks = abi::comm_size(comm) as u64;
        let most = &RAW[at.ranks()];
        if multiple() {
            most.fetch_max(ranks, Ordering::Relaxed);
        } else if most.load(Ordering::Relaxed) < ranks {
            most.store(ranks, Ordering::Relaxed);
        }
    }
    if !multiple() {
        // The run this call opened: its outcome, and how many repeats the sampling
        // would leave untimed.
        RUN.outcome.store(word, Ordering::Relaxed);
        RUN.untimed
            .store(sampling(i).untimed_ahead(), Ordering::Relaxed);
    }
}

fn add(i: usize, v: u64) {
    add_to(&RAW[i], v);
}

/// Adds `v` to a counter: atomically where threads may race, else a load and a store.
fn add_to(a: &AtomicU64, v: u64) {
    if multiple() {
        a.fetch_add(v, Ordering::Relaxed);
    } else {
        a.store(a.load(Ordering::Relaxed) + v, Ordering::Relaxed);
    }
}

/// The names behind the counters.
fn shape() -> Shape<'static> {
    static NAMES: OnceLock<(Vec<&'static str>, Vec<&'static str>, Vec<&'static str>)> =
        OnceLock::new();
    let (calls, kinds, reasons) = NAMES.get_or_init(|| {
        (
            Call::ALL.iter().map(|c| c.name()).collect(),
            CommKind::ALL.iter().map(|k| k.name()).collect(),
            HandOff::ALL.iter().map(|h| h.describe()).collect(),
        )
    });
    Shape {
        calls,
        kinds,
        reasons,
    }
}

/// Combines the ranks' counters (collective over `MPI_COMM_WORLD`: at the start of
/// `MPI_Finalize`, where every rank is) and writes the profile from rank 0, once.
/// `native`: topo-run's path was off by request.
pub(crate) fn finish(native: bool) {
    // Every rank reads the same environment, so all of them take part (a rank that
    // made no call before starts here).
    if !start() || WRITTEN.swap(true, Ordering::AcqRel) {
        return;
    }
    if !multiple() {
        flush();
        RUN.call.store(NO_RUN, Ordering::Relaxed);
    }
    let wall = START.get().map_or(0, |t| t.elapsed().as_nanos() as u64);
    let shape = shape();
    let raw: Vec<u64> = RAW.iter().map(|a| a.load(Ordering::Relaxed)).collect();
    let mut mine = topo_profile::summarize(&shape, &raw, wall);
    // The last entry counts nodes: 1 from each node's first rank.
    mine.push(u64::from(abi::first_on_node()));
    let world = abi::world();
    let sum = abi::reduce_u64_to_0(world, &mine, abi::Combine::Sum);
    let max = abi::reduce_u64_to_0(world, &mine, abi::Combine::Max);
    let (Some(mut sum), Some(mut max)) = (sum, max) else {
        return;
    };
    let nodes = sum.pop().unwrap_or(1);
    max.pop();
    let (_, ranks) = abi::world_rank_size();
    let job = topo_profile::Job {
        ranks: ranks as u64,
        nodes,
        mpi: abi::library_version(),
        native,
    };
    let profile = topo_profile::combine(&shape, &sum, &max, job);
    let Some((path, table)) = TARGET.get() else {
        return;
    };
    if let Err(e) = std::fs::write(path, profile.to_json()) {
        eprintln!(
            "topo-run: warning: cannot write the profile to {path}: {e}; give --profile a \
             file in a writable directory"
        );
        return;
    }
    if *table {
        for line in topo_profile::table(&profile) {
            eprintln!("topo-run: {line}");
        }
        eprintln!("topo-run: profile written to {path}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How many of `n` calls of `nanos` each are timed.
    fn timed_of(n: u64, nanos: u64) -> u64 {
        let mut s = Sampling::NONE;
        for _ in 0..n {
            if s.times_next() {
                s.timed += 1;
                s.nanos += nanos;
            }
            s.calls += 1;
        }
        s.timed
    }

    #[test]
    fn short_calls_are_sampled_and_long_ones_all_timed() {
        let always = u64::from(ALWAYS_TIMED);
        assert_eq!(timed_of(always, 10), always, "the first ones all");
        // 10,000 short calls: the first 32, then one in 64 of the others.
        let short = timed_of(10_000, 80);
        assert!((always + 150..always + 160).contains(&short), "{short}");
        assert_eq!(timed_of(10_000, LONG_NANOS), 10_000, "long calls all");
    }

    /// How many of `n` calls of `nanos` each are timed when the repeats that
    /// `untimed_ahead` allows are counted as one run, as the span counts them.
    fn timed_in_runs(n: u64, nanos: u64) -> u64 {
        let (mut s, mut untimed, mut repeats) = (Sampling::NONE, 0, 0);
        for _ in 0..n {
            if untimed > 0 {
                untimed -= 1;
                repeats += 1;
                continue;
            }
            s.calls += repeats;
            repeats = 0;
            if s.times_next() {
                s.timed += 1;
                s.nanos += nanos;
            }
            s.calls += 1;
            untimed = s.untimed_ahead();
        }
        s.timed
    }

    #[test]
    fn runs_of_repeats_time_the_calls_that_one_by_one_would() {
        for n in [1, 31, 32, 33, 95, 96, 97, 1_000, 10_007] {
            for nanos in [10, 80, LONG_NANOS - 1, LONG_NANOS] {
                assert_eq!(timed_in_runs(n, nanos), timed_of(n, nanos), "{n} x {nanos}");
            }
        }
    }

    #[test]
    fn outcomes_are_one_word_each() {
        for kind in CommKind::ALL {
            assert_eq!(decode(encode(kind, None)), (kind, None));
            for why in HandOff::ALL {
                assert_eq!(decode(encode(kind, Some(why))), (kind, Some(why)));
                assert_ne!(encode(kind, Some(why)), NO_OUTCOME);
                assert_ne!(encode(kind, Some(why)), CLOSED);
            }
        }
        assert_eq!(
            decode(NO_OUTCOME),
            (CommKind::Other, Some(HandOff::Inactive))
        );
    }

    #[test]
    fn the_shape_names_every_counter() {
        let s = shape();
        assert_eq!(s.raw_len(), LEN);
        assert_eq!(s.calls[Call::Allreduce.index()], "MPI_Allreduce");
        assert_eq!(s.kinds[CommKind::Split as usize], "split");
        assert_eq!(
            s.reasons[HandOff::Native.index()],
            HandOff::Native.describe()
        );
    }
}
