//! Helpers shared by the integration tests of several ferrometal crates. Peers run from the
//! project's `scripts/`, found from this crate's place in the repository (`crates/test-support`).

pub mod browser;
pub use fantoccini;
pub mod images;
pub mod ironic;
pub mod peers;
pub mod poll;
pub mod serve;
pub mod vmlab;

/// What the exported macros name, reachable through `$crate` from any test crate.
#[doc(hidden)]
pub mod __macro_support {
    pub use ferrometal_provisioner::Step;
    pub use tokio::time::sleep;
}
