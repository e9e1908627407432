//! MPI transport (pending).
