//! The BareMetalHost reconciler: read → decide (pure) → apply.

pub mod boot_media;
pub mod capacity;
pub mod chain;
pub mod companions;
pub mod context;
pub mod decide;
pub mod reconcile;

#[cfg(test)]
mod decide_tests;
