//! Runs this crate's `ferrometal move` between two serves, as a user would; shared by the move
//! tests.

use std::process::{Command, Output};

use ferrometal_test_support::serve::Serve;

/// `ferrometal move --from A --to B EXTRA...`; `crash` names the phase after which the command
/// kills itself (the test hook), or none.
pub fn run_move(from: &Serve, to: &Serve, extra: &[&str], crash: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ferrometal"));
    cmd.arg("move")
        .arg("--from")
        .arg(&from.kubeconfig)
        .arg("--to")
        .arg(&to.kubeconfig)
        .args(extra)
        .env("FERROMETAL_LOG", "warn")
        .env_remove("FERROMETAL_MOVE_CRASH_AFTER");
    if let Some(phase) = crash {
        cmd.env("FERROMETAL_MOVE_CRASH_AFTER", phase);
    }
    cmd.output().unwrap()
}
