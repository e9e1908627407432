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
