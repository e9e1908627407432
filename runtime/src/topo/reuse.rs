//! Taking up, at a context's setup, the context its members kept from the last
//! communicator over the same members (`crate::kept`): agreed over the new communicator
//! at its setup ([`take_up`]), or, where the caller can agree more cheaply (the PMPI
//! library, over the parent communicator's context in the creating call), through a
//! [`KeptOffer`], or through [`KeptOffers`] where the members are learnt in that same
//! exchange (the library's `MPI_Comm_split`).

use super::comm::fnv;
use super::*;
use crate::kept::{self, Kept};
use topo_hierarchy::Digest;

/// The key of a context's parts: its members' world ranks in its order, the plan they
/// come from (its digest, which covers the settings), and whether it is on the node's
/// lanes.
pub(super) fn key(members: &[u32], plan: &RankPlan, on_lanes: bool) -> u64 {
    key_of(members, &plan.digest, on_lanes)
}

fn key_of(members: &[u32], digest: &Digest, on_lanes: bool) -> u64 {
    let mut bytes: Vec<u8> = Vec::with_capacity(members.len() * 4 + 17);
    bytes.extend(members.iter().flat_map(|m| m.to_le_bytes()));
    bytes.extend(digest.0);
    bytes.push(u8::from(on_lanes));
    fnv(&bytes)
}

/// The id of context `instance` with `key`: the same on every member (the instance is
/// agreed), never 0.
pub(super) fn id(key: u64, instance: u32) -> u64 {
    let mut bytes = key.to_le_bytes().to_vec();
    bytes.extend(instance.to_le_bytes());
    fnv(&bytes).max(1)
}

/// The context every member of `comm` kept for `key`, if they all kept the same one
/// (collective over `comm`, with the same outcome everywhere: each offers the id of the
/// one it kept, or 0). Otherwise the one this rank kept goes back, and `None`.
pub(super) fn take_up(comm: &SimpleCommunicator, key: Option<u64>) -> Option<Kept> {
    let mine = key.and_then(kept::take);
    let offer = mine.as_ref().map_or(0, |k| k.id);
    let halves = [offer as u32, (offer >> 32) as u32];
    let all = pmpi_allgather_u32(comm, &halves);
    let agreed = offer != 0 && all.chunks(2).all(|r| r == halves);
    match mine {
        Some(k) if agreed => Some(k),
        Some(k) => {
            kept::keep(k);
            None
        }
        None => None,
    }
}

/// The context this process kept for a communicator's members, taken out of the kept ones
/// until the members have agreed whether they all offer the same ([`Topo::kept_for`]).
/// Dropped without [`KeptOffer::take_up`], it goes back to the kept ones.
#[derive(Default)]
pub struct KeptOffer {
    kept: Option<Kept>,
}

impl KeptOffer {
    /// The kept context's id (the same on every member that kept it), or 0: none.
    pub fn id(&self) -> u64 {
        self.kept.as_ref().map_or(0, |k| k.id)
    }

    /// The context for the communicator, once every member has offered the same nonzero
    /// [`KeptOffer::id`] (the caller's agreement): no communication, no setup.
    pub fn take_up(mut self) -> Option<Topo> {
        self.kept.take().map(Topo::from_kept)
    }
}

/// The plan's part of the keys of kept contexts, read from the environment once: for a
/// caller that asks for kept contexts at every creating call ([`KeptKeys::offer`] is
/// [`Topo::kept_for`] without reading and matching the plan each time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeptKeys {
    digest: Digest,
}

impl KeptKeys {
    /// The keys of this job's plan (`None` without a valid plan in the environment: then
    /// nothing is kept either).
    pub fn from_env() -> Option<KeptKeys> {
        let text = std::env::var(PLAN_ENV).ok()?;
        let plan = super::setup::decode_plan(&text).ok()?;
        Some(KeptKeys {
            digest: plan.digest,
        })
    }

    /// As [`Topo::kept_for`].
    pub fn offer(&self, members: &[u32], on_lanes: bool) -> KeptOffer {
        KeptOffer {
            kept: kept::take(key_of(members, &self.digest, on_lanes)),
        }
    }

    /// Every context this process kept, offered at once: for a caller that learns its
    /// new communicator's members only from the exchange in which the members make their
    /// offers (the PMPI library's `MPI_Comm_split`, whose colors and keys travel with the
    /// offers). At most `KEPT_SEGMENTS` ids.
    pub fn offer_all(&self) -> KeptOffers {
        KeptOffers {
            digest: self.digest,
            kept: kept::take_all(),
        }
    }
}

/// Every context this process kept, taken out of the kept ones until the members of a new
/// communicator have agreed which one, if any, they all take up ([`KeptKeys::offer_all`]).
/// Those not taken up go back to the kept ones, in their order, when it is dropped.
pub struct KeptOffers {
    digest: Digest,
    kept: Vec<Kept>,
}

impl KeptOffers {
    /// The ids of the contexts offered (the same on every member that kept each).
    pub fn ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.kept.iter().map(|k| k.id)
    }

    /// The context for a new communicator whose members are `members` (world ranks, in its
    /// order), on the node's lanes or not as `on_lanes` says: of the offered contexts for
    /// exactly those members and that choice whose id `in_every_offer` (the caller's
    /// agreement: every member offered it), the one with the lowest id. Every member that
    /// offered an id holds it with the same members, so every member picks the same one,
    /// or none, when `members`, `on_lanes` and `in_every_offer` are the same on all.
    pub fn take_up(
        &mut self,
        members: &[u32],
        on_lanes: bool,
        in_every_offer: impl Fn(u64) -> bool,
    ) -> Option<Topo> {
        let key = key_of(members, &self.digest, on_lanes);
        let i = (0..self.kept.len())
            .filter(|&i| self.kept[i].key == key && in_every_offer(self.kept[i].id))
            .min_by_key(|&i| self.kept[i].id)?;
        Some(Topo::from_kept(self.kept.remove(i)))
    }
}

impl std::fmt::Debug for KeptOffers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.ids()).finish()
    }
}

impl Drop for KeptOffers {
    fn drop(&mut self) {
        for k in self.kept.drain(..) {
            kept::keep(k);
        }
    }
}

impl std::fmt::Debug for KeptOffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeptOffer").field("id", &self.id()).finish()
    }
}

impl Drop for KeptOffer {
    fn drop(&mut self) {
        if let Some(k) = self.kept.take() {
            kept::keep(k);
        }
    }
}

impl Topo {
    /// The context this process kept for `comm`'s members in `comm`'s order, with the
    /// plan's settings, on the node's lanes or with a segment of its own as `on_lanes`
    /// says (local: no communication). Every member of `comm` must learn every other
    /// member's [`KeptOffer::id`] before any takes it up: where all offer the same nonzero
    /// id, each takes its offer up and the context is `comm`'s, as if set up by
    /// [`Topo::for_comm`] (or [`Topo::for_comm_on_lanes`]); otherwise none may.
    ///
    /// `members` are the world ranks of `comm`'s ranks, in `comm`'s order.
    pub fn kept_for(members: &[u32], on_lanes: bool) -> KeptOffer {
        KeptKeys::from_env().map_or_else(KeptOffer::default, |k| k.offer(members, on_lanes))
    }

    /// The context a kept one was, as it left it: its state taken over, nothing built
    /// anew (its progress is tracked on this thread, which may not be the one that made it).
    pub(super) fn from_kept(k: Kept) -> Topo {
        crate::mpi_hook::track(&k.core);
        if k.thread {
            crate::progress_thread::track(&k.core);
        }
        Topo {
            rank: k.world.rank(),
            world: k.world,
            core: k.core,
            fallback: None,
            node: k.node,
            local: k.local,
            thread: k.thread,
            combine: None,
            lineage: Some((k.key, k.id)),
            earlier: k.earlier,
            _not_send: PhantomData,
        }
    }
}
