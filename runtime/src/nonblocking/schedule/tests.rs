use super::*;
use crate::error::Error;
use crate::transport::Transfer;
use crate::transport::testing::Posting;

/// A transport whose transfers never complete and on which one peer has died.
struct Stuck {
    dead: u32,
    /// The transfers polled, in order.
    polls: Vec<&'static str>,
}

impl Transport for Stuck {
    fn send(&mut self, _: &[u32], _: &[u8]) -> Result<()> {
        unreachable!()
    }
    fn recv(&mut self, _: u32, _: &mut [u8]) -> Result<()> {
        unreachable!()
    }
    fn sendrecv(&mut self, _: u32, _: &[u8], _: u32, _: &mut [u8]) -> Result<()> {
        unreachable!()
    }
    fn poll_send(&mut self, _: &mut Transfer, _: &[u32], _: &[u8]) -> Result<bool> {
        self.polls.push("send");
        Ok(false)
    }
    fn poll_recv(
        &mut self,
        _: &mut Transfer,
        _: u32,
        _: &mut [u8],
        _: Option<&dyn Combine>,
    ) -> Result<bool> {
        self.polls.push("recv");
        Ok(false)
    }
    fn check_peer(&mut self, peer: u32) -> Result<()> {
        if peer == self.dead {
            Err(Error::PeerDied {
                rank: peer,
                node: "n".into(),
                op: "?",
            })
        } else {
            Ok(())
        }
    }
}

impl Fabric for Stuck {
    fn level(&mut self, _: usize) -> &mut dyn Transport {
        self
    }
    fn peer(&mut self, _: u32) -> &mut dyn Transport {
        self
    }
}

struct Sum;
impl Combine for Sum {
    fn elem_size(&self) -> usize {
        1
    }
    fn combine(&self, acc: &mut [u8], src: &[u8]) {
        for (a, s) in acc.iter_mut().zip(src) {
            *a = a.wrapping_add(*s);
        }
    }
}

#[test]
fn transfers_are_posted_ahead_as_far_as_their_buffers_and_order_allow() {
    let l = Link::Level(0);
    let r = |buf, off| Region { buf, off, len: 8 };
    let mut b = Builder::default();
    // As recursive doubling: exchange, then exchange into scratch and combine, twice.
    b.round([
        (
            l,
            Action::Send {
                to: vec![1],
                src: r(Buf::Send, 0),
            },
        ),
        (
            l,
            Action::RecvReduce {
                from: 1,
                acc: r(Buf::Recv, 0),
            },
        ),
    ]);
    b.round([
        // Its data is still being combined into: not yet.
        (
            l,
            Action::Send {
                to: vec![2],
                src: r(Buf::Recv, 0),
            },
        ),
        // Scratch nobody uses yet: posted.
        (
            l,
            Action::Recv {
                from: 2,
                dst: r(Buf::Tmp, 0),
            },
        ),
    ]);
    b.step(
        Link::Local,
        Action::Combine {
            acc: r(Buf::Recv, 0),
            src: r(Buf::Tmp, 0),
        },
    );
    b.round([
        (
            l,
            Action::Send {
                to: vec![3],
                src: r(Buf::Recv, 0),
            },
        ),
        // The combine above still reads the scratch: not yet.
        (
            l,
            Action::Recv {
                from: 3,
                dst: r(Buf::Tmp, 0),
            },
        ),
    ]);
    b.round([
        // Free buffer, but an earlier receive from rank 3 is unposted: not yet.
        (
            l,
            Action::Recv {
                from: 3,
                dst: r(Buf::Recv, 8),
            },
        ),
        // Combined on arrival, from its own memory: posted.
        (
            l,
            Action::RecvReduce {
                from: 5,
                acc: r(Buf::Recv, 0),
            },
        ),
        // Data nobody writes, but a send says that this rank got here (a barrier's
        // empty message says nothing else): not yet.
        (
            l,
            Action::Send {
                to: vec![6],
                src: r(Buf::Send, 0),
            },
        ),
        // Likewise.
        (
            l,
            Action::Send {
                to: vec![2],
                src: r(Buf::Send, 0),
            },
        ),
    ]);
    let data = [1u8; 8];
    let mut out = [0u8; 16];
    // SAFETY: `data` and `out` outlive the schedule.
    let mut s = unsafe {
        Schedule::new(
            "MPI_Iallreduce",
            b,
            Some(&data),
            Some(&mut out),
            0,
            8,
            Some(Box::new(Sum)),
        )
    };
    let mut net = Posting::default();
    let mut moves = 0;
    assert!(!s.poll(&mut net, Reach::All, &mut moves).unwrap());
    assert_eq!(
        net.posted,
        [
            ("send", 1, 8),
            ("recv", 1, 8),
            ("recv", 2, 8),
            ("recv", 5, 8),
        ]
    );
    assert_eq!(moves, 4);
    // A thread that may not call MPI posts nothing.
    let mut net2 = Posting::default();
    let mut b = Builder::default();
    b.step(
        l,
        Action::Recv {
            from: 1,
            dst: r(Buf::Tmp, 0),
        },
    );
    b.step(
        l,
        Action::Recv {
            from: 2,
            dst: r(Buf::Recv, 0),
        },
    );
    // SAFETY: `out` outlives the schedule.
    let mut t = unsafe { Schedule::new("MPI_Ibcast", b, None, Some(&mut out), 0, 8, None) };
    assert!(!t.poll(&mut net2, Reach::WithoutMpi, &mut 0).unwrap());
    assert!(net2.posted.is_empty());
    // Once transfers complete, the rest is posted and tested; each transfer is posted
    // exactly once (10 in all).
    net.open = true;
    let polls = (1..=10).find(|_| s.poll(&mut net, Reach::All, &mut moves).unwrap());
    assert!(polls.is_some(), "the schedule never completed");
    assert_eq!(net.posted.len(), 10, "{:?}", net.posted);
}

#[test]
fn a_completed_schedule_of_a_shape_serves_the_next_call_of_that_shape_once() {
    let r = |buf, off| Region { buf, off, len: 8 };
    let build = || {
        let mut b = Builder::default();
        b.round([(
            Link::Level(0),
            Action::Recv {
                from: 1,
                dst: r(Buf::Tmp, 0),
            },
        )]);
        b.round([(
            Link::Local,
            Action::Combine {
                acc: r(Buf::Recv, 0),
                src: r(Buf::Tmp, 0),
            },
        )]);
        b.step(
            Link::Level(0),
            Action::Send {
                to: vec![1],
                src: r(Buf::Recv, 0),
            },
        );
        b
    };
    let steps = |b: &Builder| format!("{:?}", b.rounds().map(Vec::from_iter).collect::<Vec<_>>());
    let shape = Shape {
        op: "MPI_Iallreduce",
        alg: None,
        root: 0,
        len: 8,
        has_send: false,
        elem: 8,
        blocks: Vec::new(),
    };
    let mut engine = crate::nonblocking::Engine::default();
    let mut net = Posting {
        open: true,
        ..Posting::default()
    };
    let mut outs = [[1u8; 8], [1u8; 8]];
    for (call, out) in outs.iter_mut().enumerate() {
        let (b, acc, tmp) = match engine.reuse(&shape, &[]) {
            Some((kept, b, acc, tmp)) => {
                assert_eq!(call, 1, "nothing is kept before a schedule completes");
                assert_eq!(kept, shape);
                (b, acc, tmp)
            }
            None => (build(), 0, 8),
        };
        assert_eq!(steps(&b), steps(&build()));
        assert_eq!((acc, tmp), (0, 8));
        // SAFETY: `out` outlives the schedule, which completes in this iteration.
        let s = unsafe {
            Schedule::new(
                "MPI_Iallreduce",
                b,
                None,
                Some(out),
                acc,
                tmp,
                Some(Box::new(Sum)),
            )
        }
        .shaped(shape.clone());
        engine.start(call as u64, s, &mut net).unwrap();
        let polls = (0..10).find(|_| {
            engine.progress(&mut net, Reach::All).unwrap();
            engine.is_idle()
        });
        assert!(polls.is_some(), "call {call} never completed");
    }
    // The reused steps ran in full again: posted the same transfers, gave the same result.
    assert_eq!(net.posted[..2], net.posted[2..]);
    assert_eq!(outs[0], outs[1]);
    // Another shape finds nothing; the kept steps serve one call at a time.
    assert!(
        engine
            .reuse(
                &Shape {
                    len: 16,
                    ..shape.clone()
                },
                &[]
            )
            .is_none()
    );
    assert!(engine.reuse(&shape, &[]).is_some());
    assert!(engine.reuse(&shape, &[]).is_none());
}

// A call's shape is its head and its blocks as the call has them, in parts: the same blocks
// split anywhere are the same shape; other blocks, fewer, or another head are not.
#[test]
fn a_shape_is_its_head_and_its_blocks_in_any_split() {
    let head = Shape {
        op: "MPI_Ialltoallv",
        alg: None,
        root: 0,
        len: 24,
        has_send: true,
        elem: 0,
        blocks: Vec::new(),
    };
    let at = [0..8, 8..16, 16..24];
    let kept = Shape {
        blocks: at.to_vec(),
        ..head.clone()
    };
    assert!(kept.is(&head, &[&at[..1], &at[1..]]));
    assert!(kept.is(&head, &[&at, &[]]));
    assert!(kept.is(&head, &[&[], &at]));
    assert!(!kept.is(&head, &[&at[..2], &[]]));
    assert!(!kept.is(&head, &[&at, &at[..1]]));
    assert!(!kept.is(&head, &[&[0..8, 8..16, 16..23], &[]]));
    let other = Shape {
        has_send: false,
        ..head.clone()
    };
    assert!(!kept.is(&other, &[&at, &[]]));
    // The head's own blocks are not looked at.
    assert!(kept.is(&kept, &[&at, &[]]));
    assert!(head.is(&kept, &[]));
}

#[test]
fn a_start_sends_and_copies_but_leaves_receiving_and_combining_for_later() {
    let r = |buf, off| Region { buf, off, len: 8 };
    let mut b = Builder::default();
    b.round([
        (
            Link::Local,
            Action::Copy {
                src: r(Buf::Send, 0),
                dst: r(Buf::Recv, 0),
            },
        ),
        (
            Link::Local,
            Action::Combine {
                acc: r(Buf::Recv, 8),
                src: r(Buf::Send, 0),
            },
        ),
        (
            Link::Level(0),
            Action::Send {
                to: vec![1],
                src: r(Buf::Send, 0),
            },
        ),
        // Over a transport that does not post ahead: not even polled.
        (
            Link::Level(0),
            Action::Recv {
                from: 1,
                dst: r(Buf::Recv, 16),
            },
        ),
    ]);
    let data = [3u8; 8];
    let mut out = [1u8; 24];
    // SAFETY: `data` and `out` outlive the schedule.
    let mut s = unsafe {
        Schedule::new(
            "MPI_Iallreduce",
            b,
            Some(&data),
            Some(&mut out),
            0,
            0,
            Some(Box::new(Sum)),
        )
    };
    let mut net = Stuck {
        dead: 9,
        polls: Vec::new(),
    };
    let mut moves = 0;
    assert!(!s.poll(&mut net, Reach::Start, &mut moves).unwrap());
    assert_eq!(net.polls, ["send"]);
    assert_eq!(moves, 1);
    // The combine has not run yet, the copy has.
    assert!(!s.poll(&mut net, Reach::All, &mut moves).unwrap());
    assert_eq!(net.polls, ["send", "send", "recv"]);
    drop(s);
    assert_eq!(out[..8], [3; 8]);
    assert_eq!(out[8..16], [4; 8]);
}

#[test]
fn a_send_checks_every_receiver_for_death() {
    // A broadcast's writer waits for all of its readers; the one that died is not the
    // first of them.
    for dead in [1, 2, 3] {
        let mut b = Builder::default();
        b.step(
            Link::Level(0),
            Action::Send {
                to: vec![1, 2, 3],
                src: Region::whole(Buf::Send, 8),
            },
        );
        let data = [0u8; 8];
        // SAFETY: `data` outlives the schedule.
        let mut s = unsafe { Schedule::new("MPI_Ibcast", b, Some(&data), None, 0, 0, None) };
        let mut fabric = Stuck {
            dead,
            polls: Vec::new(),
        };
        assert!(!s.poll(&mut fabric, Reach::All, &mut 0).unwrap());
        let e = s.check_peers(&mut fabric).unwrap_err();
        assert!(e.to_string().contains("MPI_Ibcast"), "{e}");
    }
    let mut fabric = Stuck {
        dead: 9,
        polls: Vec::new(),
    };
    let mut b = Builder::default();
    b.step(
        Link::Level(0),
        Action::Send {
            to: vec![1, 2],
            src: Region::whole(Buf::Send, 0),
        },
    );
    // SAFETY: no buffer is referred to.
    let mut s = unsafe { Schedule::new("MPI_Ibcast", b, Some(&[]), None, 0, 0, None) };
    assert!(!s.poll(&mut fabric, Reach::All, &mut 0).unwrap());
    s.check_peers(&mut fabric).unwrap();
}
