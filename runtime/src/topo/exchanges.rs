//! The flat exchanges' peers (Allgather orders, Rabenseifner's halving order, the flat
//! barrier's dissemination), worked out once per context and kept in it.

use super::*;

impl Topo {
    /// Which flat exchange an Allgather of `total` gathered bytes runs: `None` for the
    /// hierarchical form, else the settings' algorithm (`rd`: recursive doubling, or Bruck
    /// for a job whose size is not a power of two; `ring`) and whether it must run as a
    /// schedule ([`Exchange::needs_schedule`]). Local: the peers were worked out at setup
    /// ([`Topo::setup_exchanges`]), so starting a nonblocking Allgather waits for nobody.
    pub(crate) fn exchange_for(&self, total: usize) -> Option<(AllgatherAlg, bool)> {
        let core = context::lock(&self.core);
        let h = core.hier.as_ref()?;
        let alg = h.settings.allgather_for(total, self.world.size() as usize);
        let e = h.exchanges.get(alg)?;
        Some((alg, e.needs_schedule()))
    }

    /// What a context learns of the other ranks at setup (collective over `world`): every
    /// rank learns every rank's node and leaf switch and whether it reaches the network
    /// (one `PMPI_Allgather` of three `u32`), and keeps the ranks that reach the network
    /// (for [`View::over_network`]) and its own peers in each flat Allgather exchange the
    /// settings may choose: `O(log n)` rank numbers for recursive doubling and Bruck, the
    /// ring's order for the ring. So no collective has to learn about the other ranks
    /// when it starts.
    pub(super) fn setup_exchanges(
        world: &SimpleCommunicator,
        settings: &mut Settings,
        view: &View,
        node_label: u32,
        switch_label: u32,
    ) -> (Vec<u32>, Exchanges) {
        let mut exchanges = Exchanges::default();
        let reaches = u32::from(view.reaches_network());
        let labels = pmpi_allgather_u32(world, &[node_label, switch_label, reaches]);
        let reaching: Vec<u32> = (0..world.size() as u32)
            .filter(|&r| labels[3 * r as usize + 2] != 0)
            .collect();
        let network = View::meeting_order(&reaching, |r| {
            Some(labels[3 * r as usize + 1]).filter(|&l| l != u32::MAX)
        });
        // The built-in Allreduce rules depend on the job's nodes (each named by its leader)
        // and ranks.
        settings.nodes = labels
            .iter()
            .step_by(3)
            .copied()
            .collect::<std::collections::BTreeSet<u32>>()
            .len() as u32;
        settings.ranks = world.size() as u32;
        if settings.nodes > 1 {
            exchanges.node_labels = labels.iter().step_by(3).copied().collect();
            // Each rank's node is named by its leader, and the leader knows the switch.
            exchanges.switch_labels = exchanges
                .node_labels
                .iter()
                .map(|&l| labels.get(3 * l as usize + 1).copied().unwrap_or(u32::MAX))
                .collect();
        }
        let mut algs = settings.flat_allgather_algs(world.size() as usize);
        let allreduce = settings.flat_allreduce_algs();
        // The Allreduce's ring, and on several nodes the Allgatherv's
        // (`iallgatherv::flat_for`), take the Allgather ring's order.
        let ring = allreduce.contains(&AllreduceAlg::Ring) || settings.nodes > 1;
        if ring && !algs.contains(&AllgatherAlg::Ring) {
            algs.push(AllgatherAlg::Ring);
        }
        let flat_barrier = settings.barrier_alg() == BarrierAlg::Flat;
        if algs.is_empty() && allreduce.is_empty() && !flat_barrier {
            return (network, exchanges);
        }
        // Each rank's node is named by its leader, and the leader knows the switch.
        let node_of: Vec<u32> = labels.iter().step_by(3).copied().collect();
        let switch_of: Vec<u32> = node_of
            .iter()
            .map(|&l| labels.get(3 * l as usize + 1).copied().unwrap_or(u32::MAX))
            .collect();
        let place = Placement::with_switches(&node_of, &switch_of);
        let rank = world.rank() as u32;
        for alg in algs {
            if let Some(slot) = exchanges.slot(alg) {
                *slot = Order::new(alg, &place).and_then(|o| o.exchange(rank));
            }
        }
        if allreduce.iter().any(|a| a.uses_halving_order()) {
            exchanges.halving = HalvingOrder::new(&place).peers(rank);
        }
        if flat_barrier {
            exchanges.dissemination =
                remap::dissemination_peers(&remap::interleaved_positions(&place), rank);
        }
        (network, exchanges)
    }
}
