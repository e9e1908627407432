//! Whether to preload topo-run's PMPI library (`libtopo_preload.so`) into the program, so
//! that an unmodified MPI program's collectives take topo-run's path.
//!
//! By default (`auto`) the library is preloaded into a program that is a dynamically
//! linked ELF file needing an MPI library of the same ABI (`libmpi.so.40` for Open MPI 4,
//! `libmpich.so.12` or `libmpi.so.12` for the MPICH family) as one of the PMPI libraries
//! found: the Open MPI build, and the MPICH build installed in `lib/topo-run/mpich/` (or, in
//! a build tree, `target/mpich/release/`). Not when the program carries the `.topo_runtime` section
//! that `topo-runtime` puts into programs calling it directly: those already have
//! topo-run's collectives where they ask for them, and their calls to MPI's own
//! collectives (benchmarks compare against them) must stay MPI's own.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use crate::elf;

/// The library's file name.
pub const LIB_NAME: &str = "libtopo_preload.so";
/// Where the library is, overriding the search beside the `topo-run` executable.
pub const LIB_ENV: &str = "TOPO_RUN_PRELOAD_LIB";
/// `auto`, `1`/`yes`/`on` (`--preload`) or `0`/`no`/`off` (`--no-preload`).
pub const MODE_ENV: &str = "TOPO_RUN_PRELOAD";
/// The section `topo-runtime` puts into programs that call it.
pub const MARK_SECTION: &str = ".topo_runtime";

/// When to preload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Dynamically linked MPI programs built against the library's MPI, without the mark.
    Auto,
    /// Always (the library must exist).
    Always,
    /// Never.
    Never,
}

/// `TOPO_RUN_PRELOAD` has a value that is none of the accepted ones (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{MODE_ENV}={0:?} is not one of auto, 1, yes, on, 0, no, off")]
pub struct BadMode(pub String);

/// `--preload` was asked for but the library cannot be found (exit code 14).
#[derive(Debug, thiserror::Error)]
#[error(
    "--preload: {LIB_NAME} not found (looked at {looked}); build it with `cargo build \
     --release -p topo-preload` and put it beside topo-run, or set {LIB_ENV} to its path"
)]
pub struct LibMissing {
    pub looked: String,
}

/// The mode from the options and the environment: an option wins over the variable.
pub fn mode(preload: bool, no_preload: bool, env: Option<&str>) -> Result<Mode, BadMode> {
    if preload {
        return Ok(Mode::Always);
    }
    if no_preload {
        return Ok(Mode::Never);
    }
    match env.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
        None | Some("" | "auto") => Ok(Mode::Auto),
        Some("1" | "yes" | "on" | "true") => Ok(Mode::Always),
        Some("0" | "no" | "off" | "false") => Ok(Mode::Never),
        Some(_) => Err(BadMode(env.unwrap_or_default().to_string())),
    }
}

/// Where to look for the library: `$TOPO_RUN_PRELOAD_LIB`, else beside the executable,
/// in `../lib/topo-run/` and in `../lib/` from it; then the builds for other MPI ABIs: the
/// MPICH one in `../lib/topo-run/mpich/` (installed) and `../../mpich/release/` (a build
/// tree's `target/mpich/release`, beside `target/release`).
pub fn candidates(lib_env: Option<&OsStr>, exe: Option<&Path>) -> Vec<PathBuf> {
    if let Some(p) = lib_env.filter(|p| !p.is_empty()) {
        return vec![PathBuf::from(p)];
    }
    let Some(dir) = exe.and_then(Path::parent) else {
        return Vec::new();
    };
    vec![
        dir.join(LIB_NAME),
        dir.join("../lib/topo-run").join(LIB_NAME),
        dir.join("../lib").join(LIB_NAME),
        dir.join("../lib/topo-run/mpich").join(LIB_NAME),
        dir.join("../mpich/release").join(LIB_NAME),
    ]
}

/// Whether two MPI sonames name one ABI: equal, or both of the MPICH family (`libmpich.so.12`
/// and `libmpi.so.12`, which Intel MPI, MVAPICH and Cray MPICH also provide).
pub fn same_abi(a: &str, b: &str) -> bool {
    let mpich = |s: &str| s == "libmpich.so.12" || s == "libmpi.so.12";
    a == b || (mpich(a) && mpich(b))
}

/// The outcome, with the reason for `-v`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Preload this library.
    Preload { lib: PathBuf, why: String },
    /// Do not; `warn` is set when the user probably expected it.
    Skip { why: String, warn: bool },
}

/// The program file the name resolves to (`PATH` lookup for a bare name).
fn resolve(program: &OsStr, path: Option<&OsStr>) -> Option<PathBuf> {
    let p = Path::new(program);
    if p.components().count() > 1 || program.to_string_lossy().contains('/') {
        return Some(p.to_path_buf());
    }
    std::env::split_paths(path?)
        .map(|d| d.join(p))
        .find(|c| c.is_file())
}

/// The MPI library a file needs: a `DT_NEEDED` entry naming `libmpi*` or `libmpich*`. The
/// Fortran and C++ layers stand for the MPI library of the same version, which they need
/// (a Fortran program may name only the layer): Open MPI's `libmpi_mpifh.so.40`, ... for
/// `libmpi.so.40`; MPICH's `libmpichfort.so.12` and `libmpichcxx.so.12` for
/// `libmpich.so.12`, and the MPICH ABI's `libmpifort.so.12` and `libmpicxx.so.12` (Intel
/// MPI) for `libmpi.so.12`.
fn mpi_soname(info: &elf::ElfInfo) -> Option<String> {
    let linked = info
        .needed
        .iter()
        .find(|n| n.starts_with("libmpi.") || n.starts_with("libmpich."));
    if let Some(n) = linked {
        return Some(n.clone());
    }
    info.needed.iter().find_map(|n| {
        let (base, layer) = [
            ("libmpich", "libmpichfort"),
            ("libmpich", "libmpichcxx"),
            ("libmpi", "libmpifort"),
            ("libmpi", "libmpicxx"),
            ("libmpi", "libmpi_"),
            ("libmpi", "libmpi++"),
        ]
        .into_iter()
        .find_map(|(base, prefix)| Some((base, n.strip_prefix(prefix)?)))?;
        let version = &layer[layer.find(".so")?..];
        Some(format!("{base}{version}"))
    })
}

/// The MPI library that a PMPI library (or any ELF file) was built against, or `None` if
/// it cannot be read or names none.
pub fn built_against(lib: &Path) -> Option<String> {
    std::fs::File::open(lib)
        .ok()
        .and_then(|mut f| elf::read(&mut f).ok())
        .and_then(|i| mpi_soname(&i))
}

/// Decides for `program`; `lib_env`, `exe` and `path` are `$TOPO_RUN_PRELOAD_LIB`, this
/// executable's path and `$PATH`.
pub fn decide(
    mode: Mode,
    program: &OsStr,
    lib_env: Option<&OsStr>,
    exe: Option<&Path>,
    path: Option<&OsStr>,
) -> Result<Decision, LibMissing> {
    let skip = |why: String, warn: bool| Ok(Decision::Skip { why, warn });
    if mode == Mode::Never {
        return skip("--no-preload".into(), false);
    }
    let looked = candidates(lib_env, exe);
    let found: Vec<PathBuf> = looked.iter().filter(|p| p.is_file()).cloned().collect();
    let name = program.to_string_lossy();
    if mode == Mode::Always {
        // The one for the program's MPI if it can tell, else the first found.
        let needs = resolve(program, path).and_then(|f| built_against(&f));
        let matching = needs.and_then(|n| {
            found
                .iter()
                .find(|l| built_against(l).is_some_and(|b| same_abi(&b, &n)))
                .cloned()
        });
        return match matching.or_else(|| found.first().cloned()) {
            Some(lib) => Ok(Decision::Preload {
                lib,
                why: "--preload".into(),
            }),
            None => Err(LibMissing {
                looked: list(&looked),
            }),
        };
    }
    let Some(file) = resolve(program, path) else {
        return skip(format!("{name} not found on PATH"), false);
    };
    if let Some(interpreter) = python_interpreter(program, &file) {
        let who = format!("{name} (Python)");
        return match mpi4py_dir(&interpreter) {
            None => skip(
                format!(
                    "{name} is a Python program and {} finds no mpi4py",
                    interpreter.to_string_lossy()
                ),
                false,
            ),
            Some(dir) => match mpi4py_needs(&dir) {
                Some(needs) => Ok(choose(&who, &needs, found, &looked)),
                None => skip(
                    format!(
                        "{name} is a Python program but mpi4py in {} names no MPI library",
                        dir.display()
                    ),
                    false,
                ),
            },
        };
    }
    let info = match std::fs::File::open(&file).map(|mut f| elf::read(&mut f)) {
        Ok(Ok(info)) => info,
        Ok(Err(e)) => {
            return skip(
                format!("{}: {e} (a script? use --preload)", file.display()),
                false,
            );
        }
        Err(e) => return skip(format!("{}: {e}", file.display()), false),
    };
    if info.sections.iter().any(|s| s == MARK_SECTION) {
        return skip(format!("{name} calls topo-runtime itself"), false);
    }
    let Some(needs) = mpi_soname(&info) else {
        return skip(format!("{name} is not dynamically linked with MPI"), false);
    };
    Ok(choose(&name, &needs, found, &looked))
}

/// The decision for a program `name` that needs MPI library `needs`: the PMPI library
/// among `found` built for the same ABI.
fn choose(name: &str, needs: &str, found: Vec<PathBuf>, looked: &[PathBuf]) -> Decision {
    let skip = |why: String, warn: bool| Decision::Skip { why, warn };
    if found.is_empty() {
        return skip(
            format!(
                "{name} is an MPI program but {LIB_NAME} was not found (looked at {}; set \
                 {LIB_ENV}); its collectives are MPI's own",
                list(looked)
            ),
            true,
        );
    }
    let built: Vec<(PathBuf, Option<String>)> = found
        .into_iter()
        .map(|l| {
            let b = built_against(&l);
            (l, b)
        })
        .collect();
    if let Some((lib, b)) = built
        .iter()
        .find(|(_, b)| b.as_deref().is_some_and(|b| same_abi(b, needs)))
    {
        return Decision::Preload {
            lib: lib.clone(),
            why: format!(
                "{name} needs {needs}; {} is built against {}",
                lib.display(),
                b.as_deref().unwrap_or_default()
            ),
        };
    }
    let have: Vec<String> = built
        .iter()
        .map(|(l, b)| match b {
            Some(b) => format!("{} (built against {b})", l.display()),
            None => format!("{} (not a PMPI library)", l.display()),
        })
        .collect();
    skip(
        format!(
            "{name} needs {needs} but no PMPI library for that MPI was found ({}); its \
             collectives are MPI's own",
            have.join(", ")
        ),
        true,
    )
}

/// The Python interpreter that runs `program` (resolved to `file`), if it is a Python
/// program: an interpreter named `python...` (`python3 app.py`), or a script whose `#!` line
/// names one (`#!/usr/bin/env python3`, `#!/usr/bin/python3 -u`). Such a program loads MPI
/// at run time (mpi4py's extension module needs it), so its own file names no MPI library.
fn python_interpreter(program: &OsStr, file: &Path) -> Option<OsString> {
    let is_python = |name: &str| {
        Path::new(name)
            .file_name()
            .and_then(OsStr::to_str)
            .is_some_and(|n| n.starts_with("python"))
    };
    if is_python(&program.to_string_lossy()) {
        return Some(program.to_os_string());
    }
    let mut head = [0u8; 256];
    let n = std::io::Read::read(&mut std::fs::File::open(file).ok()?, &mut head).ok()?;
    shebang_python(&head[..n]).map(OsString::from)
}

/// The Python interpreter a script's first line names, if it names one.
fn shebang_python(head: &[u8]) -> Option<String> {
    let line = head.strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|&b| b == b'\n')?];
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split_whitespace();
    let mut interpreter = words.next()?;
    if Path::new(interpreter).file_name() == Some(OsStr::new("env")) {
        interpreter = words.find(|w| !w.starts_with('-'))?;
    }
    Path::new(interpreter)
        .file_name()
        .and_then(OsStr::to_str)
        .is_some_and(|n| n.starts_with("python"))
        .then(|| interpreter.to_string())
}

/// Where `interpreter` finds mpi4py (its package directory), asked of the interpreter itself
/// in the job's environment (`PYTHONPATH`, a virtual environment), or `None` if it finds
/// none or does not answer within 10 seconds.
fn mpi4py_dir(interpreter: &OsStr) -> Option<PathBuf> {
    use std::process::{Command, Stdio};
    const ASK: &str = "import importlib.util as u, sys\n\
        s = u.find_spec('mpi4py')\n\
        if s and s.submodule_search_locations: sys.stdout.write(list(s.submodule_search_locations)[0])";
    let mut child = Command::new(interpreter)
        .args(["-c", ASK])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => break,
            Ok(Some(_)) | Err(_) => return None,
            Ok(None) if std::time::Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(2)),
        }
    }
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take()?, &mut out).ok()?;
    let dir = PathBuf::from(out.trim());
    (!out.trim().is_empty() && dir.is_dir()).then_some(dir)
}

/// The MPI library mpi4py's extension module in `dir` (`MPI.cpython-*.so`, `MPI.abi3.so`)
/// needs.
fn mpi4py_needs(dir: &Path) -> Option<String> {
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(OsStr::to_str)
                .is_some_and(|n| n.starts_with("MPI.") && n.ends_with(".so"))
        })
        .find_map(|p| built_against(&p))
}

fn list(paths: &[PathBuf]) -> String {
    if paths.is_empty() {
        return "nowhere: the topo-run executable's path is unknown".into();
    }
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `LD_PRELOAD` with `lib` first and the user's own entries kept after it.
pub fn ld_preload(lib: &Path, existing: Option<&OsStr>) -> OsString {
    let mut v = OsString::from(lib);
    if let Some(e) = existing.filter(|e| !e.is_empty()) {
        v.push(":");
        v.push(e);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes() {
        assert_eq!(mode(false, false, None).unwrap(), Mode::Auto);
        assert_eq!(mode(false, false, Some("auto")).unwrap(), Mode::Auto);
        assert_eq!(mode(false, false, Some("YES")).unwrap(), Mode::Always);
        assert_eq!(mode(false, false, Some("0")).unwrap(), Mode::Never);
        assert_eq!(mode(true, false, Some("0")).unwrap(), Mode::Always);
        assert_eq!(mode(false, true, Some("1")).unwrap(), Mode::Never);
        assert!(mode(false, false, Some("maybe")).is_err());
    }

    #[test]
    fn search_order() {
        let exe = Path::new("/opt/topo/bin/topo-run");
        assert_eq!(
            candidates(None, Some(exe)),
            vec![
                PathBuf::from("/opt/topo/bin/libtopo_preload.so"),
                PathBuf::from("/opt/topo/bin/../lib/topo-run/libtopo_preload.so"),
                PathBuf::from("/opt/topo/bin/../lib/libtopo_preload.so"),
                PathBuf::from("/opt/topo/bin/../lib/topo-run/mpich/libtopo_preload.so"),
                PathBuf::from("/opt/topo/bin/../mpich/release/libtopo_preload.so"),
            ]
        );
        assert_eq!(
            candidates(Some(OsStr::new("/x/lib.so")), Some(exe)),
            vec![PathBuf::from("/x/lib.so")]
        );
    }

    #[test]
    fn python_scripts_are_told_by_their_first_line() {
        let py = |head: &str| shebang_python(head.as_bytes());
        assert_eq!(
            py("#!/usr/bin/env python3\nimport x"),
            Some("python3".into())
        );
        assert_eq!(
            py("#!/usr/bin/env -S python3.11 -u\n"),
            Some("python3.11".into())
        );
        assert_eq!(
            py("#!/usr/bin/python3 -u\n"),
            Some("/usr/bin/python3".into())
        );
        assert_eq!(py("#!/bin/sh\nexec python3 app.py\n"), None);
        assert_eq!(py("#!/usr/bin/env bash\n"), None);
        assert_eq!(py("import mpi4py\n"), None);
        assert_eq!(
            py("#!/usr/bin/env python3"),
            None,
            "no end of line in the head read"
        );
    }

    /// A directory of its own under the system's temporary one.
    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("topo-preload-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// An executable shell script at `path` that prints `out`.
    fn fake_interpreter(path: &Path, out: &str) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, format!("#!/bin/sh\nprintf '%s' '{out}'\n")).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn a_python_program_is_asked_where_its_mpi4py_is() {
        let d = scratch("python");
        let lib = d.join(LIB_NAME);
        std::fs::write(&lib, b"not read: no module needs a library here").unwrap();
        let decide_for = |program: &Path| {
            decide(
                Mode::Auto,
                program.as_os_str(),
                Some(lib.as_os_str()),
                None,
                None,
            )
            .unwrap()
        };
        // An interpreter that finds no mpi4py: not preloaded, without a warning.
        let python = d.join("python3");
        fake_interpreter(&python, "");
        match decide_for(&python) {
            Decision::Skip { why, warn: false } => {
                assert!(why.contains("finds no mpi4py"), "{why}")
            }
            other => panic!("{other:?}"),
        }
        // One whose mpi4py has no extension module naming an MPI library.
        let pkg = d.join("mpi4py");
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::write(pkg.join("MPI.cpython-311-x86_64-linux-gnu.so"), b"not ELF").unwrap();
        fake_interpreter(&python, &pkg.display().to_string());
        assert_eq!(mpi4py_dir(python.as_os_str()), Some(pkg.clone()));
        match decide_for(&python) {
            Decision::Skip { why, .. } => assert!(why.contains("names no MPI library"), "{why}"),
            other => panic!("{other:?}"),
        }
        // A script whose first line names that interpreter is asked the same way.
        let script = d.join("app.py");
        std::fs::write(&script, format!("#!{}\nimport mpi4py\n", python.display())).unwrap();
        assert_eq!(
            python_interpreter(script.as_os_str(), &script),
            Some(python.clone().into_os_string())
        );
        // An interpreter that fails is taken as finding nothing.
        std::fs::write(&python, "#!/bin/sh\nexit 3\n").unwrap();
        assert_eq!(mpi4py_dir(python.as_os_str()), None);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn keeps_the_users_preload() {
        let lib = Path::new("/l/libtopo_preload.so");
        assert_eq!(ld_preload(lib, None), "/l/libtopo_preload.so");
        assert_eq!(
            ld_preload(lib, Some(OsStr::new("/u/a.so /u/b.so"))),
            "/l/libtopo_preload.so:/u/a.so /u/b.so"
        );
    }

    #[test]
    fn non_mpi_programs_are_skipped() {
        let exe = std::env::current_exe().unwrap();
        let d = decide(Mode::Auto, exe.as_os_str(), None, None, None).unwrap();
        assert!(
            matches!(&d, Decision::Skip { why, warn: false } if why.contains("not dynamically linked with MPI")),
            "{d:?}"
        );
        let d = decide(
            Mode::Auto,
            OsStr::new("/bin/sh-does-not-exist"),
            None,
            None,
            None,
        )
        .unwrap();
        assert!(matches!(d, Decision::Skip { .. }));
        let d = decide(Mode::Never, exe.as_os_str(), None, None, None).unwrap();
        assert!(matches!(d, Decision::Skip { .. }));
        assert!(
            decide(
                Mode::Always,
                exe.as_os_str(),
                Some(OsStr::new("/nonexistent.so")),
                None,
                None
            )
            .is_err()
        );
    }

    #[test]
    fn the_mpich_family_is_one_abi() {
        assert!(same_abi("libmpi.so.40", "libmpi.so.40"));
        assert!(same_abi("libmpich.so.12", "libmpi.so.12"));
        assert!(same_abi("libmpi.so.12", "libmpich.so.12"));
        assert!(!same_abi("libmpi.so.40", "libmpi.so.12"));
        assert!(!same_abi("libmpich.so.12", "libmpi.so.40"));
    }

    #[test]
    fn mpi_sonames() {
        let info = |n: &[&str]| elf::ElfInfo {
            needed: n.iter().map(|s| s.to_string()).collect(),
            sections: vec![],
        };
        let some = |s: &str| Some(s.to_string());
        let both = info(&["libmpi_mpifh.so.40", "libmpi.so.40"]);
        assert_eq!(mpi_soname(&both), some("libmpi.so.40"));
        let fortran = info(&["libmpi_mpifh.so.40", "libgfortran.so.5"]);
        assert_eq!(mpi_soname(&fortran), some("libmpi.so.40"));
        let mpich_fortran = info(&["libmpichfort.so.12", "libgfortran.so.5"]);
        assert_eq!(mpi_soname(&mpich_fortran), some("libmpich.so.12"));
        assert_eq!(
            mpi_soname(&info(&["libmpichcxx.so.12"])),
            some("libmpich.so.12")
        );
        assert_eq!(
            mpi_soname(&info(&["libmpifort.so.12"])),
            some("libmpi.so.12")
        );
        assert_eq!(mpi_soname(&info(&["libgfortran.so.5"])), None);
        assert_eq!(
            mpi_soname(&info(&["libmpich.so.12"])),
            some("libmpich.so.12")
        );
        assert_eq!(mpi_soname(&info(&["libc.so.6"])), None);
    }
}
