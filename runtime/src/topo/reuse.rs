//! Taking up, at a context's setup, the context its members kept from the last
//! communicator over the same members (`crate::kept`).

use super::comm::fnv;
use super::*;
use crate::kept::{self, Kept};

/// The key of a context's parts: its members' world ranks in its order, the plan they
/// come from (its digest, which covers the settings), and whether it is on the node's
/// lanes.
pub(super) fn key(members: &[u32], plan: &RankPlan, on_lanes: bool) -> u64 {
    let mut bytes: Vec<u8> = members.iter().flat_map(|m| m.to_le_bytes()).collect();
    bytes.extend(plan.digest.to_string().as_bytes());
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
