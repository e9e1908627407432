//! Single copy: a reader copies (or combines) a large fragment straight out of the
//! writer's buffer with `process_vm_readv`, as Open MPI's CMA path does; a lent buffer
//! ([`Transport::lend`]) that its sender writes into with `process_vm_writev`; and the
//! check that this rank may read its peers' memory.

use super::*;

/// A fragment as its reader finds it.
pub(super) enum Frag<'a> {
    /// In the writer's queue.
    Queue(&'a [u8]),
    /// In the writer's own buffer, at `addr` in process `pid`.
    Remote { pid: i32, addr: u64 },
}

/// Copies `dst.len()` bytes at `addr` in process `pid` into `dst`.
pub(super) fn read_remote(pid: i32, addr: u64, dst: &mut [u8]) -> nix::Result<()> {
    let mut done = 0;
    while done < dst.len() {
        let remote = [RemoteIoVec {
            base: addr as usize + done,
            len: dst.len() - done,
        }];
        let mut local = [IoSliceMut::new(&mut dst[done..])];
        match process_vm_readv(Pid::from_raw(pid), &mut local, &remote)? {
            0 => return Err(Errno::EFAULT),
            n => done += n,
        }
    }
    Ok(())
}

/// Copies `src` to `addr` in process `pid`.
fn write_remote(pid: i32, addr: u64, src: &[u8]) -> nix::Result<()> {
    let mut done = 0;
    while done < src.len() {
        let remote = [RemoteIoVec {
            base: addr as usize + done,
            len: src.len() - done,
        }];
        let local = [IoSlice::new(&src[done..])];
        match process_vm_writev(Pid::from_raw(pid), &local, &remote)? {
            0 => return Err(Errno::EFAULT),
            n => done += n,
        }
    }
    Ok(())
}

/// Bytes of a lent buffer's descriptor: its address and its length.
const LENT: usize = 16;

/// The descriptor of a lent buffer.
fn descriptor(buf: &mut [u8]) -> [u8; LENT] {
    let mut desc = [0u8; LENT];
    desc[..8].copy_from_slice(&(buf.as_mut_ptr() as u64).to_ne_bytes());
    desc[8..].copy_from_slice(&(buf.len() as u64).to_ne_bytes());
    desc
}

/// Combines a fragment into `acc`. A remote buffer is read and combined in pieces of at
/// most [`REDUCE_PIECE`] bytes through `tmp` (not empty; a piece is as long as `tmp`
/// allows).
pub(super) fn combine_in(
    op: &dyn Combine,
    frag: Frag<'_>,
    acc: &mut [u8],
    tmp: &mut [u8],
) -> nix::Result<()> {
    match frag {
        Frag::Queue(src) => op.combine(acc, src),
        Frag::Remote { pid, addr } => {
            let piece = REDUCE_PIECE.min(tmp.len());
            let piece = (piece - piece % op.elem_size()).max(op.elem_size());
            for (i, a) in acc.chunks_mut(piece).enumerate() {
                let t = &mut tmp[..a.len()];
                read_remote(pid, addr + (i * piece) as u64, t)?;
                op.combine(a, t);
            }
        }
    }
    Ok(())
}

/// Combines a fragment onto `mine` (this rank's own contribution) in `part`: a queue
/// fragment into `part`, which already holds `mine` if `ready`; a remote buffer read
/// straight into `part`, a piece at a time, with `mine` combined in.
pub(super) fn combine_onto(
    op: &dyn Combine,
    frag: Frag<'_>,
    part: &mut [u8],
    mine: &[u8],
    ready: bool,
) -> nix::Result<()> {
    match frag {
        Frag::Queue(src) => {
            if !ready {
                part.copy_from_slice(mine);
            }
            op.combine(part, src);
        }
        Frag::Remote { pid, addr } => {
            let piece = (REDUCE_PIECE - REDUCE_PIECE % op.elem_size()).max(op.elem_size());
            for (i, (p, m)) in part.chunks_mut(piece).zip(mine.chunks(piece)).enumerate() {
                read_remote(pid, addr + (i * piece) as u64, p)?;
                op.combine(p, m);
            }
        }
    }
    Ok(())
}

/// Copies a fragment into `dst`.
pub(super) fn copy_out(frag: Frag<'_>, dst: &mut [u8]) -> nix::Result<()> {
    match frag {
        Frag::Queue(src) => dst.copy_from_slice(src),
        Frag::Remote { pid, addr } => read_remote(pid, addr, dst)?,
    }
    Ok(())
}

impl ShmTransport {
    /// Whether a message of `len` bytes between two ranks of the node goes into a lent
    /// buffer: from the single-copy threshold, which every rank of the node shares
    /// (agreed at setup). Not by who is near, as sends decide: each pair of partners
    /// judges its own cache line ([`ShmTransport::check_near`]), so two ranks of different
    /// pairs may see each other differently, and both ends of a lent buffer must take the
    /// same path (a writer waiting for a buffer that is never lent would wait for ever).
    fn lends(&self, len: usize) -> bool {
        self.single_copy_for(len)
    }

    /// [`Transport::lend`]: the buffer's address and length to `from` where the message
    /// goes by single copy.
    pub(super) fn lend_to(&mut self, from: u32, buf: &mut [u8]) -> Result<()> {
        if !self.lends(buf.len()) {
            return Ok(());
        }
        self.send(&[from], &descriptor(buf))
    }

    /// [`Transport::poll_lend`]: as [`ShmTransport::lend_to`], without waiting.
    pub(super) fn poll_lend_to(
        &mut self,
        t: &mut Transfer,
        from: u32,
        buf: &mut [u8],
    ) -> Result<bool> {
        if !self.lends(buf.len()) {
            return Ok(true);
        }
        self.poll_send(t, &[from], &descriptor(buf))
    }

    /// [`Transport::wait_lent`]: the sender's word that it has written, or the message
    /// itself where it does not go by single copy.
    pub(super) fn wait_lent_from(&mut self, from: u32, buf: &mut [u8]) -> Result<()> {
        if !self.lends(buf.len()) {
            return self.recv(from, buf);
        }
        self.recv(from, &mut [])
    }

    /// [`Transport::poll_wait_lent`]: as [`ShmTransport::wait_lent_from`], without
    /// waiting.
    pub(super) fn poll_wait_lent_from(
        &mut self,
        t: &mut Transfer,
        from: u32,
        buf: &mut [u8],
    ) -> Result<bool> {
        if !self.lends(buf.len()) {
            return self.poll_recv(t, from, buf, None);
        }
        self.poll_recv(t, from, &mut [], None)
    }

    /// [`Transport::write_into`]: where the message goes by single copy, waits for the
    /// receiver's buffer, writes `data` there and tells the receiver; else sends it.
    pub(super) fn write_to(&mut self, to: u32, data: &[u8]) -> Result<()> {
        let j = self.local(to)?;
        if !self.lends(data.len()) {
            return self.send(&[to], data);
        }
        let mut desc = [0u8; LENT];
        self.recv(to, &mut desc)?;
        self.write_lent(j, &desc, data)?;
        self.send(&[to], &[])
    }

    /// [`Transport::poll_write_into`]: as [`ShmTransport::write_to`], without waiting:
    /// `t.started` once written.
    pub(super) fn poll_write_to(&mut self, t: &mut Transfer, to: u32, data: &[u8]) -> Result<bool> {
        let j = self.local(to)?;
        if !self.lends(data.len()) {
            return self.poll_send(t, &[to], data);
        }
        if !t.started {
            // A descriptor rides in the ring: it is taken whole or not at all.
            let mut desc = [0u8; LENT];
            if !self.poll_recv(&mut Transfer::default(), to, &mut desc, None)? {
                return Ok(false);
            }
            self.write_lent(j, &desc, data)?;
            t.started = true;
        }
        // The word that it is written (`t.done` counts the one reader told).
        self.poll_send(t, &[to], &[])
    }

    /// Writes `data` into the buffer that local rank `j` lent (`desc`), if its length is
    /// the message's.
    fn write_lent(&self, j: usize, desc: &[u8; LENT], data: &[u8]) -> Result<()> {
        let word = |at: usize| u64::from_ne_bytes(desc[at..at + 8].try_into().expect("8 bytes"));
        let (addr, len) = (word(0), word(8));
        if len != data.len() as u64 {
            return Err(Error::Mismatch {
                reason: format!(
                    "rank {} lent a buffer of {len} bytes for a message of {} bytes: the \
                     ranks called different collectives or counts",
                    self.peers[j],
                    data.len()
                ),
            });
        }
        write_remote(self.pid(j), addr, data).map_err(|e| self.consume_failed(j, e))
    }

    /// Checks that this rank may read every local peer's memory with `process_vm_readv`
    /// (by reading the segment's magic through each peer's mapping). Call after every
    /// local rank has attached.
    pub fn probe_single_copy(&self) -> std::result::Result<(), String> {
        if crate::fault::hit("no-single-copy") {
            return Err(format!(
                "rank {} cannot read its peers' memory (simulated: {}=no-single-copy)",
                self.peers[self.me],
                crate::fault::FAULT_ENV
            ));
        }
        let mut word = [0u8; 8];
        for j in (0..self.peers.len()).filter(|&j| j != self.me) {
            let addr = self.seg.base_of(j) + layout::header::MAGIC as u64;
            match read_remote(self.pid(j), addr, &mut word) {
                Ok(()) if u64::from_ne_bytes(word) == layout::MAGIC => {}
                Ok(()) => return Err(format!("rank {} reads garbage", self.peers[self.me])),
                Err(e) => {
                    return Err(format!(
                        "rank {} cannot read rank {}'s memory: {}",
                        self.peers[self.me],
                        self.peers[j],
                        e.desc()
                    ));
                }
            }
        }
        Ok(())
    }
}
