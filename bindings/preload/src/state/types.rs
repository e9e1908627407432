//! The datatype lookups a call makes, cached for predefined types.

use super::*;

/// The datatypes a call looks up, predefined ones cached, for the closure of [`run`].
pub(crate) struct TypeCache<'a> {
    pub(super) types: &'a mut ByHandle<TypeInfo>,
    pub(super) quiet: Option<MPI_Comm>,
}

impl TypeCache<'_> {
    /// Whether MPI can pack `dt` (it is committed); see `abi::committed`.
    pub(crate) fn committed(&self, dt: MPI_Datatype) -> bool {
        self.quiet.is_some_and(|q| abi::committed(dt, q))
    }

    /// What `dt` is (predefined types are cached; derived ones are asked each time, since
    /// their handles are freed and reused).
    pub(crate) fn datatype(&mut self, dt: MPI_Datatype) -> TypeInfo {
        if let Some(t) = self.types.get(&(dt.0 as usize)) {
            return *t;
        }
        let t = abi::type_info(dt);
        if matches!(t, TypeInfo::Plain { .. }) {
            self.types.insert(dt.0 as usize, t);
        }
        t
    }
}
