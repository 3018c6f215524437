//! `ferrometal store check DIR`: reads every stored object of a (stopped) server's data
//! directory, counts them per resource, and reports the rows that cannot be read, and those
//! quarantined at an earlier start. Exits non-zero when there are any. (Events are never in
//! the store: the server keeps them in memory only.)

use std::path::PathBuf;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Read every row, count objects per resource and report unreadable or quarantined ones.
    Check {
        /// The data directory (`serve --data-dir`).
        data_dir: PathBuf,
    },
}

pub fn run(cmd: Command) -> anyhow::Result<std::process::ExitCode> {
    let Command::Check { data_dir } = cmd;
    let path = data_dir.join("store.redb");
    let r = ferrometal_apiserver::check_store(&path)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    println!(
        "revision {}: {} objects readable, {} unreadable, {} quarantined",
        r.revision,
        r.objects,
        r.unreadable.len(),
        r.quarantined.len()
    );
    for (resource, n) in &r.by_resource {
        println!("  {resource}: {n}");
    }
    for (key, why) in &r.unreadable {
        println!("unreadable  {key}: {why}");
    }
    for (key, size) in &r.quarantined {
        println!("quarantined {key} ({size} bytes)");
    }
    Ok(if r.unreadable.is_empty() && r.quarantined.is_empty() {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::from(1)
    })
}
