//! The one place that calls the YAML parser, so every YAML input gets the same options.

use serde::de::DeserializeOwned;

/// Parses YAML (or JSON, which is YAML) into `T`. Duplicate keys are passed through to the
/// target type, so that maps keyed by switch name can report a duplicate by name.
pub(crate) fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    let options = serde_saphyr::options! {
        duplicate_keys: serde_saphyr::DuplicateKeyPolicy::LastWins,
    };
    serde_saphyr::from_str_with_options(text, options).map_err(|e| e.to_string())
}

/// As [`from_str`], with limits sized for job descriptions that list every rank of a large
/// job (16 million entries): the parser's defaults stop at 250,000 nodes.
pub(crate) fn from_str_large<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    let options = serde_saphyr::options! {
        duplicate_keys: serde_saphyr::DuplicateKeyPolicy::LastWins,
        budget: serde_saphyr::budget! {
            max_events: 1 << 28,
            max_nodes: 1 << 27,
            max_total_scalar_bytes: 1 << 31,
            max_reader_input_bytes: None,
        },
    };
    serde_saphyr::from_str_with_options(text, options).map_err(|e| e.to_string())
}
