//! The BareMetalHost reconciler: read → decide (pure) → apply.

pub mod chain;
pub mod conditions;
pub mod decide;
pub mod reconcile;
pub mod status;

#[cfg(test)]
mod decide_tests;
