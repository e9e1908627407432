//! The step model of a schedule: the buffers and regions a step touches, the link it
//! takes, what it does, and the builder that collects a schedule's rounds.

use crate::transport::Transfer;

/// Which buffer a region lies in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Buf {
    /// The caller's send buffer (read only).
    Send,
    /// The caller's receive buffer.
    Recv,
    /// The schedule's own accumulator.
    Acc,
    /// The schedule's own scratch.
    Tmp,
}

/// Bytes `off..off + len` of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    /// The buffer.
    pub buf: Buf,
    /// First byte.
    pub off: usize,
    /// Length in bytes.
    pub len: usize,
}

impl Region {
    /// All `len` bytes of `buf`.
    pub fn whole(buf: Buf, len: usize) -> Self {
        Region { buf, off: 0, len }
    }
}

/// Which transport a step uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// The transport of the rank's level `i`.
    Level(usize),
    /// The transport that reaches a peer directly (the root detour).
    Peer(u32),
    /// None: a local copy or combine.
    Local,
}

/// What a step does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send `src` to every rank in `to`.
    Send {
        /// Receivers.
        to: Vec<u32>,
        /// What to send.
        src: Region,
    },
    /// Receive into `dst` from `from`.
    Recv {
        /// Sender.
        from: u32,
        /// Where it lands.
        dst: Region,
    },
    /// Receive from `from` and combine into `acc`.
    RecvReduce {
        /// Sender.
        from: u32,
        /// The accumulator.
        acc: Region,
    },
    /// Copy `src` to `dst` locally.
    Copy {
        /// Source.
        src: Region,
        /// Destination (another buffer).
        dst: Region,
    },
    /// Combine `src` into `acc` locally.
    Combine {
        /// The accumulator.
        acc: Region,
        /// What is combined in (another buffer).
        src: Region,
    },
    /// Copy `src`'s blocks of `block` bytes into `dst` in another order: block `j` of
    /// `dst` is block `order[j]` of `src` (both `order.len() * block` bytes, in different
    /// buffers).
    Permute {
        /// Source.
        src: Region,
        /// Destination (another buffer).
        dst: Region,
        /// Bytes per block.
        block: usize,
        /// The source block of each destination block.
        order: std::sync::Arc<[u32]>,
    },
    /// Tell `from` where `dst` is, so that it may write its message there itself
    /// (`Transport::poll_lend`); a [`Action::WaitLent`] in a later round waits for it.
    Lend {
        /// The sender, which writes with [`Action::WriteInto`].
        from: u32,
        /// Where the message lands.
        dst: Region,
    },
    /// Wait until the message of a [`Action::Lend`] is in `dst`
    /// (`Transport::poll_wait_lent`).
    WaitLent {
        /// The sender.
        from: u32,
        /// Where the message lands (the lent region).
        dst: Region,
    },
    /// Write `src` into the region that `to` lends (`Transport::poll_write_into`).
    WriteInto {
        /// The receiver, which lends its region with [`Action::Lend`].
        to: u32,
        /// What to write.
        src: Region,
    },
    /// Round `round` of a dissemination barrier: tell `to` that this rank has reached it,
    /// and hear the same from `from` (`Transport::poll_signal`).
    Signal {
        /// The barrier's round.
        round: usize,
        /// Who learns that this rank got here.
        to: u32,
        /// Whom this rank waits for.
        from: u32,
    },
}

impl Region {
    /// Whether the two share a byte.
    pub(super) fn overlaps(&self, other: &Region) -> bool {
        self.buf == other.buf
            && self.len > 0
            && other.len > 0
            && self.off < other.off + other.len
            && other.off < self.off + self.len
    }
}

impl Action {
    /// The regions this step reads or writes until it completes.
    pub(super) fn regions(&self) -> impl Iterator<Item = Region> {
        let (a, b) = match *self {
            Action::Send { src, .. } => (src, None),
            Action::Recv { dst, .. } | Action::Lend { dst, .. } | Action::WaitLent { dst, .. } => {
                (dst, None)
            }
            Action::RecvReduce { acc, .. } => (acc, None),
            Action::WriteInto { src, .. } => (src, None),
            Action::Copy { src, dst } | Action::Permute { src, dst, .. } => (dst, Some(src)),
            Action::Combine { acc, src } => (acc, Some(src)),
            Action::Signal { .. } => (Region::whole(Buf::Acc, 0), None),
        };
        std::iter::once(a).chain(b)
    }

    /// The sender, if the step is a receive. Only receives are posted ahead: a send also
    /// tells its receiver that this rank has got this far (a barrier's empty messages
    /// carry nothing else), which its data alone does not show.
    pub(super) fn sender(&self) -> Option<u32> {
        match *self {
            Action::Recv { from, .. }
            | Action::RecvReduce { from, .. }
            | Action::WaitLent { from, .. } => Some(from),
            Action::Send { .. }
            | Action::Lend { .. }
            | Action::WriteInto { .. }
            | Action::Copy { .. }
            | Action::Permute { .. }
            | Action::Combine { .. }
            | Action::Signal { .. } => None,
        }
    }

    /// Whether a receive may land while the earlier steps that use `pending` have not
    /// completed: one that is combined lands in the transfer's own memory until its round.
    pub(super) fn lands_clear_of(&self, pending: &[Region]) -> bool {
        match self {
            Action::Recv { dst, .. } | Action::WaitLent { dst, .. } => {
                !pending.iter().any(|r| r.overlaps(dst))
            }
            _ => true,
        }
    }

    /// The ranks this step waits on: every receiver of a send (a shared-memory slot is
    /// free again only once all of them have read it), the sender of a receive.
    pub(super) fn peers(&self) -> &[u32] {
        match self {
            Action::Send { to, .. } => to,
            Action::Recv { from, .. }
            | Action::RecvReduce { from, .. }
            | Action::Lend { from, .. }
            | Action::WaitLent { from, .. }
            | Action::Signal { from, .. } => std::slice::from_ref(from),
            Action::WriteInto { to, .. } => std::slice::from_ref(to),
            Action::Copy { .. } | Action::Permute { .. } | Action::Combine { .. } => &[],
        }
    }
}

#[derive(Debug)]
pub(super) struct Step {
    pub(super) link: Link,
    pub(super) action: Action,
    pub(super) transfer: Transfer,
    pub(super) done: bool,
}

/// Collects a schedule's rounds.
#[derive(Debug, Default)]
pub struct Builder {
    pub(super) rounds: Vec<Vec<Step>>,
}

impl Builder {
    /// Appends a round of `steps` (nothing when empty).
    pub fn round(&mut self, steps: impl IntoIterator<Item = (Link, Action)>) {
        let steps: Vec<Step> = steps
            .into_iter()
            .map(|(link, action)| Step {
                link,
                action,
                transfer: Transfer::default(),
                done: false,
            })
            .collect();
        if !steps.is_empty() {
            self.rounds.push(steps);
        }
    }

    /// Appends a round of one step.
    pub fn step(&mut self, link: Link, action: Action) {
        self.round([(link, action)]);
    }

    /// Adds `action` to the last round (a round of its own where there is none), to run
    /// beside that round's steps: the caller keeps the rounds' rules (no step of the
    /// round writes what `action` reads or writes, nor the other way round).
    pub fn beside_last(&mut self, link: Link, action: Action) {
        match self.rounds.last_mut() {
            Some(last) => last.push(Step {
                link,
                action,
                transfer: Transfer::default(),
                done: false,
            }),
            None => self.step(link, action),
        }
    }

    /// Appends the rounds of `other`, after this one's.
    pub fn append(&mut self, other: Builder) {
        self.rounds.extend(other.rounds);
    }

    /// The same steps with every region of `from` moved to `to` (the same offsets): a
    /// collective's steps run on another buffer, as a schedule that composes collectives
    /// needs (an Allreduce into the accumulator for a Reduce_scatter).
    ///
    /// # Panics
    /// If a step already uses `to`: the two would share it.
    pub fn moved(mut self, from: Buf, to: Buf) -> Builder {
        let mv = |r: &mut Region| {
            assert!(
                r.buf != to || r.len == 0,
                "steps moved onto a buffer they use"
            );
            if r.buf == from {
                r.buf = to;
            }
        };
        for step in self.rounds.iter_mut().flatten() {
            match &mut step.action {
                Action::Send { src: r, .. }
                | Action::Recv { dst: r, .. }
                | Action::RecvReduce { acc: r, .. }
                | Action::Lend { dst: r, .. }
                | Action::WaitLent { dst: r, .. }
                | Action::WriteInto { src: r, .. } => mv(r),
                Action::Copy { src, dst } | Action::Permute { src, dst, .. } => {
                    mv(src);
                    mv(dst);
                }
                Action::Combine { acc, src } => {
                    mv(acc);
                    mv(src);
                }
                Action::Signal { .. } => {}
            }
        }
        self
    }

    /// The rounds built so far, each its steps, for tools that read a schedule without
    /// running it (`topo-run simulate`).
    pub fn rounds(&self) -> impl Iterator<Item = impl Iterator<Item = (Link, &Action)>> {
        self.rounds
            .iter()
            .map(|r| r.iter().map(|step| (step.link, &step.action)))
    }
}

/// What a schedule's steps depend on besides its context (view and settings): calls of
/// one shape on one context build the same steps, so the steps of a completed schedule,
/// reset, serve the next call of its shape (`Engine::reuse`) without building them again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// The collective (its MPI name) and, for an Allgather, its algorithm.
    pub op: &'static str,
    /// The Allgather's algorithm (`None` for the other collectives).
    pub alg: Option<topo_hierarchy::settings::AllgatherAlg>,
    /// The root (0 where there is none).
    pub root: u32,
    /// The bytes the builder was given.
    pub len: usize,
    /// Whether the caller passed a send buffer (not in place).
    pub has_send: bool,
    /// The element's bytes where the steps cut the message into blocks of whole elements
    /// (an Allreduce's); for a Gather or Scatter 1 when it goes through the leaders; 0
    /// elsewhere.
    pub elem: usize,
    /// The blocks of a collective of varied blocks as the builder was given them (an
    /// Alltoallv's send ranges, if any, then its receive ranges; the root's ranges of a
    /// Gatherv or Scatterv; an Allgatherv's; a Reduce_scatter's): equal blocks, equal
    /// steps. Empty for the other collectives.
    pub blocks: Vec<std::ops::Range<usize>>,
}

impl Shape {
    /// Whether this is `head` (a shape whose own blocks are not looked at) with the blocks
    /// `parts` one after another: a call's shape, compared without copying its blocks.
    pub fn is(&self, head: &Shape, parts: &[&[std::ops::Range<usize>]]) -> bool {
        let Shape {
            op,
            alg,
            root,
            len,
            has_send,
            elem,
            blocks,
        } = self;
        (*op, *alg, *root, *len, *has_send, *elem)
            == (
                head.op,
                head.alg,
                head.root,
                head.len,
                head.has_send,
                head.elem,
            )
            && blocks.len() == parts.iter().map(|p| p.len()).sum::<usize>()
            && blocks.iter().eq(parts.iter().flat_map(|p| p.iter()))
    }
}

impl Builder {
    /// Makes the steps of a completed schedule new again.
    pub(super) fn reset(&mut self) {
        for step in self.rounds.iter_mut().flatten() {
            step.done = false;
            step.transfer = Transfer::default();
        }
    }
}
