use super::*;

#[test]
fn byte_counts_print_as_they_parse() {
    for (n, text) in [
        (0, "0"),
        (64, "64"),
        (1536, "1536"),
        (4096, "4K"),
        (16 << 20, "16M"),
    ] {
        assert_eq!(format_bytes(n), text);
        assert_eq!(parse_bytes(text), Ok(n));
    }
    for n in [1u64, 63, 1 << 10, 3 << 20, (1 << 30) + 1024, 5 << 30] {
        assert_eq!(parse_bytes(&format_bytes(n)), Ok(n));
    }
}

fn lvl(s: &str) -> LevelName {
    s.parse().unwrap()
}

#[test]
fn flat_allgather_algs_cover_every_choice() {
    let d = Settings::default();
    assert_eq!(d.flat_allgather_algs(4), [AllgatherAlg::RecursiveDoubling]);
    assert_eq!(
        d.flat_allgather_algs(3),
        [AllgatherAlg::RecursiveDoubling, AllgatherAlg::Ring]
    );
    let s = Settings::from_pairs(&[("allgather", "<64K=ring,*=hier")]).unwrap();
    // The user's rules first, then the defaults behind them (never reached for a
    // power of two here, but the set may be larger than needed, never smaller).
    assert_eq!(
        s.flat_allgather_algs(4),
        [AllgatherAlg::Ring, AllgatherAlg::RecursiveDoubling]
    );
    // Large jobs on several nodes: the ring from 4 KiB per rank (64 ranks on 4 nodes), up
    // to 4,096 ranks.
    let many = Settings {
        nodes: 4,
        ..Settings::default()
    };
    assert_eq!(
        many.flat_allgather_algs(64),
        [AllgatherAlg::RecursiveDoubling, AllgatherAlg::Ring]
    );
    assert_eq!(many.allgather_for(64 << 12, 64), AllgatherAlg::Ring);
    assert_eq!(
        many.allgather_for((64 << 12) - 1, 64),
        AllgatherAlg::RecursiveDoubling
    );
    // Other sizes: from 6 KiB over the ranks per node, per rank, at least 128 bytes, where
    // the number of nodes is not a power of two either (3 nodes: 36 ranks per node for
    // 108, 144 for 432, 7 for 20, 12 for 36); on 4 nodes from 4 KiB. Sizes that are a
    // power of two: from 64 KiB over the ranks per node, 4 to 32 KiB (4 nodes: 8 ranks
    // per node for 32, 4 for 16; 16 nodes: 2 for 32, 1 for 16).
    let three = Settings {
        nodes: 3,
        ..Settings::default()
    };
    let sixteen = Settings {
        nodes: 16,
        ..Settings::default()
    };
    for (set, ranks, block) in [
        (&many, 32, 8 << 10),
        (&many, 16, 16 << 10),
        (&sixteen, 32, 32 << 10),
        (&sixteen, 16, 32 << 10),
        (&sixteen, 4096, 4 << 10),
        (&three, 108, 170),
        (&three, 432, 128),
        (&three, 20, 877),
        (&three, 36, 512),
        (&many, 108, 4096),
        (&many, 36, 4096),
    ] {
        assert_eq!(set.allgather_for(block * ranks, ranks), AllgatherAlg::Ring);
        assert_eq!(
            set.allgather_for(block * ranks - 1, ranks),
            AllgatherAlg::RecursiveDoubling,
            "{ranks} ranks on {} nodes",
            set.nodes
        );
    }
    assert_eq!(
        many.flat_allgather_algs(8),
        [AllgatherAlg::RecursiveDoubling]
    );
    assert_eq!(
        many.flat_allgather_algs(8192),
        [AllgatherAlg::RecursiveDoubling]
    );
    for ranks in [2, 3, 4, 6, 8, 32, 48] {
        for bytes in [8, 1 << 10, 32 << 10, 1 << 20, 64 << 20] {
            for set in [&d, &s, &many] {
                let alg = set.allgather_for(bytes, ranks);
                assert!(
                    matches!(alg, AllgatherAlg::Hierarchical(_))
                        || set.flat_allgather_algs(ranks).contains(&alg)
                );
            }
        }
    }
}

#[test]
fn allgather_rules_by_the_gathered_size() {
    let d = Settings::default();
    assert_eq!(d.allgather_for(8, 4), AllgatherAlg::RecursiveDoubling);
    assert_eq!(d.allgather_for(1 << 30, 4), AllgatherAlg::RecursiveDoubling);
    // Other sizes: Bruck (rd) below 32 KiB gathered, the ring from there.
    assert_eq!(
        d.allgather_for((32 << 10) - 1, 3),
        AllgatherAlg::RecursiveDoubling
    );
    assert_eq!(d.allgather_for(32 << 10, 3), AllgatherAlg::Ring);
    let s = Settings::from_pairs(&[("allgather", "<64K=rd,*=hier")]).unwrap();
    for ranks in [3, 4] {
        assert_eq!(
            s.allgather_for((64 << 10) - 1, ranks),
            AllgatherAlg::RecursiveDoubling
        );
        assert_eq!(
            s.allgather_for(64 << 10, ranks),
            AllgatherAlg::Hierarchical(TopAlg::RecursiveDoubling)
        );
    }
    let e = Settings::from_pairs(&[("allgather", "bruck")]).unwrap_err();
    assert!(
        e.to_string().contains("use hier:rd, hier:ring, rd or ring"),
        "{e}"
    );
    for a in [
        AllgatherAlg::Hierarchical(TopAlg::RecursiveDoubling),
        AllgatherAlg::Hierarchical(TopAlg::Ring),
        AllgatherAlg::RecursiveDoubling,
        AllgatherAlg::Ring,
    ] {
        assert_eq!(a.to_string().parse::<AllgatherAlg>(), Ok(a));
    }
}

#[test]
fn the_barrier_is_dissemination_unless_root_first_is_asked_for() {
    assert_eq!(Settings::default().barrier_alg(), BarrierAlg::Dissemination);
    for a in [
        BarrierAlg::Dissemination,
        BarrierAlg::RootFirst,
        BarrierAlg::Flat,
    ] {
        let s = Settings::from_pairs(&[("barrier", a.to_string())]).unwrap();
        assert_eq!(s.barrier_alg(), a);
    }
    // By shape: flat with up to 32 ranks per node on more than one node, from 16 ranks.
    for (nodes, ranks, alg) in [
        (16, 512, BarrierAlg::Flat),
        (2, 16, BarrierAlg::Flat),
        (16, 64, BarrierAlg::Flat),
        (16, 32, BarrierAlg::Flat),
        (16, 768, BarrierAlg::Dissemination),
        (1, 32, BarrierAlg::Dissemination),
        (2, 4, BarrierAlg::Dissemination),
    ] {
        let s = Settings {
            nodes,
            ranks,
            ..Settings::default()
        };
        assert_eq!(s.barrier_alg(), alg, "{nodes} nodes, {ranks} ranks");
        let asked = Settings {
            barrier: Some(BarrierAlg::RootFirst),
            ..s
        };
        assert_eq!(asked.barrier_alg(), BarrierAlg::RootFirst);
    }
    let e = Settings::from_pairs(&[("barrier", "tree")]).unwrap_err();
    assert!(
        e.to_string()
            .contains("use dissemination, root-first or flat"),
        "{e}"
    );
}

#[test]
fn flat_allreduce_algorithms_are_named_and_listed() {
    let s = Settings::from_pairs(&[("allreduce", "<64K=rab:rd,<1M=ring,*=rabenseifner")]).unwrap();
    assert_eq!(s.allreduce_for(100 << 10), AllreduceAlg::Ring);
    assert_eq!(s.allreduce_for(4 << 20), AllreduceAlg::Rabenseifner(0));
    assert_eq!(
        s.flat_allreduce_algs(),
        [AllreduceAlg::Ring, AllreduceAlg::Rabenseifner(0)]
    );
    for a in ["ring", "rabenseifner", "rabenseifner:256K", "rd"] {
        assert_eq!(a.parse::<AllreduceAlg>().unwrap().to_string(), a);
    }
    // The piece: none when plain, a named one is kept, one out of range is refused.
    assert_eq!(
        "rabenseifner:64K".parse::<AllreduceAlg>(),
        Ok(AllreduceAlg::Rabenseifner(RABENSEIFNER_PIECE))
    );
    assert_eq!(
        "rabenseifner:1M".parse::<AllreduceAlg>(),
        Ok(AllreduceAlg::Rabenseifner(1 << 20))
    );
    for bad in ["rabenseifner:1K", "rabenseifner:2G", "rabenseifner:x"] {
        assert!(bad.parse::<AllreduceAlg>().is_err(), "{bad}");
    }
    assert!(
        "rabenseifner:1K"
            .parse::<AllreduceAlg>()
            .unwrap_err()
            .contains("the piece must be between 4096 and 1073741824 bytes")
    );
    assert!(Settings::default().flat_allreduce_algs().is_empty());
    // Built in: the hierarchy's forms on one node, Rabenseifner's (whole) from 64 KiB on
    // more.
    let two = Settings {
        nodes: 2,
        ..Settings::default()
    };
    assert_eq!(two.flat_allreduce_algs(), [AllreduceAlg::Rabenseifner(0)]);
    assert_eq!(two.allreduce_for(64 << 10), AllreduceAlg::Rabenseifner(0));
    assert_eq!(
        two.allreduce_for((64 << 10) - 1),
        AllreduceAlg::ReduceAllreduceBcast(TopAlg::RecursiveDoubling)
    );
    // From 16 ranks, from 4 KiB, in pieces.
    let many = Settings {
        nodes: 2,
        ranks: 16,
        ..Settings::default()
    };
    assert_eq!(
        many.allreduce_for(4 << 10),
        AllreduceAlg::Rabenseifner(RABENSEIFNER_PIECE)
    );
    assert_eq!(
        many.allreduce_for((4 << 10) - 1),
        AllreduceAlg::ReduceAllreduceBcast(TopAlg::RecursiveDoubling)
    );
    // With up to 32 ranks per node, recursive doubling over every rank for small
    // messages: below 8 KiB up to 4 per node, below 1 KiB up to 16, below 256 B up to 32.
    let rab_rd = AllreduceAlg::ReduceAllreduceBcast(TopAlg::RecursiveDoubling);
    let rd = AllreduceAlg::RecursiveDoubling;
    assert_eq!(many.allreduce_for(1023), rd);
    assert_eq!(many.allreduce_for(1024), rab_rd);
    assert_eq!(
        many.flat_allreduce_algs(),
        [rd, AllreduceAlg::Rabenseifner(RABENSEIFNER_PIECE)]
    );
    let shape = |nodes, per_node| Settings {
        nodes,
        ranks: nodes * per_node,
        ..Settings::default()
    };
    for (nodes, per_node, bytes, alg) in [
        (16, 32, 255, rd),
        (16, 32, 256, rab_rd),
        (16, 17, 256, rab_rd),
        (16, 16, 1023, rd),
        (16, 5, 8, rd),
        (16, 4, 8, rd),
        (16, 2, (8 << 10) - 1, rd),
        (128, 1, (8 << 10) - 1, rd),
        (
            16,
            2,
            8 << 10,
            AllreduceAlg::Rabenseifner(RABENSEIFNER_PIECE),
        ),
        (2, 4, 8, rab_rd),
        (16, 48, 8, rab_rd),
        (1, 32, 8, rab_rd),
        (3, 5, 8, rab_rd),
    ] {
        assert_eq!(
            shape(nodes, per_node).allreduce_for(bytes),
            alg,
            "{nodes} x {per_node}, {bytes} B"
        );
    }
}

#[test]
fn ring_algorithms_belong_to_their_collective() {
    let s = Settings::from_pairs(&[
        ("bcast", "inter=scatter-allgather"),
        ("reduce", "node=reduce-scatter-gather"),
        ("single-copy", "0"),
    ])
    .unwrap();
    assert_eq!(
        s.bcast_for(lvl("world"), false, 2, 8),
        BcastAlg::ScatterAllgather
    );
    assert_eq!(
        s.reduce_for(lvl("node"), true, 2, 8),
        ReduceAlg::ReduceScatterGather
    );
    assert_eq!(s.single_copy, 0);
    assert!(!s.progress_thread);
    let e = Settings::from_pairs(&[("reduce", "scatter-allgather")]).unwrap_err();
    assert!(e.to_string().contains("reduce-scatter-gather"), "{e}");
    assert!(Settings::from_pairs(&[("bcast", "reduce-scatter-gather")]).is_err());
}

#[test]
fn defaults_and_user_rules() {
    let d = Settings::default();
    assert_eq!(d.bcast_for(lvl("numa"), true, 2, 8), BcastAlg::Flat);
    assert_eq!(
        d.bcast_for(lvl("switch1"), false, 2, 8),
        BcastAlg::Knomial(2)
    );
    assert_eq!(
        d.allreduce_for(1 << 20),
        AllreduceAlg::ReduceAllreduceBcast(TopAlg::Ring)
    );
    let s = Settings::from_pairs(&[
        ("bcast", "numa=knomial:4,inter<64K=flat"),
        ("fragment", "16K"),
        ("slots", "4"),
        ("allreduce", "rb"),
    ])
    .unwrap();
    assert_eq!(s.fragment, 16384);
    assert_eq!(s.slots, 4);
    assert_eq!(
        s.bcast_for(lvl("numa"), true, 2, 1 << 30),
        BcastAlg::Knomial(4)
    );
    assert_eq!(s.bcast_for(lvl("world"), false, 2, 100), BcastAlg::Flat);
    assert_eq!(
        s.bcast_for(lvl("world"), false, 2, 64 << 10),
        BcastAlg::Knomial(2)
    );
    assert_eq!(s.allreduce_for(4), AllreduceAlg::ReduceBcast);
}

#[test]
fn a_rule_may_name_the_group_size() {
    let numa = lvl("numa");
    let s = Settings::from_pairs(&[("reduce", "intra>4<4K=knomial:3,intra=flat")]).unwrap();
    assert_eq!(s.reduce_for(numa, true, 4, 100), ReduceAlg::Flat);
    assert_eq!(s.reduce_for(numa, true, 5, 100), ReduceAlg::Knomial(3));
    assert_eq!(s.reduce_for(numa, true, 5, 4096), ReduceAlg::Flat);
    // The defaults: flat for groups of two and small messages, else by size.
    let d = Settings::default();
    assert_eq!(d.reduce_for(numa, true, 2, 1 << 20), ReduceAlg::Flat);
    assert_eq!(d.reduce_for(numa, true, 16, 511), ReduceAlg::Flat);
    assert_eq!(d.reduce_for(numa, true, 16, 512), ReduceAlg::Knomial(4));
    assert_eq!(
        d.reduce_for(numa, true, 3, 4096),
        ReduceAlg::ReduceScatterGather
    );
    assert_eq!(
        d.reduce_for(lvl("world"), false, 16, 1 << 20),
        ReduceAlg::Knomial(2)
    );
    for (key, value, needle) in [
        ("reduce", "intra>two=flat", "not a number of members"),
        ("allreduce", "*>2=ring", "bcast and reduce rules only"),
        ("allgather", ">2<4K=rd", "bcast and reduce rules only"),
    ] {
        let e = Settings::from_pairs(&[(key, value)])
            .unwrap_err()
            .to_string();
        assert!(e.contains(needle), "{value}: {e}");
    }
}

#[test]
fn chunk_rules_by_collective_and_size() {
    let d = Settings::default();
    assert_eq!(d.chunk_for(Collective::Bcast, (256 << 10) - 1), 16 << 10);
    assert_eq!(d.chunk_for(Collective::Bcast, 256 << 10), 1 << 20);
    assert_eq!(d.chunk_for(Collective::Reduce, 4), 1 << 20);
    assert_eq!(d.chunk_for(Collective::Allreduce, 1 << 30), 1 << 20);
    assert_eq!(d.chunk_for(Collective::Allgather, 1 << 30), DEFAULT_CHUNK);
    let s = Settings::from_pairs(&[("chunk", "bcast<128K=16K,allreduce=1M,512K")]).unwrap();
    assert_eq!(s.chunk_for(Collective::Bcast, (128 << 10) - 1), 16 << 10);
    assert_eq!(s.chunk_for(Collective::Bcast, 128 << 10), 512 << 10);
    assert_eq!(s.chunk_for(Collective::Allreduce, 4), 1 << 20);
    assert_eq!(s.chunk_for(Collective::Reduce, 1 << 30), 512 << 10);
    // Without a rule for every size, the defaults take the rest.
    let s = Settings::from_pairs(&[("chunk", "<64K=8K")]).unwrap();
    assert_eq!(s.chunk_for(Collective::Allgather, 100), 8 << 10);
    assert_eq!(s.chunk_for(Collective::Allgather, 64 << 10), DEFAULT_CHUNK);
    // Rules print as they parse.
    let text = "bcast<128K=16K,allreduce=1M,<2M=64K,*=256K";
    let s = Settings::from_pairs(&[("chunk", text)]).unwrap();
    let shown: Vec<String> = s.chunk.iter().map(ToString::to_string).collect();
    assert_eq!(shown.join(","), text);
    for (v, needle) in [
        ("gather=1M", "unknown collective"),
        ("bcast<1Q=1M", "byte count"),
        (
            "bcast=1K",
            "rule \"bcast=1K\": the chunk must be between 4096 and 1073741824 bytes",
        ),
        ("", "no chunk"),
    ] {
        let e = Settings::from_pairs(&[("chunk", v)]).unwrap_err();
        assert!(e.to_string().contains(needle), "{v}: {e}");
    }
}

#[test]
fn bad_settings_are_named() {
    for (k, v, needle) in [
        ("slots", "1", "2 to 1024"),
        ("fragment", "100", "multiple of 64"),
        ("fragment", "12Q", "byte count"),
        ("chunk", "1", "between"),
        ("bcast", "numa=ring", "unknown algorithm"),
        ("bcast", "numa", "unknown algorithm"),
        ("reduce", "nowhere=flat", "nowhere"),
        ("reduce", "knomial:1", "radix"),
        ("reduce", "*=knomial:1", "radix"),
        ("allreduce", "*=fast", "rb, rab:rd"),
        ("colour", "blue", "unknown setting"),
    ] {
        let e = Settings::from_pairs(&[(k, v)]).unwrap_err();
        assert!(e.to_string().contains(needle), "{k}={v}: {e}");
        assert!(e.to_string().contains(k), "{e}");
    }
}

#[test]
fn alltoall_rules_by_the_block_size() {
    let one = Settings::default();
    assert_eq!(one.alltoall_for(1), AlltoallAlg::Pairwise);
    // Spread below 64-byte blocks on several nodes of at least 4 ranks, else pairwise.
    for (nodes, ranks, spread) in [
        (2, 4, false),
        (16, 32, false),
        (2, 8, true),
        (8, 64, true),
        (4, 128, true),
        (2, 512, true),
        (1, 64, false),
    ] {
        let s = Settings {
            nodes,
            ranks,
            ..Settings::default()
        };
        let small = if spread {
            AlltoallAlg::Spread
        } else {
            AlltoallAlg::Pairwise
        };
        assert_eq!(s.alltoall_for(63), small, "{nodes} x {ranks}");
        assert_eq!(
            s.alltoall_for(64),
            AlltoallAlg::Pairwise,
            "{nodes} x {ranks}"
        );
    }
    let s = Settings::from_pairs(&[("alltoall", "<64=pairwise,aggregated")]).unwrap();
    assert_eq!(s.alltoall_for(63), AlltoallAlg::Pairwise);
    assert_eq!(s.alltoall_for(1 << 20), AlltoallAlg::Aggregated);
    let e = Settings::from_pairs(&[("alltoall", "bruck")]).unwrap_err();
    assert!(e.to_string().contains("aggregated or pairwise"), "{e}");
}

#[test]
fn the_reduce_scatter_form_follows_the_block_and_the_ranks_per_node() {
    use crate::settings::ReduceScatterAlg;
    let job = |nodes, ranks| Settings {
        nodes,
        ranks,
        ..Settings::default()
    };
    // One node: through rank 0 on two ranks, by halving on more.
    assert_eq!(job(1, 2).reduce_scatter_for(8), ReduceScatterAlg::Root);
    assert_eq!(
        job(1, 2).reduce_scatter_for(1 << 20),
        ReduceScatterAlg::Root
    );
    assert_eq!(
        job(1, 64).reduce_scatter_for(1 << 20),
        ReduceScatterAlg::Halving
    );
    // Several nodes: by halving while the whole contribution is below 256 KiB, then as
    // the Allreduce on nodes of more than 2 ranks; on 2 nodes of 2 ranks by halving below
    // 2 MiB, then through the leaders.
    assert_eq!(job(2, 4).reduce_scatter_for(8), ReduceScatterAlg::Halving);
    assert_eq!(
        job(2, 4).reduce_scatter_for((512 << 10) - 1),
        ReduceScatterAlg::Halving
    );
    assert_eq!(
        job(2, 4).reduce_scatter_for(512 << 10),
        ReduceScatterAlg::Leaders
    );
    // More than 2 nodes of 2 ranks: the Allreduce's form from there.
    assert_eq!(
        job(16, 32).reduce_scatter_for((8 << 10) - 1),
        ReduceScatterAlg::Halving
    );
    assert_eq!(
        job(16, 32).reduce_scatter_for(8 << 10),
        ReduceScatterAlg::Allreduce
    );
    assert_eq!(job(2, 6).reduce_scatter_for(8), ReduceScatterAlg::Halving);
    assert_eq!(
        job(16, 512).reduce_scatter_for(511),
        ReduceScatterAlg::Halving
    );
    assert_eq!(
        job(16, 512).reduce_scatter_for(512),
        ReduceScatterAlg::Allreduce
    );
    assert_eq!(
        job(16, 512).reduce_scatter_for(1 << 20),
        ReduceScatterAlg::Allreduce
    );
    let s = Settings::from_pairs(&[("reduce-scatter", "<4K=leaders,*=root")]).unwrap();
    assert_eq!(s.reduce_scatter_for(4095), ReduceScatterAlg::Leaders);
    assert_eq!(s.reduce_scatter_for(4096), ReduceScatterAlg::Root);
    // Several nodes, a job size that is not a power of two: the ring from 4 KiB blocks.
    assert_eq!(
        job(3, 18).reduce_scatter_for(4095),
        ReduceScatterAlg::Halving
    );
    assert_eq!(job(3, 18).reduce_scatter_for(4096), ReduceScatterAlg::Ring);
    assert_eq!(
        job(3, 18).reduce_scatter_for(1 << 20),
        ReduceScatterAlg::Ring
    );
    assert_eq!(
        job(1, 18).reduce_scatter_for(4096),
        ReduceScatterAlg::Halving
    );
    assert_eq!(
        job(4, 16).reduce_scatter_for(4096),
        ReduceScatterAlg::Halving
    );
    assert!(job(3, 18).reduce_scatter_v_halving(4096));
    let r = Settings::from_pairs(&[("reduce-scatter", "ring")]).unwrap();
    assert_eq!(r.reduce_scatter_for(8), ReduceScatterAlg::Ring);
    let e = Settings::from_pairs(&[("reduce-scatter", "rings")]).unwrap_err();
    assert!(
        e.to_string()
            .contains("root, leaders, allreduce, halving or ring"),
        "{e}"
    );
    // Reduce_scatter (blocks of any lengths): halving but where the rules give the
    // Allreduce's form.
    assert!(job(1, 2).reduce_scatter_v_halving(8));
    assert!(job(2, 4).reduce_scatter_v_halving(1 << 20));
    assert!(job(16, 512).reduce_scatter_v_halving(511));
    assert!(!job(16, 512).reduce_scatter_v_halving(512));
    let a = Settings::from_pairs(&[("reduce-scatter", "<4K=allreduce,*=leaders")]).unwrap();
    assert!(!a.reduce_scatter_v_halving(8));
    assert!(a.reduce_scatter_v_halving(4096));
}

#[test]
fn gatherv_and_scatterv_go_through_the_leaders_with_more_than_two_ranks_per_node() {
    let job = |nodes, ranks| Settings {
        nodes,
        ranks,
        ..Settings::default()
    };
    assert_eq!(job(1, 64).rooted_v_alg(), RootedVAlg::Direct);
    assert_eq!(job(2, 4).rooted_v_alg(), RootedVAlg::Direct);
    assert_eq!(job(2, 5).rooted_v_alg(), RootedVAlg::Leaders);
    assert_eq!(job(64, 2048).rooted_v_alg(), RootedVAlg::Leaders);
    let s = Settings::from_pairs(&[("rooted-v", "leaders")]).unwrap();
    assert_eq!(s.rooted_v_alg(), RootedVAlg::Leaders);
    let s = Settings::from_pairs(&[("rooted-v", "direct"), ("nodes", "8")]);
    assert!(s.is_err(), "nodes is not a setting");
    let e = Settings::from_pairs(&[("rooted-v", "linear")]).unwrap_err();
    assert!(e.to_string().contains("use leaders or direct"), "{e}");
}

#[test]
fn single_copy_starts_later_where_ranks_outnumber_cores() {
    let none: [(&str, &str); 0] = [];
    assert_eq!(
        Settings::from_pairs(&none).unwrap().single_copy,
        DEFAULT_SINGLE_COPY
    );
    let s = Settings::from_pairs(&[("spin", "0")]).unwrap();
    assert_eq!(s.single_copy, OVERSUBSCRIBED_SINGLE_COPY);
    // Set, in either order, it stays as set.
    for pairs in [
        [("spin", "0"), ("single-copy", "16K")],
        [("single-copy", "16K"), ("spin", "0")],
    ] {
        assert_eq!(Settings::from_pairs(&pairs).unwrap().single_copy, 16 << 10);
    }
    let s = Settings::from_pairs(&[("spin", "0"), ("single-copy", "0")]).unwrap();
    assert_eq!(s.single_copy, 0);
    let s = Settings::from_pairs(&[("spin", "64")]).unwrap();
    assert_eq!(s.single_copy, DEFAULT_SINGLE_COPY);
}
