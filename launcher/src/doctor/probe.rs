//! The single-copy probe: can one process read a sibling's memory with
//! `process_vm_readv`, as ranks of a node do? Two children of doctor play the two ranks
//! (`topo-run doctor --probe-hold` and `--probe-read PID ADDRESS`): a parent may read its
//! own child even where Yama's `ptrace_scope` 1 forbids reads between siblings, so doctor
//! must not be one side.

use std::io::{BufRead, BufReader, IoSliceMut, Read, Write};
use std::process::{Command, Stdio};

use nix::sys::uio::{RemoteIoVec, process_vm_readv};
use nix::unistd::Pid;

/// What the holder keeps in memory for the reader to find.
const PATTERN: &[u8; 24] = b"topo-run doctor: probe!!";

/// Doctor's side: starts the two children and says whether the read worked.
pub fn siblings_can_read() -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding topo-run: {e}"))?;
    let mut holder = Command::new(&exe)
        .args(["doctor", "--probe-hold"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("starting the probe: {e}"))?;
    let mut line = String::new();
    let read_line = holder
        .stdout
        .take()
        .map(|out| BufReader::new(out).read_line(&mut line));
    let result = match read_line {
        Some(Ok(n)) if n > 0 => {
            let words: Vec<&str> = line.split_whitespace().collect();
            let out = Command::new(&exe)
                .arg("doctor")
                .arg("--probe-read")
                .args(&words)
                .stdin(Stdio::null())
                .output()
                .map_err(|e| format!("starting the probe: {e}"))?;
            if out.status.success() {
                Ok(())
            } else {
                let err = String::from_utf8_lossy(&out.stderr);
                let err = err.trim();
                Err(err
                    .strip_prefix("topo-run: error: ")
                    .unwrap_or(err)
                    .to_string())
            }
        }
        _ => Err("the probe's first process did not start".to_string()),
    };
    drop(holder.stdin.take()); // EOF: the holder exits
    let _ = holder.wait();
    result
}

/// The holder: prints its PID and the pattern's address, then waits for EOF on stdin.
pub fn hold() -> anyhow::Result<()> {
    let buffer = Box::new(*PATTERN);
    let address = std::hint::black_box(&*buffer).as_ptr() as usize;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{} {address}", std::process::id())?;
    out.flush()?;
    let mut sink = Vec::new();
    std::io::stdin().read_to_end(&mut sink)?;
    std::hint::black_box(&buffer);
    Ok(())
}

/// The reader: reads the holder's pattern; an error says why it could not.
pub fn read(args: &[String]) -> anyhow::Result<()> {
    let [pid, address] = args else {
        anyhow::bail!("--probe-read takes PID ADDRESS");
    };
    if std::env::var("TOPO_RUN_FAULT").is_ok_and(|f| f.split(',').any(|x| x == "no-single-copy")) {
        anyhow::bail!("simulated: TOPO_RUN_FAULT=no-single-copy");
    }
    let pid: i32 = pid.parse()?;
    let base: usize = address.parse()?;
    let mut got = [0u8; PATTERN.len()];
    let remote = [RemoteIoVec {
        base,
        len: got.len(),
    }];
    let n = process_vm_readv(
        Pid::from_raw(pid),
        &mut [IoSliceMut::new(&mut got)],
        &remote,
    )
    .map_err(|e| anyhow::anyhow!("process_vm_readv: {}", e.desc()))?;
    anyhow::ensure!(
        n == got.len() && &got == PATTERN,
        "process_vm_readv read other bytes than the sibling holds"
    );
    Ok(())
}
