//! lockmeter's profile model and its versioned file encoding.
//!
//! See [`model`] for the data and `FORMAT.md` for the bytes.

pub mod model;
pub use model::*;
