#![no_main]
//! Any job description: an error or a job that plans without panicking.
use libfuzzer_sys::fuzz_target;
use topo_hierarchy::{LevelFilter, build, job_from_str};

fuzz_target!(|text: &str| {
    if let Ok(job) = job_from_str(text)
        && job.size() <= 100_000
    {
        let _ = build(&job, None, &LevelFilter::all());
    }
});
