//! Shared-memory transport (pending).
