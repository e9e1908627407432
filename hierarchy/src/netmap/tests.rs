use super::*;

const CONF: &str = "
# two leaves under a spine
SwitchName=s0 Nodes=dev[0-1]   # leaf
switchname=s1 nodes=dev[2-3] LinkSpeed=100
SwitchName=s2 \\
    Switches=s[0-1]
";

#[test]
fn reads_topology_conf() {
    let map = NetworkMap::from_str(CONF).unwrap();
    assert_eq!(map.format(), MapFormat::SlurmConf);
    let path: Vec<&str> = map
        .path("dev3")
        .unwrap()
        .into_iter()
        .map(|s| map.switch_name(s))
        .collect();
    assert_eq!(path, ["s1", "s2"]);
    assert_eq!(map.path("dev9"), None);
}

#[test]
fn three_formats_give_the_same_tree() {
    let ours = "switches:\n  s0: {nodes: \"dev[0-1]\"}\n  s1:\n    nodes: [dev2, dev3]\n  s2: {switches: \"s[0-1]\"}\n";
    let slurm_yaml = "---\n- topology: blocks\n  block:\n    block_sizes: [2]\n- topology: main\n  cluster_default: true\n  tree:\n    switches:\n      - switch: s2\n        children: s[0-1]\n      - switch: s0\n        nodes: dev[0-1]\n      - switch: s1\n        nodes: dev[2-3]\n";
    let a = NetworkMap::from_str(CONF).unwrap();
    let b = NetworkMap::from_str(ours).unwrap();
    let c = NetworkMap::from_str(slurm_yaml).unwrap();
    assert_eq!(b.format(), MapFormat::TopoYaml);
    assert_eq!(c.format(), MapFormat::SlurmYaml);
    assert_eq!(a.canonical(), b.canonical());
    assert_eq!(a.canonical(), c.canonical());
}

fn err(text: &str) -> Error {
    NetworkMap::from_str(text).unwrap_err()
}

#[test]
fn structural_errors_name_the_culprit() {
    let e = err("SwitchName=a Nodes=n[1-3]\nSwitchName=b Nodes=n3");
    assert_eq!(
        e,
        Error::MapNodeTwoParents {
            node: "n3".into(),
            first: "a".into(),
            second: "b".into()
        }
    );
    let e = err(
        "SwitchName=a Nodes=n1\nSwitchName=b Nodes=n2\nSwitchName=t1 Switches=a\nSwitchName=t2 Switches=a,b",
    );
    assert_eq!(
        e,
        Error::MapSwitchTwoParents {
            switch: "a".into(),
            first: "t1".into(),
            second: "t2".into()
        }
    );
    let e = err("SwitchName=a Switches=b\nSwitchName=b Switches=c\nSwitchName=c Switches=a");
    assert!(
        matches!(&e, Error::MapCycle { cycle } if cycle.len() == 4),
        "{e}"
    );
    assert!(
        e.to_string().contains("a -> b -> c -> a") || e.to_string().contains("->"),
        "{e}"
    );
    let e = err("SwitchName=a Nodes=n1 Switches=b\nSwitchName=b Nodes=n2");
    assert_eq!(e, Error::MapMixedChildren { switch: "a".into() });
    let e = err("SwitchName=a Switches=ghost");
    assert_eq!(
        e,
        Error::MapUnknownSwitch {
            parent: "a".into(),
            child: "ghost".into()
        }
    );
    let e = err("SwitchName=a Nodes=n1\nSwitchName=a Nodes=n2");
    assert_eq!(e, Error::MapDuplicateSwitch { switch: "a".into() });
    let e = err("switches:\n  a: {nodes: n1}\n  a: {nodes: n2}\n");
    assert_eq!(e, Error::MapDuplicateSwitch { switch: "a".into() });
    let e = err("SwitchName=s Switches=s");
    assert!(matches!(e, Error::MapCycle { .. }), "{e}");
}

#[test]
fn syntax_errors_have_lines() {
    let e = err("SwitchName=a Nodes=n1\nSwitchName=b Colour=red");
    assert!(matches!(e, Error::MapSyntax { line: Some(2), .. }), "{e}");
    assert!(e.to_string().contains("Colour"), "{e}");
    let e = err("SwitchName=a Nodes=n[1-");
    assert!(
        e.to_string().contains("line 1") && e.to_string().contains("n[1-"),
        "{e}"
    );
    let e = err("Nodes=n1 SwitchName=a\nNodes=n2");
    assert!(matches!(e, Error::MapSyntax { line: Some(2), .. }), "{e}");
    assert!(matches!(err(""), Error::MapSyntax { .. }));
    assert!(matches!(err("hello world"), Error::MapSyntax { .. }));
    assert!(matches!(
        err("switches:\n  a: {nodes: n1, colour: red}\n"),
        Error::MapSyntax { .. }
    ));
    let e = err("- topology: flat1\n  flat: true\n");
    assert!(e.to_string().contains("no tree topology"), "{e}");
}

#[test]
fn multi_tier_heights() {
    let map = NetworkMap::from_str(
        "SwitchName=l1 Nodes=n[1-2]\nSwitchName=l2 Nodes=n[3-4]\nSwitchName=l3 Nodes=n[5-6]\n\
         SwitchName=agg1 Switches=l[1-2]\nSwitchName=agg2 Switches=l3\nSwitchName=core Switches=agg[1-2]",
    )
    .unwrap();
    let names = |n: &str| -> Vec<String> {
        map.path(n)
            .unwrap()
            .into_iter()
            .map(|s| map.switch_name(s).to_string())
            .collect()
    };
    assert_eq!(names("n1"), ["l1", "agg1", "core"]);
    assert_eq!(names("n6"), ["l3", "agg2", "core"]);
}
