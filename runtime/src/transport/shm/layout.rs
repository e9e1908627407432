//! Where everything lives in a node's segment. All offsets (and nothing else) are computed
//! here; the segment stores no pointers.
//!
//! ```text
//! header   magic, sizes, each local rank's PID and mapping address, then one probe
//!          line and one signal line per local rank (page-aligned)
//! queue 0  control words c[slot][reader], one cache line each  (page-aligned)
//!          rings r[reader], `RING_LINES` lines each            (page-aligned)
//!          heads h[reader] (its writer's), tails t[writer] (its reader's), a line each
//!          data slots q[slot], `fragment` bytes each, staggered (region page-aligned)
//! queue 1  ...
//! ```
//! Queue `r` is written only by local rank `r` and read by anyone (coll/sharm). A control
//! word is `seq << 32 | len`: zero means empty, `seq` counts the fragments the writer has
//! addressed to that reader (never 0), `len` is the fragment's length. A `len` with
//! [`SINGLE_COPY`] set marks a descriptor instead of data: the slot holds the address and
//! length of the writer's own buffer, which readers copy with `process_vm_readv`, and the
//! writer waits until every reader has cleared its word before it reuses the buffer.
//!
//! A fragment of at most [`INLINE_MAX`] bytes rides in the reader's control line itself,
//! after the word ([`INLINE`] set in `len`): the reader then gets the word and the data
//! in one cache-line transfer instead of two (the floor for small messages).
//!
//! A message of at most [`RING_MAX`] bytes goes through the ring from its writer to its
//! reader instead of a slot: a record of a header word (`lap << 32 | len`, `lap` counting
//! from 1 the times the writer went round that ring) and the bytes, in 8-byte words, never
//! across a line (a record that would cross one starts the next line; both sides know
//! every length, so they skip alike). The reader writes nothing into the ring: it counts
//! the words it has taken in its tail word, which the writer reads only when its last look
//! says the ring is full, and a stale record never matches (its lap is an earlier one). So
//! small messages sent back to back cost their lines one transfer, several to a line,
//! where a slot's word costs its line twice (the writer's check of the word the reader
//! cleared). Head and tail words stay in the segment, so that whoever uses the queue next
//! (a kept context taken up, a lane claimed again) goes on where the last one left off.
//!
//! The data slots do not start on page boundaries: slot `k` of queue `r` starts
//! `k * (fragment + STAGGER)` bytes into the queue's data, plus [`STAGGER`] bytes times
//! `(r * slots) % STAGGERS` (with fragments of whole pages, the node's slots then start at
//! different offsets in a page, queue after queue, up to [`STAGGERS`] of them). Fragments
//! are multiples of 4 KiB by default; without the stagger the slots' first lines would
//! all fall into the same set of every cache (a set repeats every 4 KiB in a core's first
//! level), and a writer running ahead through its slots, and its reader behind it, would
//! evict each other's lines: on 1 node x 2, an Exscan of 64 B back to back (one slot
//! line a message) took 0.115-0.122 us a call where one of 32 B (the ring) or 128 B took
//! 0.10.
//!
//! A barrier's rounds use no queue: local rank `r`'s signal line holds, per round, how
//! many times `r` has passed that round; a peer waits until the count reaches its own. The
//! writer never waits for a slot and the reader clears nothing, so a round costs the one
//! transfer of the writer's line.

/// Identifies a topo-run segment, version 8 of this layout.
pub const MAGIC: u64 = 0x746f_706f_7275_6e38;
/// Lines of each ring (writer to reader).
pub const RING_LINES: usize = 16;
/// 8-byte words of each ring.
pub const RING_WORDS: usize = RING_LINES * WORDS_PER_LINE;
/// 8-byte words per cache line.
pub const WORDS_PER_LINE: usize = CONTROL_STRIDE / 8;
/// The largest message that goes through a ring: a record of one line.
pub const RING_MAX: usize = CONTROL_STRIDE - 8;
/// The `len` bit of a control word that marks a single-copy descriptor.
pub const SINGLE_COPY: u64 = 1 << 31;
/// The `len` bit of a control word whose fragment follows the word in its own line.
pub const INLINE: u64 = 1 << 30;
/// The bits of a control word's `len` that hold the length.
pub const LEN_MASK: u64 = INLINE - 1;
/// The largest fragment that rides in a control line (the line after its word).
pub const INLINE_MAX: usize = CONTROL_STRIDE - 8;
/// Where an inline fragment starts in its control line.
pub const INLINE_AT: usize = 8;
/// Bytes of a single-copy descriptor: the writer's buffer address and length (`u64` each).
pub const DESCRIPTOR: usize = 16;
/// Bytes per control word, padded to a cache line so readers never share one.
pub const CONTROL_STRIDE: usize = 64;
const PAGE: usize = 4096;
/// Bytes from the end of one slot to the start of the next, and between the offsets in a
/// page where the queues' first slots start: two lines, so that no two slots share the
/// pair of lines a core's adjacent-line prefetcher fetches together.
pub const STAGGER: usize = 2 * CONTROL_STRIDE;
/// The offsets [`STAGGER`] apart in a page (where queue `r`'s first slot may start).
pub const STAGGERS: usize = PAGE / STAGGER;
/// Barrier rounds with a count in the signal line (a `u64` each): enough for 256 ranks
/// meeting in one group; rounds beyond go through the queues.
pub const SIGNAL_ROUNDS: usize = CONTROL_STRIDE / 8;
/// Header fields occupy the first cache line; one record per local rank follows.
pub const RECORDS_OFFSET: usize = 64;
/// Bytes per local rank's record: its PID (`i32`, padded) and where it mapped the segment
/// (`u64`).
const RECORD: usize = 16;

fn page_round(n: usize) -> usize {
    n.div_ceil(PAGE) * PAGE
}

/// Bytes of `n` words, in whole cache lines.
fn words_len(n: usize) -> usize {
    (8 * n).next_multiple_of(CONTROL_STRIDE)
}

/// The geometry of a segment for `ranks` local ranks. The sizes of its parts are worked
/// out once, in [`Layout::new`]: every queue operation computes offsets from them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Local ranks (queues).
    pub ranks: usize,
    /// Slots per queue.
    pub slots: usize,
    /// Bytes per slot.
    pub fragment: usize,
    probe_at: usize,
    header_len: usize,
    control_len: usize,
    ring_len: usize,
    queue_len: usize,
    total: usize,
}

/// Header field offsets.
pub mod header {
    /// `u64` magic, written last by the creator (Release).
    pub const MAGIC: usize = 0;
    /// `u32` local ranks.
    pub const RANKS: usize = 8;
    /// `u32` slots.
    pub const SLOTS: usize = 12;
    /// `u32` fragment bytes.
    pub const FRAGMENT: usize = 16;
    /// `u64` total bytes.
    pub const TOTAL: usize = 24;
    /// `u64` digest of the node's intra-node groups in the creator's plan.
    pub const NODE_PLAN: usize = 32;
}

impl Layout {
    /// The geometry for `ranks` local ranks, `slots` slots per queue and `fragment` bytes
    /// per slot.
    pub fn new(ranks: usize, slots: usize, fragment: usize) -> Self {
        let probe_at = (RECORDS_OFFSET + RECORD * ranks).next_multiple_of(CONTROL_STRIDE);
        // Probe lines, then signal lines: one of each per local rank.
        let header_len = page_round(probe_at + 2 * CONTROL_STRIDE * ranks);
        let control_len = page_round(slots * ranks * CONTROL_STRIDE);
        let ring_len = page_round(ranks * RING_LINES * CONTROL_STRIDE + 2 * words_len(ranks));
        let queue_len =
            control_len + ring_len + page_round(slots * (fragment + STAGGER) + PAGE - STAGGER);
        Layout {
            ranks,
            slots,
            fragment,
            probe_at,
            header_len,
            control_len,
            ring_len,
            queue_len,
            total: header_len + ranks * queue_len,
        }
    }

    /// Header bytes (fields, records and probe lines).
    pub fn header_len(&self) -> usize {
        self.header_len
    }

    /// Offset of local rank `r`'s probe line (a `u64` only `r` writes, alone in its cache
    /// line), for measuring how long a cache line takes between two cores.
    pub fn probe(&self, r: usize) -> usize {
        self.probe_at + CONTROL_STRIDE * r
    }

    /// Offset of round `round`'s count in local rank `r`'s signal line (`u64`s only `r`
    /// writes, their line shared with nobody else's).
    pub fn signal(&self, r: usize, round: usize) -> usize {
        debug_assert!(r < self.ranks && round < SIGNAL_ROUNDS);
        self.probe(self.ranks) + CONTROL_STRIDE * r + 8 * round
    }

    /// Offset of local rank `r`'s PID (`i32`).
    pub fn pid(&self, r: usize) -> usize {
        debug_assert!(r < self.ranks);
        RECORDS_OFFSET + RECORD * r
    }

    /// Offset of the address at which local rank `r` mapped the segment (`u64`).
    pub fn base(&self, r: usize) -> usize {
        self.pid(r) + 8
    }

    /// The byte range of queue `r` (control words and slots).
    pub fn queue(&self, r: usize) -> std::ops::Range<usize> {
        let start = self.queue_start(r);
        start..start + self.queue_len
    }

    fn queue_start(&self, r: usize) -> usize {
        self.header_len + r * self.queue_len
    }

    /// Offset of the control word of slot `k` of queue `r` for reader `j`.
    pub fn control(&self, r: usize, k: usize, j: usize) -> usize {
        debug_assert!(r < self.ranks && k < self.slots && j < self.ranks);
        self.queue_start(r) + (k * self.ranks + j) * CONTROL_STRIDE
    }

    /// Where an entry of `len` bytes (not a single-copy descriptor) in slot `k` of queue
    /// `r` for reader `j` lives, and the form bits of its word: inline in `j`'s control
    /// line after the word up to [`INLINE_MAX`] bytes, else in the slot's data.
    pub fn entry(&self, r: usize, k: usize, j: usize, len: usize) -> (u64, usize) {
        if len <= INLINE_MAX {
            (INLINE, self.control(r, k, j) + INLINE_AT)
        } else {
            (0, self.data(r, k))
        }
    }

    /// Offset of the data of slot `k` of queue `r`, staggered (see the module's doc): slot
    /// 0 of queue 0 starts on a page, each later slot [`STAGGER`] bytes past the end of
    /// the one before it.
    pub fn data(&self, r: usize, k: usize) -> usize {
        debug_assert!(r < self.ranks && k < self.slots);
        let first = (r * self.slots) % STAGGERS * STAGGER;
        self.queue_start(r)
            + self.control_len
            + self.ring_len
            + first
            + k * (self.fragment + STAGGER)
    }

    /// Offset of the ring from writer `r` to reader `j` ([`RING_WORDS`] words).
    pub fn ring(&self, r: usize, j: usize) -> usize {
        debug_assert!(r < self.ranks && j < self.ranks);
        self.queue_start(r) + self.control_len + j * RING_LINES * CONTROL_STRIDE
    }

    /// Offset of writer `r`'s head word for reader `j` (`u64`: the words it has put into
    /// their ring; only `r` writes it).
    pub fn head(&self, r: usize, j: usize) -> usize {
        debug_assert!(r < self.ranks && j < self.ranks);
        self.queue_start(r) + self.control_len + self.ranks * RING_LINES * CONTROL_STRIDE + 8 * j
    }

    /// Offset of reader `j`'s tail word for writer `w` (`u64`: the words it has taken from
    /// their ring; only `j` writes it, in lines of its own queue).
    pub fn tail(&self, j: usize, w: usize) -> usize {
        debug_assert!(j < self.ranks && w < self.ranks);
        self.head(j, 0) + words_len(self.ranks) + 8 * w
    }

    /// Total bytes of the segment.
    pub fn total(&self) -> usize {
        self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_page_aligned_and_disjoint() {
        let l = Layout::new(36, 8, 8192);
        assert_eq!(l.header_len() % PAGE, 0);
        assert!(l.base(35) + 8 <= l.probe(0));
        assert_eq!(l.probe(0) % CONTROL_STRIDE, 0);
        assert!(l.probe(35) + CONTROL_STRIDE <= l.signal(0, 0));
        assert_eq!(l.signal(0, 0) % CONTROL_STRIDE, 0);
        assert_eq!(l.signal(1, 0) - l.signal(0, 0), CONTROL_STRIDE);
        assert!(l.signal(35, SIGNAL_ROUNDS - 1) + 8 <= l.header_len());
        for r in 0..l.ranks {
            let q = l.queue(r);
            assert_eq!(q.start % PAGE, 0);
            assert!(l.control(r, 7, 35) + CONTROL_STRIDE <= l.ring(r, 0));
            assert_eq!(l.ring(r, 0) % PAGE, 0);
            assert!(l.ring(r, 35) + RING_LINES * CONTROL_STRIDE <= l.head(r, 0));
            assert_eq!(l.head(r, 0) % CONTROL_STRIDE, 0);
            assert!(l.head(r, 35) + 8 <= l.tail(r, 0));
            assert_eq!(l.tail(r, 0) % CONTROL_STRIDE, 0);
            assert!(l.tail(r, 35) + 8 <= l.data(r, 0));
            assert_eq!(l.data(r, 0) % STAGGER, 0);
            assert!(l.data(r, 7) + l.fragment <= q.end);
        }
        assert_eq!(l.queue(35).end, l.total());
        assert_eq!(l.data(0, 0) % PAGE, 0);
        // coll/sharm's estimate p*s*(f + 4K) is the same order: 2.4 MB here, and the rings
        // 1 KiB per pair of ranks (1.3 MB) and a page per queue.
        let rings = 36 * 36 * RING_LINES * CONTROL_STRIDE + 36 * PAGE;
        assert!(l.total() < 36 * 8 * (8192 + 4096) + rings + 36 * PAGE + 4096);
    }

    #[test]
    fn slots_start_in_different_lines_of_a_page_and_never_overlap() {
        for (ranks, slots, fragment) in [(2, 8, 128 << 10), (4, 8, 8192), (3, 64, 64), (2, 5, 4160)]
        {
            let l = Layout::new(ranks, slots, fragment);
            let mut starts = std::collections::HashSet::new();
            for r in 0..ranks {
                for k in 0..slots {
                    let d = l.data(r, k);
                    assert_eq!(d % CONTROL_STRIDE, 0);
                    if k + 1 < slots {
                        assert_eq!(l.data(r, k + 1), d + fragment + STAGGER);
                    }
                    assert!(d + fragment <= l.queue(r).end, "{ranks} {slots} {fragment}");
                    assert!(d >= l.tail(r, ranks - 1) + 8);
                    starts.insert(d % PAGE);
                }
            }
            // Where fragments are whole pages, each of the first 32 slots has a line pair
            // of its own in the page.
            if fragment % PAGE == 0 {
                assert_eq!(starts.len(), (ranks * slots).min(STAGGERS));
            }
        }
    }

    #[test]
    fn segments_stay_within_the_bound_that_doctor_reserves() {
        for ranks in [1usize, 2, 3, 36, 128, 257] {
            for slots in [1usize, 8, 64] {
                for fragment in [64usize, 8192, 65536] {
                    let l = Layout::new(ranks, slots, fragment);
                    let settings = topo_hierarchy::Settings {
                        slots: slots as u32,
                        fragment: fragment as u32,
                        ..Default::default()
                    };
                    let bound = settings.segment_bound(ranks as u64) as usize;
                    assert!(l.total() <= bound, "{ranks} {slots} {fragment}");
                    // and not wildly above it: at most four pages per rank and header more.
                    assert!(bound <= l.total() + (4 * ranks + 3) * PAGE + 144 * ranks + 64);
                }
            }
        }
    }
}
