//! A mistyped option of a launch. The program and its arguments follow topo-run's own
//! options without a `--` too (`srun topo-run --levels node ./app`), so an option topo-run
//! does not know would be taken for the program (`--levl: command not found`, exit 127).
//! A program whose name starts with `-` and that no `--` announced is such an option:
//! topo-run names it, with the closest option it has, and stops with the usage exit code.

use std::ffi::OsString;

use clap::CommandFactory;

use crate::cli::Cli;
use crate::plan_cmd::UsageError;

/// Fails with the mistyped option and its closest real one if `program` starts with an
/// option-like word that no `--` in the command line (`args`, as the process got them)
/// put there.
pub fn check(program: &[OsString], args: &[OsString]) -> Result<(), UsageError> {
    let Some(first) = program.first().and_then(|p| p.to_str()) else {
        return Ok(());
    };
    if !first.starts_with('-') || first == "-" {
        return Ok(());
    }
    // Everything after a `--` is the program's, however it looks.
    let announced = args
        .iter()
        .position(|a| a == "--")
        .is_some_and(|sep| args[sep + 1..].first() == program.first());
    if announced {
        return Ok(());
    }
    let word = first.split('=').next().unwrap_or(first);
    let mut msg = format!("unknown option `{word}`");
    if let Some(near) = closest(word) {
        msg.push_str(&format!("; did you mean `{near}`?"));
    }
    msg.push_str(" (a program whose name starts with `-` goes after `--`; see topo-run --help)");
    Err(UsageError(msg))
}

/// The launch's option closest to `word` by edit distance, if one is close enough.
fn closest(word: &str) -> Option<String> {
    let cmd = Cli::command();
    let names = cmd.get_arguments().flat_map(|a| {
        let long = a.get_long().map(|l| format!("--{l}"));
        let short = a.get_short().map(|s| format!("-{s}"));
        long.into_iter().chain(short)
    });
    names
        .map(|n| (distance(word, &n), n))
        .filter(|(d, n)| *d <= 2.max(n.len() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, n)| n)
}

/// Levenshtein distance between `a` and `b`.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn a_mistyped_option_is_named_with_the_closest_real_one() {
        let args = os(&["topo-run", "--levl", "node", "./app"]);
        let e = check(&os(&["--levl", "node", "./app"]), &args).unwrap_err();
        assert!(e.0.contains("unknown option `--levl`"), "{}", e.0);
        assert!(e.0.contains("did you mean `--levels`?"), "{}", e.0);
        let e = check(&os(&["--progres-thread", "./app"]), &args).unwrap_err();
        assert!(e.0.contains("`--progress-thread`"), "{}", e.0);
        // Nothing close: no guess.
        let e = check(&os(&["--frobnicate-everything", "./app"]), &args).unwrap_err();
        assert!(!e.0.contains("did you mean"), "{}", e.0);
    }

    #[test]
    fn programs_are_left_alone() {
        let args = os(&["topo-run", "--levels", "node", "./app", "-x"]);
        assert!(check(&os(&["./app", "-x"]), &args).is_ok());
        // After `--`, a name that starts with `-` is the program's.
        let args = os(&["topo-run", "--", "-weird", "--levl"]);
        assert!(check(&os(&["-weird", "--levl"]), &args).is_ok());
    }

    #[test]
    fn the_distance_counts_edits() {
        assert_eq!(distance("--levl", "--levels"), 2);
        assert_eq!(distance("abc", "abc"), 0);
        assert_eq!(distance("", "ab"), 2);
    }
}
