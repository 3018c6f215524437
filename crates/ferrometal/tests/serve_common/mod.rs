//! `ferrometal serve` as a child process (ferrometal_test_support::serve) with this crate's
//! binary, which only its own tests can name.

use std::path::Path;

pub use ferrometal_test_support::serve::*;

/// Starts this crate's `ferrometal serve` and waits until it accepts connections.
pub fn serve(dir: &Path, port: u16, extra: &[&str]) -> Serve {
    serve_env(dir, port, extra, &[])
}

/// As [`serve`], with `env` set for serve and what it starts.
pub fn serve_env(dir: &Path, port: u16, extra: &[&str], env: &[(&str, &str)]) -> Serve {
    ferrometal_test_support::serve::serve_with_env(
        Path::new(env!("CARGO_BIN_EXE_ferrometal")),
        dir,
        port,
        extra,
        env,
    )
}
