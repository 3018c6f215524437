//! Minimal standalone emulator, for profiling the crate without the CLI:
//! `cargo run --release -p ferrometal-emulator --example serve -- SYSTEMS PORT`.

use ferrometal_emulator::{Emulator, EmulatorConfig};

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let systems = args.next().and_then(|s| s.parse().ok()).unwrap_or(1000);
    let port: u16 = args.next().and_then(|s| s.parse().ok()).unwrap_or(8000);
    let config = EmulatorConfig {
        systems,
        ..EmulatorConfig::default()
    };
    let emu = Emulator::start(config, ([127, 0, 0, 1], port).into()).await?;
    println!("listening on {} with {systems} systems", emu.base_url());
    tokio::signal::ctrl_c().await?;
    emu.shutdown().await;
    Ok(())
}
