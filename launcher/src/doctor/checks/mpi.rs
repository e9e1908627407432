//! The checks of PMIx and the MPI libraries: which are present, by ABI, and whether a
//! PMPI library serves each.

use super::super::{Finding, Scope, Status};
use super::output_of;

/// The PMIx library topo-run links, against Slurm's PMIx plugin.
pub fn pmix() -> Finding {
    let version = crate::pmix::library_version();
    Finding::new(
        "pmix",
        Scope::Node,
        Status::Ok,
        format!("the PMIx library topo-run uses: {version}"),
    )
}

/// The MPI libraries of the linker cache (`ldconfig -p`), by ABI.
pub fn parse_ldconfig(text: &str) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        let Some((name, path)) = line.split_once(" => ") else {
            continue;
        };
        let soname = name.split_whitespace().next().unwrap_or("");
        if matches!(soname, "libmpi.so.40" | "libmpi.so.12" | "libmpich.so.12")
            && !found.iter().any(|(s, _)| s == soname)
        {
            found.push((soname.to_string(), path.trim().to_string()));
        }
    }
    // MPICH installs both names for its one library: keep the ABI's own.
    if found.iter().any(|(s, _)| s == "libmpi.so.12") {
        found.retain(|(s, _)| s != "libmpich.so.12");
    }
    found
}

/// Which MPI an ABI's soname stands for.
fn abi_name(soname: &str) -> &'static str {
    match soname {
        "libmpi.so.40" => "Open MPI 4/5",
        _ => "MPICH ABI (MPICH, Intel MPI, MVAPICH, Cray MPICH)",
    }
}

/// The MPI libraries present and, for each, whether a PMPI library serves it.
pub fn mpi_and_preload() -> Vec<Finding> {
    let cache = output_of("ldconfig", &["-p"]).or_else(|_| output_of("/sbin/ldconfig", &["-p"]));
    let mpis = match &cache {
        Ok(text) => parse_ldconfig(text),
        Err(_) => Vec::new(),
    };
    let mut out = Vec::new();
    out.push(if mpis.is_empty() {
        Finding::new(
            "mpi",
            Scope::Node,
            Status::Warn,
            match cache {
                Ok(_) => "no MPI library (libmpi.so.40, libmpi.so.12) in the linker cache".into(),
                Err(e) => e,
            },
        )
        .fix("install Open MPI (Debian: openmpi-bin libopenmpi3) on every node")
    } else {
        let list: Vec<String> = mpis
            .iter()
            .map(|(s, p)| format!("{} ({s} at {p})", abi_name(s)))
            .collect();
        Finding::new("mpi", Scope::Node, Status::Ok, list.join("; "))
    });

    let lib_env = std::env::var_os(crate::preload::LIB_ENV);
    let exe = std::env::current_exe().ok();
    let looked = crate::preload::candidates(lib_env.as_deref(), exe.as_deref());
    let lib = looked.iter().find(|p| p.is_file());
    let served = lib.and_then(|l| crate::preload::built_against(l));
    match (lib, &served) {
        (None, _) => out.push(
            Finding::new(
                "pmpi library",
                Scope::Node,
                Status::Warn,
                format!(
                    "{} not found (looked at {}): unmodified MPI programs keep MPI's own \
                     collectives",
                    crate::preload::LIB_NAME,
                    looked
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
            .fix(format!(
                "install it with scripts/install.sh (PREFIX/lib/topo-run/), or set {} to it",
                crate::preload::LIB_ENV
            )),
        ),
        (Some(lib), None) => out.push(
            Finding::new(
                "pmpi library",
                Scope::Node,
                Status::Fail,
                format!(
                    "{} names no MPI library: it is not topo-run's PMPI library",
                    lib.display()
                ),
            )
            .fix("reinstall topo-run"),
        ),
        (Some(lib), Some(needs)) => {
            let present = mpis.iter().any(|(s, _)| s == needs);
            out.push(if present || mpis.is_empty() {
                Finding::new(
                    "pmpi library",
                    Scope::Node,
                    Status::Ok,
                    format!(
                        "{} serves {} programs ({needs})",
                        lib.display(),
                        abi_name(needs)
                    ),
                )
            } else {
                Finding::new(
                    "pmpi library",
                    Scope::Node,
                    Status::Warn,
                    format!(
                        "{} was built against {needs}, which this node does not have",
                        lib.display()
                    ),
                )
                .fix("build topo-run against the MPI installed here")
            });
        }
    }
    for (soname, _) in mpis.iter().filter(|(s, _)| Some(s) != served.as_ref()) {
        out.push(Finding::new(
            "pmpi library",
            Scope::Node,
            Status::Info,
            format!(
                "programs built with the {} ({soname}) run with their own collectives: \
                 topo-run has no PMPI library for that ABI",
                abi_name(soname)
            ),
        ));
    }
    out
}
