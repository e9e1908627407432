//! What each rank does in a collective, as the simulator reads it: rounds of steps, a round
//! starting when the one before has completed, as the runtime's schedules run. A rank's
//! [`Program`] comes from a runtime schedule ([`Program::from_builder`]: topo-run's own
//! algorithms, the very schedules its nonblocking collectives run) or from the flat
//! algorithms that MPI libraries use ([`crate::flat`]). The simulator keeps all ranks'
//! programs packed in one [`Programs`], 16 bytes a step.

use topo_runtime::nonblocking::{Action, Builder};

/// One step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Send `bytes` to each of `to`.
    Send {
        /// Receivers.
        to: Vec<u32>,
        /// Bytes to each.
        bytes: u64,
    },
    /// Receive `bytes` from `from`; `combine`: and combine them into an accumulator.
    Recv {
        /// Sender.
        from: u32,
        /// Bytes.
        bytes: u64,
        /// Whether they are combined as they arrive (a reduction).
        combine: bool,
    },
    /// Copy (`combine == false`) or combine `bytes` locally.
    Local {
        /// Bytes.
        bytes: u64,
        /// Whether it is a reduction rather than a copy.
        combine: bool,
    },
}

/// One rank's rounds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Program {
    /// The rounds, each its steps (none empty).
    pub rounds: Vec<Vec<Step>>,
}

impl Program {
    /// The program a runtime schedule describes.
    pub fn from_builder(b: &Builder) -> Program {
        let mut p = Program::default();
        for round in b.rounds() {
            p.round(
                round
                    .flat_map(|(_, action)| match action {
                        Action::Send { to, src } => vec![Step::Send {
                            to: to.clone(),
                            bytes: src.len as u64,
                        }],
                        // A lent region's message is modelled as a plain one: sent by
                        // its writer, received at its wait.
                        Action::WriteInto { to, src } => vec![Step::Send {
                            to: vec![*to],
                            bytes: src.len as u64,
                        }],
                        Action::Lend { .. } => Vec::new(),
                        Action::Recv { from, dst } | Action::WaitLent { from, dst } => {
                            vec![Step::Recv {
                                from: *from,
                                bytes: dst.len as u64,
                                combine: false,
                            }]
                        }
                        Action::RecvReduce { from, acc } => vec![Step::Recv {
                            from: *from,
                            bytes: acc.len as u64,
                            combine: true,
                        }],
                        Action::Copy { dst, .. } | Action::Permute { dst, .. } => {
                            vec![Step::Local {
                                bytes: dst.len as u64,
                                combine: false,
                            }]
                        }
                        Action::Combine { acc, .. } => vec![Step::Local {
                            bytes: acc.len as u64,
                            combine: true,
                        }],
                        // A barrier's round: an empty message each way.
                        Action::Signal { to, from, .. } => vec![
                            Step::Send {
                                to: vec![*to],
                                bytes: 0,
                            },
                            Step::Recv {
                                from: *from,
                                bytes: 0,
                                combine: false,
                            },
                        ],
                    })
                    .collect(),
            );
        }
        p
    }

    /// Appends a round (nothing when empty).
    pub fn round(&mut self, steps: Vec<Step>) {
        if !steps.is_empty() {
            self.rounds.push(steps);
        }
    }
}

/// A packed step: one receiver of a send, a receive, or a local step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Packed {
    pub(crate) kind: Kind,
    /// The receiver of a send, the sender of a receive.
    pub(crate) peer: u32,
    pub(crate) bytes: u64,
}

/// What a packed step does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Send,
    Recv,
    RecvCombine,
    Copy,
    Combine,
}

/// Every rank's program, packed: the steps of all rounds of all ranks in one array.
#[derive(Debug, Default)]
pub struct Programs {
    steps: Vec<Packed>,
    /// Where each round's steps end in `steps`, rank after rank.
    round_end: Vec<u64>,
    /// Where each rank's rounds start in `round_end` (one more entry than ranks).
    rank_start: Vec<u64>,
}

impl Programs {
    /// Packs the programs of ranks `0..n`, `program(r)` building rank `r`'s (each is
    /// dropped once packed, so the unpacked form never exists for all ranks at once).
    pub fn build(n: u32, mut program: impl FnMut(u32) -> Program) -> Programs {
        let mut out = Programs {
            rank_start: Vec::with_capacity(n as usize + 1),
            ..Programs::default()
        };
        for r in 0..n {
            out.push(&program(r));
        }
        out.rank_start.push(out.round_end.len() as u64);
        out
    }

    fn push(&mut self, p: &Program) {
        self.rank_start.push(self.round_end.len() as u64);
        for round in &p.rounds {
            for step in round {
                match *step {
                    Step::Send { ref to, bytes } => {
                        self.steps.extend(to.iter().map(|&peer| Packed {
                            kind: Kind::Send,
                            peer,
                            bytes,
                        }))
                    }
                    Step::Recv {
                        from,
                        bytes,
                        combine,
                    } => self.steps.push(Packed {
                        kind: if combine {
                            Kind::RecvCombine
                        } else {
                            Kind::Recv
                        },
                        peer: from,
                        bytes,
                    }),
                    Step::Local { bytes, combine } => self.steps.push(Packed {
                        kind: if combine { Kind::Combine } else { Kind::Copy },
                        peer: 0,
                        bytes,
                    }),
                }
            }
            self.round_end.push(self.steps.len() as u64);
        }
    }

    /// The number of ranks.
    pub fn len(&self) -> usize {
        self.rank_start.len().saturating_sub(1)
    }

    /// Whether there is no rank.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of rounds of rank `r`.
    pub(crate) fn rounds(&self, r: u32) -> usize {
        (self.rank_start[r as usize + 1] - self.rank_start[r as usize]) as usize
    }

    /// Round `i` of rank `r`.
    pub(crate) fn round(&self, r: u32, i: usize) -> &[Packed] {
        let k = self.rank_start[r as usize] as usize + i;
        let start = if k == 0 {
            0
        } else {
            self.round_end[k - 1] as usize
        };
        &self.steps[start..self.round_end[k] as usize]
    }

    /// Every step of rank `r`.
    pub(crate) fn steps_of(&self, r: u32) -> &[Packed] {
        let (a, b) = (
            self.rank_start[r as usize] as usize,
            self.rank_start[r as usize + 1] as usize,
        );
        let start = if a == 0 {
            0
        } else {
            self.round_end[a - 1] as usize
        };
        let end = if b == 0 {
            0
        } else {
            self.round_end[b - 1] as usize
        };
        &self.steps[start..end]
    }
}
