//! The node's lanes (`transport::shm::lanes`): contexts that share one lane claim it per
//! collective, agree on every claim, and never mix their messages. Threads stand in for
//! the node's ranks; each maps the pool on its own, as a process does.

use std::collections::BTreeMap;
use std::sync::{Arc, Barrier, Mutex};

use topo_hierarchy::{RankPlan, Settings};
use topo_runtime::combine::sum_i64;
use topo_runtime::links::{Links, NoNetwork};
use topo_runtime::reduce::Scratch;
use topo_runtime::transport::shm::lanes::Pool;
use topo_runtime::transport::shm::{Layout, ShmTransport};
use topo_runtime::view::View;
use topo_runtime::{allreduce, barrier, bcast};

use crate::sim::{bytes, data, ints, plans, sum, view};

const RANKS: usize = 4;
const CALLS: u64 = 300;

fn settings() -> Settings {
    Settings::from_pairs(&[("slots", "4"), ("fragment", "4K"), ("spin", "64")]).unwrap()
}

/// One thread's part in a context: its plan, view, links and end of the lane's queues.
struct Member {
    ctx: &'static str,
    record: usize,
    plans: Vec<RankPlan>,
    me: u32,
    view: View,
    links: Links<NoNetwork>,
    transport: Option<ShmTransport>,
    calls: u64,
}

impl Member {
    fn new(ctx: &'static str, record: usize, k: u32, me: u32, pool: &Pool) -> Member {
        let plans = plans(1, k, 1, "node,world", false);
        let plan = &plans[me as usize];
        let view = view(&plans, me);
        let pids = vec![std::process::id() as i32; k as usize];
        let mut t = ShmTransport::for_lane(
            pool.lane(0).clone(),
            me as usize,
            plan.peers.clone(),
            pids,
            plan.node.clone(),
            64,
        );
        // Threads of one process can read each other's buffers: large messages go by
        // single copy, small ones through the queues.
        t.set_single_copy(Some(2048));
        let links = Links::new(&view, plan.peers.clone(), None, NoNetwork);
        Member {
            ctx,
            record,
            me,
            view,
            links,
            transport: Some(t),
            calls: 0,
            plans,
        }
    }

    /// One blocking collective: the claim, then on a lane a broadcast, an allreduce or a
    /// barrier (by the call's number), checked, then the release. Returns the decision.
    fn call(&mut self, pool: &Pool, s: &Settings, arrived: &Arrivals) -> Option<usize> {
        self.calls += 1;
        let n = self.calls;
        let k = self.plans.len();
        let lane = if self.me == 0 {
            pool.decide(self.record, n, k, 64, || Ok(())).unwrap()
        } else {
            pool.learn(self.record, n, 64, || Ok(())).unwrap()
        };
        let j = lane?;
        let mut t = self.transport.take().unwrap();
        t.rebind(pool.lane(j).clone());
        self.links.shm = Some(t);
        let len = (n as usize * 37) % 700 + 1;
        match n % 3 {
            0 => {
                let root = (n % k as u64) as u32;
                let want = data(root + 100 * n as u32, len);
                let mut buf = if self.me == root {
                    bytes(&want)
                } else {
                    vec![0; len * 8]
                };
                bcast::bcast(&self.view, &mut self.links, s, root, &mut buf).unwrap();
                assert_eq!(ints(&buf), want, "{} call {n}: broadcast", self.ctx);
            }
            1 => {
                let mine = bytes(&data(self.me, len));
                let mut out = vec![0; mine.len()];
                let op = sum_i64();
                let mut scratch = Scratch::default();
                allreduce::allreduce(
                    &self.view,
                    &mut self.links,
                    s,
                    Some(&mine),
                    &mut out,
                    &op,
                    &mut scratch,
                )
                .unwrap();
                assert_eq!(
                    ints(&out),
                    sum(k as u32, len),
                    "{} call {n}: allreduce",
                    self.ctx
                );
            }
            _ => {
                // Nobody leaves the barrier before everyone has reached it (stale counts
                // from an earlier claim of the lane would let a member through early).
                *arrived.lock().unwrap().entry((self.ctx, n)).or_default() += 1;
                barrier::barrier(&self.view, &mut self.links, s).unwrap();
                let here = arrived.lock().unwrap()[&(self.ctx, n)];
                assert_eq!(here, k, "{} call {n}: left the barrier early", self.ctx);
            }
        }
        self.transport = self.links.shm.take();
        let signaled = self.transport.as_ref().unwrap().has_signaled();
        pool.release(j, k, signaled);
        Some(j)
    }
}

type Log = Mutex<BTreeMap<(&'static str, u64), Vec<Option<usize>>>>;
type Arrivals = Mutex<BTreeMap<(&'static str, u64), usize>>;

#[test]
fn contexts_share_one_lane_and_agree_on_every_claim() {
    let prefix = format!("/dev/shm/topo-run-test.{}.lanes", std::process::id());
    let s = settings();
    let layout = Layout::new(RANKS, s.slots as usize, s.fragment as usize);
    // Thread 0 creates the pool and claims the records of A (ranks 0, 1) and C (all);
    // thread 2 claims B's (ranks 2, 3). The barriers stand in for the agreements over MPI.
    let made = Pool::create(&prefix, layout, 0, 1).unwrap();
    let (ra, rc) = (made.claim_record(2).unwrap(), made.claim_record(4).unwrap());
    let agree = Arc::new(Barrier::new(RANKS));
    let rb = Arc::new(Mutex::new(None));
    let log: Arc<Log> = Arc::default();
    let arrived: Arc<Arrivals> = Arc::default();
    let made = Arc::new(Mutex::new(Some(made)));
    let threads: Vec<_> = (0..RANKS)
        .map(|t| {
            let (agree, rb, log, made, prefix, s, arrived) = (
                agree.clone(),
                rb.clone(),
                log.clone(),
                made.clone(),
                prefix.clone(),
                s.clone(),
                arrived.clone(),
            );
            std::thread::spawn(move || {
                let pool = match t {
                    0 => made.lock().unwrap().take().unwrap(),
                    _ => Pool::attach(&prefix, layout, 0).unwrap(),
                };
                pool.reserve(t).unwrap();
                if t == 2 {
                    *rb.lock().unwrap() = Some(pool.claim_record(2).unwrap());
                }
                agree.wait();
                if t == 0 {
                    pool.unlink().unwrap();
                }
                let rb = rb.lock().unwrap().unwrap();
                let mut pair = match t {
                    0 | 1 => Member::new("A", ra, 2, t as u32, &pool),
                    _ => Member::new("B", rb, 2, t as u32 - 2, &pool),
                };
                let mut all = Member::new("C", rc, 4, t as u32, &pool);
                let mut on_lane = 0;
                for _ in 0..CALLS {
                    for m in [&mut pair, &mut all] {
                        let d = m.call(&pool, &s, &arrived);
                        on_lane += u64::from(d.is_some());
                        log.lock()
                            .unwrap()
                            .entry((m.ctx, m.calls))
                            .or_default()
                            .push(d);
                    }
                }
                agree.wait();
                assert!(pool.is_free(0), "the lane is free once every call is over");
                // Each member leaves the records of its contexts.
                pool.leave_record(pair.record);
                pool.leave_record(all.record);
                agree.wait();
                if t == 0 {
                    // Every record is free again: the next claim takes the first.
                    assert_eq!(pool.claim_record(2), Some(0));
                }
                on_lane
            })
        })
        .collect();
    let on_lane: Vec<u64> = threads.into_iter().map(|h| h.join().unwrap()).collect();
    let log = log.lock().unwrap();
    assert_eq!(log.len(), 3 * CALLS as usize);
    for ((ctx, call), ds) in log.iter() {
        let members = if *ctx == "C" { 4 } else { 2 };
        assert_eq!(ds.len(), members, "{ctx} call {call}");
        assert!(
            ds.iter().all(|d| *d == ds[0]),
            "{ctx} call {call}: the members decided {ds:?}"
        );
    }
    // C's calls run alone (all four ranks are in them); A's and B's compete for the lane.
    let c_on_lane = log
        .iter()
        .filter(|((c, _), d)| *c == "C" && d[0].is_some())
        .count();
    assert!(c_on_lane > 0, "C never had the lane");
    assert!(on_lane.iter().all(|&n| n > 0), "{on_lane:?}");
}

#[test]
fn a_full_board_says_so() {
    let prefix = format!("/dev/shm/topo-run-test.{}.board", std::process::id());
    let s = settings();
    let layout = Layout::new(2, s.slots as usize, s.fragment as usize);
    let pool = Pool::create(&prefix, layout, 0, 2).unwrap();
    pool.unlink().unwrap();
    assert_eq!(pool.lanes(), 2);
    // What `topo-run doctor` counts for the lanes: the board and the lanes.
    let board = topo_hierarchy::settings::LANE_BOARD_BYTES;
    assert_eq!(pool.bytes() as u64, board + 2 * layout.total() as u64);
    let records = topo_runtime::transport::shm::lanes::RECORDS;
    for r in 0..records {
        assert_eq!(pool.claim_record(2), Some(r));
    }
    assert_eq!(pool.claim_record(2), None, "no record left");
    pool.leave_record(7);
    assert_eq!(
        pool.claim_record(2),
        None,
        "one member still holds record 7"
    );
    pool.leave_record(7);
    assert_eq!(pool.claim_record(2), Some(7));
    // A record claimed for a context that is not set up on the lanes goes back whole.
    pool.abandon_record(7);
    assert_eq!(pool.claim_record(3), Some(7));
}

#[test]
fn the_number_of_lanes_comes_from_the_variable() {
    use topo_runtime::transport::shm::lanes::{DEFAULT_LANES, MAX_LANES, lanes_wanted};
    assert_eq!(lanes_wanted(None), DEFAULT_LANES);
    assert_eq!(lanes_wanted(Some(" 0 ")), 0);
    assert_eq!(lanes_wanted(Some("5")), 5);
    assert_eq!(lanes_wanted(Some("1000")), MAX_LANES);
    assert_eq!(lanes_wanted(Some("many")), DEFAULT_LANES);
}
