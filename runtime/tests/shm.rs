//! The shared-memory transport across real processes: the test binary re-runs itself as
//! the local ranks of one node (`TOPO_TEST_SHM_ROLE=<local rank>`).

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use topo_hierarchy::Settings;
use topo_hierarchy::settings::BarrierAlg;
use topo_runtime::combine::sum_i64;
use topo_runtime::links::{Links, NoNetwork};
use topo_runtime::reduce::Scratch;
use topo_runtime::transport::shm::{Layout, Segment, ShmTransport};
use topo_runtime::{allreduce, barrier, bcast, reduce};

use crate::sim::{bytes, data, ints, plans, plans_of, sum, view};

const ROLE: &str = "TOPO_TEST_SHM_ROLE";
const PATH: &str = "TOPO_TEST_SHM_PATH";
const SCENARIO: &str = "TOPO_TEST_SHM_SCENARIO";
const RANKS: u32 = 4;

fn settings() -> Settings {
    Settings::from_pairs(&[
        ("slots", "4"),
        ("fragment", "4K"),
        ("chunk", "64K"),
        ("spin", "64"),
    ])
    .unwrap()
}

/// Joins the node's segment as local rank `me` (the leader creates it and removes its name
/// once everyone has attached).
fn join(me: usize, path: &str, s: &Settings) -> Segment {
    let layout = Layout::new(RANKS as usize, s.slots as usize, s.fragment as usize);
    let deadline = Instant::now() + Duration::from_secs(20);
    let seg = if me == 0 {
        Segment::create(path, layout, 0).unwrap()
    } else {
        loop {
            match Segment::attach(path, layout, 0) {
                Ok(seg) => break seg,
                Err(e) if Instant::now() > deadline => panic!("attach: {e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(2)),
            }
        }
    };
    seg.reserve_queue(me).unwrap();
    while (0..RANKS as usize).any(|r| seg.pid(r) == 0) {
        assert!(Instant::now() < deadline, "peers did not attach");
        std::thread::sleep(Duration::from_millis(1));
    }
    if me == 0 {
        seg.unlink().unwrap();
    }
    seg
}

/// The body of one local rank.
fn rank_main(me: usize) -> i32 {
    let path = std::env::var(PATH).unwrap();
    let scenario = std::env::var(SCENARIO).unwrap();
    // "-rf": the barrier's top group meets root-first; "-flat": one group of all ranks.
    let mut s = settings();
    if scenario.ends_with("-rf") {
        s.barrier = Some(BarrierAlg::RootFirst);
    }
    let plans = if scenario.contains("-flat") {
        plans(1, RANKS, 2, "node,world", false)
    } else if scenario.ends_with("-single") {
        // Two NUMA nodes of two ranks: the node level's members are not near each other.
        let job = topo_hierarchy::job_from_str(
            "layout: {nodes: n1, ranks_per_node: 4, hardware: {sockets: 1, numa_per_socket: 2, \
             cores_per_numa: 2}}",
        )
        .unwrap();
        plans_of(&job, None, "numa,socket,node,world")
    } else {
        plans(1, RANKS, 2, "numa,socket,node,world", false)
    };
    let plan = &plans[me];
    let view = view(&plans, plan.rank);
    let seg = join(me, &path, &s);
    let mut shm = ShmTransport::new(seg, me, plan.peers.clone(), plan.node.clone(), s.spin);
    // "-single" scenarios read messages of 2 KiB and more straight from the sender, where
    // the machine lets sibling processes do that (Yama's ptrace_scope 0); elsewhere (1 and
    // up, Ubuntu's default) they test the fallback the runtime takes: every message
    // through the queues. Exit code FALLBACK says which.
    let mut fallback = false;
    if scenario.ends_with("-single") {
        match shm.probe_single_copy() {
            Ok(()) => {
                shm.set_single_copy(Some(2048));
                // The NUMA groups' leaders are not near each other: their reduce's
                // partial results go by single copy too, combined from the sender's buffer.
                let near = plan.near_peers();
                assert_eq!(near.iter().filter(|&&n| n).count(), 2, "{near:?}");
                shm.set_near(near);
            }
            Err(why) => {
                eprintln!(
                    "rank {me}: single copy is not possible here ({why}): testing the queues"
                );
                fallback = true;
            }
        }
    }
    if scenario == "ok" {
        // All four ranks are in one NUMA node here (no level below `node`), so the
        // partners (local ranks 0-1, 2-3) count as near and time a line; a slow one turns
        // every peer far.
        assert!(
            shm.needs_line_time(),
            "nothing is kept before the first measurement"
        );
        let ns = shm
            .check_near(true)
            .unwrap()
            .expect("partners in one group measure");
        assert!(ns.is_finite() && ns > 0.0, "{ns}");
        let far = (0..RANKS as usize).all(|j| !shm.is_near(j));
        assert_eq!(
            far,
            ns > topo_runtime::transport::shm::NEAR_LINE_NS,
            "{ns} ns"
        );
        // The pair measured once: a second check (another context of the same processes,
        // with a segment of its own, which starts from the node's report again) takes the
        // time kept, the leader's for both.
        assert!(!shm.needs_line_time(), "the time is kept");
        let seg2 = join(me, &format!("{path}.again"), &s);
        let mut again = ShmTransport::new(seg2, me, plan.peers.clone(), plan.node.clone(), s.spin);
        assert_eq!(again.check_near(false).unwrap(), Some(ns));
        assert_eq!((0..RANKS as usize).all(|j| !again.is_near(j)), far);
    }
    let mut links = Links::new(&view, plan.peers.clone(), Some(shm), NoNetwork);
    let mut scratch = Scratch::default();
    let op = sum_i64();
    let rank = view.rank;
    if scenario.starts_with("die") {
        barrier::barrier(&view, &mut links, &s).unwrap();
        if rank == 2 {
            std::process::exit(3);
        }
        let mut a = bytes(&data(rank, 1000));
        let err = allreduce::allreduce(&view, &mut links, &s, None, &mut a, &op, &mut scratch)
            .and_then(|()| {
                allreduce::allreduce(&view, &mut links, &s, None, &mut a, &op, &mut scratch)
            });
        return match err {
            Err(e) if e.to_string().contains("rank 2 on node n1 died") => {
                eprintln!("rank {rank}: {e}");
                42
            }
            // A rank that saw the death and exited looks dead to those still waiting on it.
            Err(e @ topo_runtime::Error::PeerDied { .. }) => {
                eprintln!("rank {rank}: {e}");
                43
            }
            other => {
                eprintln!("rank {rank}: unexpected {other:?}");
                1
            }
        };
    }
    if scenario.starts_with("mismatch") {
        // Rank 0 calls one collective and the others another (an erroneous program): the
        // ranks that wait on the odd one out say so instead of waiting forever.
        barrier::barrier(&view, &mut links, &s).unwrap();
        let in_barrier = (rank == 0) != scenario.starts_with("mismatch-rev");
        let r = if in_barrier {
            barrier::barrier(&view, &mut links, &s)
        } else {
            let mut b = vec![7u8; 8];
            bcast::bcast(&view, &mut links, &s, 0, &mut b)
        };
        return match r {
            Ok(()) => {
                // Rank 0's broadcast is done once written; it stays until the others see
                // it (a rank that has exited is reported as dead instead).
                std::thread::sleep(std::time::Duration::from_secs(1));
                0
            }
            Err(e) if e.to_string().contains("called different collectives") => {
                eprintln!("rank {rank}: {e}");
                44
            }
            Err(e @ topo_runtime::Error::PeerDied { .. }) => {
                eprintln!("rank {rank}: {e}");
                43
            }
            Err(e) => {
                eprintln!("rank {rank}: unexpected {e}");
                1
            }
        };
    }
    if scenario == "ok" {
        // Local rank 0 bounces a cache line with each other rank in turn, twice (the second
        // time over the lines the first left behind); the others only answer.
        for _ in 0..2 {
            if me == 0 {
                for j in 1..RANKS {
                    let t = links.shm.as_ref().unwrap().ping_pong(j, 3, 50).unwrap();
                    assert_eq!(t.len(), 3);
                    assert!(t.iter().all(|ns| ns.is_finite() && *ns > 0.0), "{t:?}");
                }
            } else {
                let t = links.shm.as_ref().unwrap().ping_pong(0, 3, 50).unwrap();
                assert!(t.is_empty());
            }
            let alone = links.shm.as_ref().unwrap().ping_pong(me as u32, 3, 50);
            assert!(alone.unwrap().is_empty(), "a rank naming itself");
        }
    }
    // Thousands of small back-to-back calls: any slot-reuse race shows up as a wrong sum.
    // 8 to 72 bytes: fragments in the control lines (up to 56 bytes) and in the slots.
    for i in 0..3000u32 {
        let root = i % RANKS;
        let len = 1 + (i as usize % 9);
        let mut a = bytes(&data(rank + i, len));
        allreduce::allreduce(&view, &mut links, &s, None, &mut a, &op, &mut scratch).unwrap();
        let want: Vec<i64> = (0..RANKS).fold(vec![0; len], |acc, r| {
            acc.iter()
                .zip(data(r + i, len))
                .map(|(x, y)| x.wrapping_add(y))
                .collect()
        });
        assert_eq!(ints(&a), want, "allreduce {i}");
        let mut b = if rank == root {
            bytes(&data(i, len))
        } else {
            vec![0; len * 8]
        };
        bcast::bcast(&view, &mut links, &s, root, &mut b).unwrap();
        assert_eq!(ints(&b), data(i, len), "bcast {i}");
    }
    // A partial result taken onto the receiver's own contribution (a reduce's root), from
    // a near rank (queue fragments) and from a far one (its buffer, by single copy where
    // the scenario has it, from half the 2 KiB threshold: 200 elements are 1600 bytes): 3
    // is near 2, 0 is far from 2 in "-single".
    for (len, from, to) in [
        (100usize, 3u32, 2u32),
        (200, 2, 0),
        (3000, 2, 0),
        (70_000, 2, 0),
    ] {
        use topo_runtime::transport::Transport;
        let t = links.shm.as_mut().unwrap();
        if rank == from {
            t.send_to_combine(to, &bytes(&data(from, len))).unwrap();
        } else if rank == to {
            let own = bytes(&data(to, len));
            let (mut acc, mut tmp) = (vec![0u8; len * 8], vec![0u8; len * 8]);
            t.recv_reduce_onto(from, &mut acc, &own, &mut tmp, &op)
                .unwrap();
            let want: Vec<i64> = data(to, len)
                .iter()
                .zip(data(from, len))
                .map(|(a, b)| a.wrapping_add(b))
                .collect();
            assert_eq!(ints(&acc), want, "onto {len} from {from}");
        }
    }
    // An exchange whose message is taken onto this rank's own contribution (the first
    // step of recursive doubling): near pairs 0-1 and 2-3, through the queues and (in
    // "-single", from 8 KiB) by single copy; then far pairs 0-2 and 1-3 (in "-single"),
    // by single copy from half the 2 KiB threshold (200 elements: 1600 bytes).
    let pairs = [7usize, 100, 3000, 70_000].map(|len| (len, rank ^ 1));
    let far = [7usize, 100, 200, 500, 3000].map(|len| (len, rank ^ 2));
    for (len, partner) in pairs.into_iter().chain(far) {
        use topo_runtime::transport::Transport;
        let t = links.shm.as_mut().unwrap();
        let own = bytes(&data(rank, len));
        let (mut acc, mut tmp) = (vec![0u8; len * 8], vec![0u8; len * 8]);
        t.sendrecv_onto(partner, &own, partner, &mut acc, &own, &mut tmp, &op)
            .unwrap();
        let want: Vec<i64> = data(rank, len)
            .iter()
            .zip(data(partner, len))
            .map(|(a, b)| a.wrapping_add(b))
            .collect();
        assert_eq!(ints(&acc), want, "sendrecv onto {len} with {partner}");
    }
    // The flat Allreduce forms as schedules, out of place, with messages that go by single
    // copy in "-single" (a send there completes only once its receiver has read it, which
    // the sim transport does not show: a send whose receive sits in a later round hangs).
    {
        use topo_hierarchy::remap::{self, halving::HalvingOrder, partition::Placement};
        use topo_runtime::nonblocking::{Engine, iallreduce};
        let place = Placement::nodes(&vec![0; RANKS as usize]);
        let ring = remap::ring_peers(&remap::ring_positions(&place), rank).unwrap();
        let halving = HalvingOrder::new(&place).peers(rank).unwrap();
        for len in [7usize, 3000, 70_000] {
            for (b, tmp) in [
                (iallreduce::build_ring(&ring, 8, true, len * 8), 0),
                (
                    iallreduce::build_rabenseifner(&halving, 8, true, len * 8, len * 8),
                    0,
                ),
                // In pieces (70,000 elements: eight of 70,000 bytes, by single copy).
                (
                    iallreduce::build_rabenseifner(&halving, 8, true, len * 8, 64 << 10),
                    0,
                ),
                iallreduce::build_recursive_doubling(&halving, true, len * 8),
            ] {
                let mine = bytes(&data(rank, len));
                let mut got = vec![0u8; len * 8];
                let sched = crate::nonblocking::schedule(
                    "MPI_Iallreduce",
                    b,
                    Some(&mine),
                    Some(&mut got),
                    0,
                    tmp,
                );
                let mut engine = Engine::default();
                engine.start(0, sched, &mut links).unwrap();
                crate::nonblocking::finish(&mut engine, &mut links);
                assert_eq!(ints(&got), sum(RANKS, len), "flat allreduce of {len}");
            }
        }
    }
    // One writer, small messages to two readers in turn: each reader's next message is two
    // slots on, never where its hint says, so a small receive's first look at the hinted
    // slot finds nothing and the scan must take over; lengths cross the inline limit (56
    // bytes) both ways, and every fifth message goes to both readers at once.
    {
        use topo_runtime::transport::Transport;
        let t = links.shm.as_mut().unwrap();
        for i in 0..400u32 {
            let len = 1 + (i as usize * 7) % 12; // 1-12 elements: 8-96 bytes
            let to: &[u32] = match i % 5 {
                4 => &[1, 2],
                k if k % 2 == 0 => &[1],
                _ => &[2],
            };
            if rank == 0 {
                t.send(to, &bytes(&data(i, len))).unwrap();
            } else if to.contains(&rank) {
                let mut got = vec![0u8; len * 8];
                t.recv(0, &mut got).unwrap();
                assert_eq!(ints(&got), data(i, len), "message {i} to {rank}");
            }
        }
    }
    // Exchanges in a row between pairs 0-1 and 2-3 whose lengths cross the inline limit
    // both ways: a small one goes as one inline entry each way, a larger one by the
    // general exchange, and after a larger one the partner's next small message is not
    // where the first look expects it.
    {
        use topo_runtime::transport::Transport;
        let t = links.shm.as_mut().unwrap();
        let partner = rank ^ 1;
        for i in 0..300u32 {
            let len = [1usize, 7, 8, 3, 100, 7][i as usize % 6];
            let mut got = vec![0u8; len * 8];
            t.sendrecv(partner, &bytes(&data(rank + 4 * i, len)), partner, &mut got)
                .unwrap();
            assert_eq!(
                ints(&got),
                data(partner + 4 * i, len),
                "exchange {i} with {partner}"
            );
        }
    }
    // Large messages stream through the 4 x 4 KiB queues in fragments and chunks.
    for len in [511, 512, 513, 131_072 + 1, 393_216] {
        let root = RANKS - 1;
        let mine = bytes(&data(rank, len));
        let mut r = vec![0u8; len * 8];
        let recv = (rank == root).then_some(&mut r[..]);
        reduce::reduce(
            &view,
            &mut links,
            &s,
            root,
            Some(&mine),
            recv,
            &op,
            &mut scratch,
        )
        .unwrap();
        if rank == root {
            assert_eq!(ints(&r), sum(RANKS, len), "reduce {len}");
        }
        let mut a = mine.clone();
        allreduce::allreduce(&view, &mut links, &s, None, &mut a, &op, &mut scratch).unwrap();
        assert_eq!(ints(&a), sum(RANKS, len), "allreduce {len}");
        let mut b = if rank == 1 {
            mine.clone()
        } else {
            vec![0; len * 8]
        };
        bcast::bcast(&view, &mut links, &s, 1, &mut b).unwrap();
        assert_eq!(ints(&b), data(1, len), "bcast {len}");
    }
    // Nobody leaves a barrier before everyone has entered it: each rank leaves a mark,
    // arriving in a different order each time, and looks for everyone's after the barrier.
    // Rounds 40 to 79 meet root-first at the top (the counts of both forms move together,
    // so they mix).
    let mark = |round: u32, r: u32| format!("{path}.barrier{round}.{r}");
    let root_first = Settings {
        barrier: Some(BarrierAlg::RootFirst),
        ..s.clone()
    };
    for round in 0..80u32 {
        let late = (rank + round) % RANKS;
        std::thread::sleep(std::time::Duration::from_micros(u64::from(late) * 300));
        std::fs::write(mark(round, rank), b"").unwrap();
        let how = if round < 40 { &s } else { &root_first };
        barrier::barrier(&view, &mut links, how).unwrap();
        for r in 0..RANKS {
            assert!(
                std::path::Path::new(&mark(round, r)).exists(),
                "rank {rank} left barrier {round} before rank {r} entered it"
            );
        }
    }
    barrier::barrier(&view, &mut links, &s).unwrap();
    for round in 0..80u32 {
        std::fs::remove_file(mark(round, rank)).unwrap();
    }
    // Lent buffers (a one-node Gather's large blocks): rank 0 lends each other rank its
    // place, which that rank writes straight into where the message goes by single copy
    // (in "-single", from its threshold of 2 KiB: 3000 and 70,000 bytes from every rank) or
    // sends through the queues; rank 0 copies its own block meanwhile. Then the same
    // through the nonblocking forms, each polled until done (the writers first poll
    // before rank 0 has lent anything, as a schedule's start may).
    for (len, polled) in [7usize, 3000, 70_000]
        .into_iter()
        .flat_map(|l| [(l, false), (l, true)])
    {
        use topo_runtime::transport::{Transfer, Transport};
        let t = links.shm.as_mut().unwrap();
        let poll = |mut step: Box<dyn FnMut() -> bool + '_>| while !step() {};
        if rank == 0 {
            let mut all = vec![0u8; len * RANKS as usize];
            let mut parts: Vec<&mut [u8]> = all.chunks_mut(len).collect();
            if polled {
                std::thread::sleep(Duration::from_millis(2));
            }
            for (r, part) in (1..).zip(parts[1..].iter_mut()) {
                if polled {
                    let mut tr = Transfer::default();
                    poll(Box::new(|| t.poll_lend(&mut tr, r, part).unwrap()));
                } else {
                    t.lend(r, part).unwrap();
                }
            }
            parts[0].copy_from_slice(&vec![0u8; len]);
            for (r, part) in (1..).zip(parts[1..].iter_mut()) {
                if polled {
                    let mut tr = Transfer::default();
                    poll(Box::new(|| t.poll_wait_lent(&mut tr, r, part).unwrap()));
                } else {
                    t.wait_lent(r, part).unwrap();
                }
            }
            for (r, part) in all.chunks(len).enumerate() {
                let want: Vec<u8> = (0..len).map(|i| (i * 7 + r) as u8).collect();
                let want = if r == 0 { vec![0u8; len] } else { want };
                assert_eq!(part, want, "lent {len} bytes to rank {r}");
            }
        } else {
            let block: Vec<u8> = (0..len).map(|i| (i * 7 + rank as usize) as u8).collect();
            if polled {
                let mut tr = Transfer::default();
                poll(Box::new(|| t.poll_write_into(&mut tr, 0, &block).unwrap()));
            } else {
                t.write_into(0, &block).unwrap();
            }
        }
    }
    // A writer given a buffer of another length than its message's says so and writes
    // nothing (here it then tells the lender anyway, which would wait otherwise).
    if scenario.ends_with("-single") && !fallback {
        use topo_runtime::transport::Transport;
        let t = links.shm.as_mut().unwrap();
        if rank == 0 {
            let mut buf = vec![5u8; 70_000];
            t.lend(1, &mut buf).unwrap();
            t.wait_lent(1, &mut buf).unwrap();
            assert!(buf.iter().all(|&b| b == 5), "nothing written");
        } else if rank == 1 {
            let e = t.write_into(0, &[1u8; 70_008]).unwrap_err();
            assert!(
                e.to_string()
                    .contains("rank 0 lent a buffer of 70000 bytes for a message of 70008"),
                "{e}"
            );
            t.send(&[0], &[]).unwrap();
        }
    }
    // A small receive whose length differs from the message's is named, not misread (its
    // first look at the hinted slot leaves the message to the general path), even though
    // rank 0 exits at once after it: the length is checked before the writer's life (a
    // 16-byte record may start on the ring's next line, where an 8-byte one would not).
    // Last: the message stays in the queue.
    {
        use topo_runtime::transport::Transport;
        let t = links.shm.as_mut().unwrap();
        if rank == 0 {
            t.send(&[1], &bytes(&data(1, 2))).unwrap();
        } else if rank == 1 {
            let mut got = vec![0u8; 8];
            let e = t.recv(0, &mut got).unwrap_err();
            assert!(
                e.to_string()
                    .contains("expected 8 bytes from rank 0 but got 16"),
                "{e}"
            );
        }
    }
    if fallback { FALLBACK } else { 0 }
}

/// The exit code of a rank that passed a "-single" scenario without single copy.
const FALLBACK: i32 = 10;

/// Entry point of the child processes (skipped in a normal run).
#[test]
#[ignore = "run by the shm tests as a child process"]
fn shm_child() {
    let me: usize = std::env::var(ROLE).unwrap().parse().unwrap();
    std::process::exit(rank_main(me));
}

fn spawn(scenario: &str, path: &str) -> Vec<Child> {
    spawn_with(scenario, path, &[])
}

fn spawn_with(scenario: &str, path: &str, env: &[(&str, &str)]) -> Vec<Child> {
    let exe = std::env::current_exe().unwrap();
    (0..RANKS)
        .map(|r| {
            Command::new(&exe)
                .args(["shm::shm_child", "--exact", "--ignored", "--nocapture"])
                .env(ROLE, r.to_string())
                .env(PATH, path)
                .env(SCENARIO, scenario)
                .envs(env.iter().copied())
                .spawn()
                .unwrap()
        })
        .collect()
}

/// Waits for every child (killing all after 60 s); returns their exit codes.
fn wait_all(mut children: Vec<Child>) -> Vec<Option<i32>> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut codes = vec![None; children.len()];
    let mut done = vec![false; children.len()];
    while done.iter().any(|d| !d) {
        for (i, c) in children.iter_mut().enumerate() {
            if !done[i]
                && let Some(st) = c.try_wait().unwrap()
            {
                codes[i] = st.code();
                done[i] = true;
            }
        }
        if Instant::now() > deadline {
            for c in &mut children {
                let _ = c.kill();
            }
            panic!("shm children hung: {codes:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    codes
}

fn test_path(tag: &str) -> String {
    format!("/dev/shm/topo-run-test.{}.{tag}", std::process::id())
}

#[test]
fn four_processes_agree_on_every_collective() {
    let path = test_path("ok");
    let codes = wait_all(spawn("ok", &path));
    assert_eq!(codes, vec![Some(0); RANKS as usize]);
    assert!(!std::path::Path::new(&path).exists(), "{path} left behind");
}

#[test]
fn four_processes_agree_with_single_copy() {
    let path = test_path("ok-single");
    let codes = wait_all(spawn("ok-single", &path));
    if codes == vec![Some(FALLBACK); RANKS as usize] {
        eprintln!(
            "note: this machine forbids process_vm_readv between sibling processes \
             (/proc/sys/kernel/yama/ptrace_scope >= 1): tested the queue fallback instead"
        );
    } else {
        assert_eq!(codes, vec![Some(0); RANKS as usize]);
    }
    assert!(!std::path::Path::new(&path).exists(), "{path} left behind");
}

#[test]
fn where_single_copy_is_forbidden_the_queues_carry_everything() {
    // As on a machine whose ptrace_scope forbids process_vm_readv (simulated).
    let path = test_path("no-single");
    let codes = wait_all(spawn_with(
        "ok-single",
        &path,
        &[(topo_runtime::fault::FAULT_ENV, "no-single-copy")],
    ));
    assert_eq!(codes, vec![Some(FALLBACK); RANKS as usize]);
    assert!(!std::path::Path::new(&path).exists(), "{path} left behind");
}

#[test]
fn a_dead_peer_is_named_and_nobody_spins_forever() {
    dead_peer("die");
}

#[test]
fn a_dead_peer_is_named_during_single_copy() {
    dead_peer("die-single");
}

fn dead_peer(scenario: &str) {
    let path = test_path(scenario);
    let t = Instant::now();
    let codes = wait_all(spawn(scenario, &path));
    assert_eq!(codes[2], Some(3));
    assert!(codes.contains(&Some(42)), "nobody named rank 2: {codes:?}");
    assert!(
        codes.iter().all(|c| matches!(c, Some(3 | 42 | 43))),
        "{codes:?}"
    );
    assert!(t.elapsed() < Duration::from_secs(30));
    assert!(!std::path::Path::new(&path).exists(), "{path} left behind");
}

#[test]
fn ranks_in_different_collectives_are_told_not_left_waiting() {
    // "mismatch": rank 0 in a barrier, the others in a broadcast from it;
    // "mismatch-rev": rank 0 broadcasts (and is done), the others are in a barrier.
    // A rank that waits on the odd one out says so (exit 44 here; the runtime aborts the
    // job, which ends the ranks still waiting, as the test does).
    // The same with the barrier's top group root-first, in a one-group job (where the
    // others wait on rank 0's release) and in a hierarchical one.
    for scenario in [
        "mismatch",
        "mismatch-rev",
        "mismatch-flat-rf",
        "mismatch-rev-flat-rf",
        "mismatch-rf",
        "mismatch-rev-rf",
    ] {
        let path = test_path(scenario);
        let mut children = spawn(scenario, &path);
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut codes = vec![None; children.len()];
        while !codes.contains(&Some(44)) && Instant::now() < deadline {
            for (i, c) in children.iter_mut().enumerate() {
                if codes[i].is_none() {
                    codes[i] = c.try_wait().unwrap().map(|st| st.code().unwrap_or(-1));
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        for c in &mut children {
            let _ = c.kill();
            let _ = c.wait();
        }
        assert!(
            codes.contains(&Some(44)),
            "{scenario}: nobody noticed: {codes:?}"
        );
        assert!(
            codes.iter().all(|c| matches!(c, None | Some(0 | 43 | 44))),
            "{scenario}: {codes:?}"
        );
        assert!(!std::path::Path::new(&path).exists(), "{path} left behind");
    }
}

#[test]
fn a_stale_segment_does_not_block_a_new_one() {
    let path = test_path("stale");
    std::fs::write(&path, b"left by a crashed job").unwrap();
    let layout = Layout::new(2, 2, 64);
    let seg = Segment::create(&path, layout, 0).unwrap();
    assert_eq!(
        std::fs::metadata(&path).unwrap().len() as usize,
        layout.total()
    );
    seg.unlink().unwrap();
}

#[test]
fn a_segment_in_use_is_never_removed_by_another_launch() {
    let path = test_path("live");
    let layout = Layout::new(2, 2, 64);
    // Another launch's leader created the segment, and its peer attached; the name is
    // still there (setup is under way).
    let first = Segment::create(&path, layout, 0).unwrap();
    let peer = Segment::attach(&path, layout, 0).unwrap();
    first.reserve_queue(0).unwrap();
    let e = Segment::create(&path, layout, 0).unwrap_err();
    assert!(matches!(e, topo_runtime::Error::ShmInUse { .. }), "{e}");
    assert!(e.to_string().contains("in use by another launch"), "{e}");
    // The first launch's segment is intact: its name still leads to it.
    let again = Segment::attach(&path, layout, 0).unwrap();
    assert_eq!(again.pid(0), std::process::id() as i32);
    // No temporary name is left.
    let dir = std::path::Path::new(&path).parent().unwrap();
    let base = std::path::Path::new(&path)
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let leftovers: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&base) && n != &base)
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    first.unlink().unwrap();
    drop((first, peer, again));
    // Once nobody uses it, a segment of that name is stale and replaced.
    std::fs::write(&path, b"stale").unwrap();
    Segment::create(&path, layout, 0).unwrap().unlink().unwrap();
}

#[test]
fn ranks_planned_differently_cannot_attach() {
    let path = test_path("nodeplan");
    let layout = Layout::new(2, 2, 64);
    let leader = Segment::create(&path, layout, 0xaaaa).unwrap();
    let e = Segment::attach(&path, layout, 0xbbbb).unwrap_err();
    assert!(matches!(e, topo_runtime::Error::NodePlans { .. }), "{e}");
    assert!(e.to_string().contains("different intra-node groups"), "{e}");
    Segment::attach(&path, layout, 0xaaaa).unwrap();
    leader.unlink().unwrap();
}
