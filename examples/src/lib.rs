//! Shared helpers of the example programs.

use mpi::datatype::Equivalence;

/// An element type the examples test, built from small integers so that every reduction
/// is exact, whatever the order of operations.
pub trait Value: Equivalence + Copy + PartialEq + std::fmt::Debug + Send + 'static {
    /// Its name in reports.
    const NAME: &'static str;
    /// Whether bitwise and logical operations apply.
    const INTEGER: bool;
    /// The value of a small integer.
    fn from_i64(v: i64) -> Self;
}

macro_rules! value {
    ($t:ty, $int:expr) => {
        impl Value for $t {
            const NAME: &'static str = stringify!($t);
            const INTEGER: bool = $int;
            fn from_i64(v: i64) -> Self {
                v as $t
            }
        }
    };
}

value!(i32, true);
value!(i64, true);
value!(u8, true);
value!(f32, false);
value!(f64, false);
