//! queue-floor: what a small broadcast costs at each layer, on this machine, without MPI.
//!
//! Two threads pinned to two cores pass a broadcast back and forth (the root moves every
//! call, so each call starts when the previous one's data has arrived, as `coll-bench
//! --chain` does) through, in turn:
//!
//! - `pingpong`: one shared cache line, a counter written by one side and awaited by the
//!   other: the one-way line transfer, the hardware's floor;
//! - `minimal`: the smallest queue that can be reused, eight one-line slots, each with a
//!   word the writer sets and the reader clears and the data beside it: what any queue
//!   that must know a slot is free pays;
//! - `shm`: topo-run's shared-memory transport (`send` / `recv`);
//! - `bcast`: topo-run's broadcast over that transport (the runtime's call without MPI
//!   and without the context's lock);
//! - `reduce`: topo-run's reduce of 8-byte integers over it, the same way;
//! - `barrier`: topo-run's barrier, back to back (the dissemination: one transfer each);
//! - `rootfirst`: the same with `barrier = root-first` (a gather and a release: two);
//! - `twolines`: the smallest root-first barrier, a count per side in a line of its own:
//!   what `rootfirst` cannot go below.
//!
//! The `stream-*` layers send in one direction only (side 0 writes, side 1 reads, as a
//! broadcast called back to back from a fixed root, IMB's loop), so the writer may run
//! ahead and the time per call is the pipe's throughput, not its latency:
//!
//! - `stream-minimal`: the minimal queue one way (the reader clears each slot's word);
//! - `stream-counter`: the same slots, but the reader never writes them: it counts what it
//!   took in a line of its own, which the writer reads only when its last look says the
//!   queue is full;
//! - `stream-ring`: a ring of 16-byte records (a sequence word and 8 bytes), four to a
//!   line, the reader's count published once per line;
//! - `stream-shm`, `stream-bcast`: topo-run's transport and broadcast from a fixed root.
//!
//! Each line prints the median of the rounds, in nanoseconds per call. The machine's
//! speed changes between stretches of time (docs/runtime.md), so the layers run in turn
//! within every round.
//!
//! `--one-thread LAYER` (`shm`, `bcast` or `reduce`) instead plays both sides of the pair
//! in this one thread, `--calls` times, checking every result, and times nothing: it is
//! for counting the instructions each layer runs per call, where the waits cost nothing,
//! with `valgrind --tool=callgrind` (docs/runtime.md).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Parser;
use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;
use topo_runtime::Settings;
use topo_runtime::links::{Links, NoNetwork};
use topo_runtime::transport::Transport;
use topo_runtime::transport::shm::{Layout, Segment, ShmTransport};
use topo_runtime::view::{Level, View};

/// Time a small broadcast at each layer between two cores.
#[derive(Parser)]
struct Args {
    /// Bytes per broadcast.
    #[arg(long, default_value_t = 8)]
    bytes: usize,
    /// Calls per measurement.
    #[arg(long, default_value_t = 200_000)]
    calls: usize,
    /// Rounds (every layer once per round).
    #[arg(long, default_value_t = 7)]
    rounds: usize,
    /// The two cores.
    #[arg(long, num_args = 2, default_values_t = [0, 1])]
    cores: Vec<usize>,
    /// Play both sides of LAYER (shm, bcast or reduce) in one thread instead, untimed (for
    /// counting instructions under valgrind).
    #[arg(long, value_name = "LAYER", value_parser = ["shm", "bcast", "reduce"])]
    one_thread: Option<String>,
}

const LAYERS: [&str; 13] = [
    "pingpong",
    "minimal",
    "shm",
    "bcast",
    "reduce",
    "barrier",
    "rootfirst",
    "twolines",
    "stream-minimal",
    "stream-counter",
    "stream-ring",
    "stream-shm",
    "stream-bcast",
];
/// Lines of the `stream-ring` layer's ring.
const RING_LINES: usize = 64;
/// Records of 16 bytes per line in `stream-ring`.
const PER_LINE: usize = 4;
const SLOTS: usize = 8;
/// The largest message `--one-thread` takes: one fragment, far below the single-copy
/// threshold, so that no send waits for its reader.
const ONE_THREAD_MAX: usize = 4096;

#[repr(C, align(64))]
struct Line {
    word: AtomicU64,
    data: [AtomicU64; 7],
}

/// The minimal queues: one per side.
struct Minimal {
    queues: [[Line; SLOTS]; 2],
    /// The ping-pong's line.
    ball: Line,
    /// One count per side, for the smallest root-first barrier.
    counts: [Line; 2],
    /// `stream-counter`'s slots and `stream-ring`'s ring (side 0 writes them).
    slots: [Line; SLOTS],
    ring: [Line; RING_LINES],
    /// What the reader of `stream-counter` and of `stream-ring` has taken (it alone
    /// writes them; a line per layer, so that neither sees the other's count).
    taken: [Line; 2],
}

impl Minimal {
    fn new() -> Self {
        let line = || Line {
            word: AtomicU64::new(0),
            data: std::array::from_fn(|_| AtomicU64::new(0)),
        };
        Minimal {
            queues: std::array::from_fn(|_| std::array::from_fn(|_| line())),
            ball: line(),
            counts: std::array::from_fn(|_| line()),
            slots: std::array::from_fn(|_| line()),
            ring: std::array::from_fn(|_| line()),
            taken: std::array::from_fn(|_| line()),
        }
    }

    /// Side `me`'s part in `calls` calls, the root alternating.
    fn run(&self, me: usize, calls: usize) -> u64 {
        let (mut next, mut seq, mut expect, mut at, mut sink) = (0, 0u64, 0u64, 0, 0u64);
        for i in 0..calls {
            if i % 2 == me {
                let l = &self.queues[me][next];
                while l.word.load(Ordering::Acquire) != 0 {
                    std::hint::spin_loop();
                }
                l.data[0].store(i as u64, Ordering::Relaxed);
                seq += 1;
                l.word.store(seq, Ordering::Release);
                next = (next + 1) % SLOTS;
            } else {
                let l = &self.queues[1 - me][at];
                expect += 1;
                while l.word.load(Ordering::Acquire) != expect {
                    std::hint::spin_loop();
                }
                sink ^= l.data[0].load(Ordering::Relaxed);
                l.word.store(0, Ordering::Release);
                at = (at + 1) % SLOTS;
            }
        }
        sink
    }

    /// `stream-minimal`: side 0 writes `calls` messages into its slots, side 1 takes them
    /// and clears each slot's word.
    fn stream_minimal(&self, me: usize, calls: usize) -> u64 {
        let q = &self.queues[0];
        let mut sink = 0;
        for i in 0..calls {
            let l = &q[i % SLOTS];
            if me == 0 {
                while l.word.load(Ordering::Acquire) != 0 {
                    std::hint::spin_loop();
                }
                l.data[0].store(i as u64, Ordering::Relaxed);
                l.word.store(i as u64 + 1, Ordering::Release);
            } else {
                while l.word.load(Ordering::Acquire) != i as u64 + 1 {
                    std::hint::spin_loop();
                }
                sink ^= l.data[0].load(Ordering::Relaxed);
                l.word.store(0, Ordering::Release);
            }
        }
        sink
    }

    /// `stream-counter`: as `stream_minimal`, but the words stay (each holds its message's
    /// number in round `round`), and the reader counts what it took in `taken`, which the
    /// writer reads only when the count it last saw says the slots are full.
    fn stream_counter(&self, me: usize, calls: usize, round: usize) -> u64 {
        let base = (round * calls) as u64;
        let (mut seen, mut sink) = (base, 0);
        for i in 0..calls {
            let n = base + i as u64 + 1;
            let l = &self.slots[i % SLOTS];
            if me == 0 {
                while seen + (SLOTS as u64) < n {
                    seen = self.taken[0].word.load(Ordering::Acquire);
                    if seen + (SLOTS as u64) < n {
                        std::hint::spin_loop();
                    }
                }
                l.data[0].store(i as u64, Ordering::Relaxed);
                l.word.store(n, Ordering::Release);
            } else {
                while l.word.load(Ordering::Acquire) != n {
                    std::hint::spin_loop();
                }
                sink ^= l.data[0].load(Ordering::Relaxed);
                self.taken[0].word.store(n, Ordering::Release);
            }
        }
        sink
    }

    /// `stream-ring`: records of a word and 8 bytes, [`PER_LINE`] to a line, in a ring of
    /// [`RING_LINES`] lines; the reader publishes its count once per line.
    fn stream_ring(&self, me: usize, calls: usize, round: usize) -> u64 {
        let cap = (RING_LINES * PER_LINE) as u64;
        let base = (round * calls) as u64;
        let (mut seen, mut sink) = (base, 0);
        for i in 0..calls {
            let n = base + i as u64 + 1;
            let at = ((n - 1) % cap) as usize;
            let l = &self.ring[at / PER_LINE];
            let (word, data) = if at.is_multiple_of(PER_LINE) {
                (&l.word, &l.data[0])
            } else {
                let k = at % PER_LINE;
                (&l.data[2 * k - 1], &l.data[2 * k])
            };
            if me == 0 {
                while seen + cap < n {
                    seen = self.taken[1].word.load(Ordering::Acquire);
                    if seen + cap < n {
                        std::hint::spin_loop();
                    }
                }
                data.store(i as u64, Ordering::Relaxed);
                word.store(n, Ordering::Release);
            } else {
                while word.load(Ordering::Acquire) != n {
                    std::hint::spin_loop();
                }
                sink ^= data.load(Ordering::Relaxed);
                if at % PER_LINE == PER_LINE - 1 || i + 1 == calls {
                    self.taken[1].word.store(n, Ordering::Release);
                }
            }
        }
        sink
    }

    /// The smallest root-first barrier, back to back: one count per side, side 0 waits
    /// for side 1's and then raises its own, which side 1 waits for.
    fn two_lines(&self, me: usize, calls: usize, round: usize) {
        let (mine, theirs) = (&self.counts[me].word, &self.counts[1 - me].word);
        for i in 0..calls {
            let v = (round * calls + i) as u64 + 1;
            if me == 0 {
                while theirs.load(Ordering::Acquire) < v {
                    std::hint::spin_loop();
                }
                mine.store(v, Ordering::Release);
            } else {
                mine.store(v, Ordering::Release);
                while theirs.load(Ordering::Acquire) < v {
                    std::hint::spin_loop();
                }
            }
        }
    }

    /// One line, written in turn: call `i` of round `round` stores a value of its own,
    /// which the other side waits for.
    fn pingpong(&self, me: usize, calls: usize, round: usize) {
        let w = &self.ball.word;
        for i in 0..calls {
            let v = (round * calls + i) as u64 + 1;
            if i % 2 == me {
                w.store(v, Ordering::Release);
            } else {
                while w.load(Ordering::Acquire) != v {
                    std::hint::spin_loop();
                }
            }
        }
    }
}

fn pin(core: usize) -> Result<()> {
    let mut set = CpuSet::new();
    set.set(core).context("core number")?;
    sched_setaffinity(Pid::from_raw(0), &set).with_context(|| format!("pinning to core {core}"))
}

/// One side: pinned, attached to the segment, then every layer `rounds` times, each
/// measurement started together with the other side. Returns ns per call, by layer.
fn side(
    me: usize,
    args: &Args,
    seg: Segment,
    minimal: &Minimal,
    start: &std::sync::Barrier,
) -> Result<Vec<Vec<f64>>> {
    pin(args.cores[me])?;
    let settings = Settings::default();
    let root_first = Settings::from_pairs(&[("barrier", "root-first")])?;
    let (view, mut links) = pair_side(me, seg, &settings);
    let mut buf = vec![0u8; args.bytes];
    let sum = topo_runtime::combine::sum_i64();
    let mut scratch = topo_runtime::reduce::Scratch::default();
    let mut times = vec![Vec::new(); LAYERS.len()];
    for round in 0..args.rounds {
        for (k, layer) in LAYERS.iter().enumerate() {
            start.wait();
            let t0 = Instant::now();
            match *layer {
                "pingpong" => minimal.pingpong(me, args.calls, round),
                "twolines" => minimal.two_lines(me, args.calls, round),
                "minimal" => {
                    std::hint::black_box(minimal.run(me, args.calls));
                }
                "stream-minimal" => {
                    std::hint::black_box(minimal.stream_minimal(me, args.calls));
                }
                "stream-counter" => {
                    std::hint::black_box(minimal.stream_counter(me, args.calls, round));
                }
                "stream-ring" => {
                    std::hint::black_box(minimal.stream_ring(me, args.calls, round));
                }
                "stream-shm" => {
                    let t = links.shm.as_mut().context("queues")?;
                    for _ in 0..args.calls {
                        if me == 0 {
                            t.send(&[1], &buf)?;
                        } else {
                            t.recv(0, &mut buf)?;
                        }
                    }
                }
                "stream-bcast" => {
                    for _ in 0..args.calls {
                        topo_runtime::bcast::bcast(&view, &mut links, &settings, 0, &mut buf)?;
                    }
                }
                "shm" => {
                    let t = links.shm.as_mut().context("queues")?;
                    for i in 0..args.calls {
                        let root = (i % 2) as u32;
                        if root == me as u32 {
                            t.send(&[1 - root], &buf)?;
                        } else {
                            t.recv(root, &mut buf)?;
                        }
                    }
                }
                "bcast" => {
                    for i in 0..args.calls {
                        let root = (i % 2) as u32;
                        topo_runtime::bcast::bcast(&view, &mut links, &settings, root, &mut buf)?;
                    }
                }
                "barrier" | "rootfirst" => {
                    let s = if *layer == "barrier" {
                        &settings
                    } else {
                        &root_first
                    };
                    for _ in 0..args.calls {
                        topo_runtime::barrier::barrier(&view, &mut links, s)?;
                    }
                }
                _ => {
                    let len = args.bytes.div_ceil(8) * 8;
                    let (send, mut recv) = (vec![1u8; len], vec![0u8; len]);
                    for i in 0..args.calls {
                        let root = (i % 2) as u32;
                        let mine = (root == me as u32).then_some(&mut recv[..]);
                        topo_runtime::reduce::reduce(
                            &view,
                            &mut links,
                            &settings,
                            root,
                            Some(&send),
                            mine,
                            &sum,
                            &mut scratch,
                        )?;
                    }
                }
            }
            times[k].push(t0.elapsed().as_secs_f64() * 1e9 / args.calls as f64);
        }
    }
    Ok(times)
}

/// Side `me` of the pair: its view of a one-node job of two ranks and its queues.
fn pair_side(me: usize, seg: Segment, settings: &Settings) -> (View, Links<NoNetwork>) {
    let view = View {
        rank: me as u32,
        size: 2,
        levels: vec![Level {
            name: topo_runtime::LevelName::Node,
            members: vec![0, 1],
            me,
            intra: true,
        }],
        top: Some(topo_runtime::LevelName::Node),
        pipeline: false,
    };
    let shm = ShmTransport::new(seg, me, vec![0, 1], "this node".into(), settings.spin);
    let links = Links::new(&view, vec![0, 1], Some(shm), NoNetwork);
    (view, links)
}

/// `--one-thread`: both sides of `layer` in turn, `calls` times, the root alternating;
/// the side that only sends goes first, so nothing waits.
fn one_thread(args: &Args, layer: &str, segs: [Segment; 2]) -> Result<()> {
    let settings = Settings::default();
    let [first, second] = segs;
    let mut sides = [
        pair_side(0, first, &settings),
        pair_side(1, second, &settings),
    ];
    let sum = topo_runtime::combine::sum_i64();
    let mut scratch = topo_runtime::reduce::Scratch::default();
    let len = args.bytes.div_ceil(8).max(1) * 8;
    // Buffers made once, so that the count is the layer's and not the harness's.
    let (mut data, mut root_buf, mut got) = (vec![7u8; len], vec![0u8; len], vec![0u8; len]);
    for i in 0..args.calls {
        let root = i % 2;
        data[..8].copy_from_slice(&(i as u64).to_ne_bytes());
        match layer {
            "shm" => {
                let [(_, a), (_, b)] = &mut sides;
                let (tx, rx) = if root == 0 { (a, b) } else { (b, a) };
                let t = tx.shm.as_mut().context("queues")?;
                t.send(&[1 - root as u32], &data)?;
                rx.shm
                    .as_mut()
                    .context("queues")?
                    .recv(root as u32, &mut got)?;
            }
            "bcast" => {
                root_buf.copy_from_slice(&data);
                for me in [root, 1 - root] {
                    let (view, links) = &mut sides[me];
                    let buf = if me == root { &mut root_buf } else { &mut got };
                    topo_runtime::bcast::bcast(view, links, &settings, root as u32, buf)?;
                }
            }
            _ => {
                // Each side contributes `data`: the root gets twice each 8-byte word.
                for me in [1 - root, root] {
                    let (view, links) = &mut sides[me];
                    let recv = (me == root).then_some(&mut got[..]);
                    let (r, send) = (root as u32, Some(&data[..]));
                    topo_runtime::reduce::reduce(
                        view,
                        links,
                        &settings,
                        r,
                        send,
                        recv,
                        &sum,
                        &mut scratch,
                    )?;
                }
                let word = |b: &[u8], k: usize| {
                    u64::from_ne_bytes(b[k..k + 8].try_into().expect("8 bytes"))
                };
                let last = len - 8;
                anyhow::ensure!(
                    word(&got, 0) == word(&data, 0).wrapping_mul(2)
                        && word(&got, last) == word(&data, last).wrapping_mul(2),
                    "reduce {i}: wrong result"
                );
                continue;
            }
        }
        anyhow::ensure!(got == data, "{layer} {i}: wrong data");
    }
    println!(
        "{layer}: {} calls of {len} bytes in one thread, every result right",
        args.calls
    );
    Ok(())
}

fn main() -> Result<()> {
    let args = Args::parse();
    anyhow::ensure!(
        args.calls % 2 == 0,
        "--calls must be even (the root alternates)"
    );
    // Checked here, before either side starts: a side that failed to pin would leave the
    // other waiting for it.
    let settings = Settings::default();
    let layout = Layout::new(2, settings.slots as usize, settings.fragment as usize);
    let path = format!("/dev/shm/topo-run.queue-floor.{}", std::process::id());
    let first = Segment::create(&path, layout, 0).context("creating the segment")?;
    let second = Segment::attach(&path, layout, 0).context("attaching the segment")?;
    first.reserve_queue(0)?;
    second.reserve_queue(1)?;
    first.unlink()?;
    if let Some(layer) = &args.one_thread {
        // A side that had to wait for the other would wait for ever in one thread.
        anyhow::ensure!(
            (1..=ONE_THREAD_MAX).contains(&args.bytes),
            "--one-thread plays both sides in turn, so a message must go through the \
             queues without waiting: 1 to {ONE_THREAD_MAX} bytes"
        );
        return one_thread(&args, layer, [first, second]);
    }
    let allowed = sched_getaffinity(Pid::from_raw(0)).context("reading this process's cores")?;
    for &c in &args.cores {
        anyhow::ensure!(
            allowed.is_set(c).unwrap_or(false),
            "core {c} is not one this process may run on; pick two with --cores A B"
        );
    }
    anyhow::ensure!(
        args.cores[0] != args.cores[1],
        "--cores needs two different cores"
    );
    let minimal = Minimal::new();
    let start = std::sync::Barrier::new(2);
    let times = std::thread::scope(|s| {
        let other = s.spawn(|| side(1, &args, second, &minimal, &start));
        let mine = side(0, &args, first, &minimal, &start);
        let theirs = other.join().expect("the second side panicked");
        mine.and_then(|m| theirs.map(|t| (m, t)))
    })?;
    println!(
        "{} bytes, cores {} and {}, median of {} rounds of {} calls, ns per call:",
        args.bytes, args.cores[0], args.cores[1], args.rounds, args.calls
    );
    // Both sides time the same calls; the slower one counts.
    let slower: Vec<Vec<f64>> = (0..LAYERS.len())
        .map(|k| {
            let (a, b) = (&times.0[k], &times.1[k]);
            a.iter().zip(b).map(|(x, y)| x.max(*y)).collect()
        })
        .collect();
    for (k, layer) in LAYERS.iter().enumerate() {
        // Against the same round's ping-pong, which moves with the machine's state.
        let ratios: Vec<f64> = slower[k]
            .iter()
            .zip(&slower[0])
            .map(|(t, p)| t / p)
            .collect();
        println!(
            "{layer:>14} {:8.1}  ({:.2} x pingpong, median of the rounds' ratios)",
            median(&slower[k]),
            median(&ratios)
        );
    }
    Ok(())
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[s.len() / 2]
}
