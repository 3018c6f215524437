//! `ferrometal kubeconfig`: a kubeconfig for another user, with a client certificate signed by
//! a standalone server's CA (like `kubeadm kubeconfig user`). Printed on stdout.

use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The data directory of the `ferrometal serve` whose CA signs the certificate.
    #[arg(long, env = "FERROMETAL_DATA_DIR", default_value = "ferrometal-data")]
    data_dir: PathBuf,
    /// The user name (the certificate's CN), e.g. `alice`.
    #[arg(long)]
    user: String,
    /// A group (an O of the certificate); repeatable.
    #[arg(long = "group", value_name = "GROUP")]
    groups: Vec<String>,
    /// The namespace the kubeconfig's context uses by default.
    #[arg(long, default_value = "default")]
    namespace: String,
    /// How long the certificate is valid: seconds, or a number with s, m, h or d (`720h`).
    #[arg(long, default_value = "720h", value_parser = crate::duration::parse_duration)]
    expires: std::time::Duration,
}

pub fn run(args: Args) -> anyhow::Result<std::process::ExitCode> {
    let doc = ferrometal_apiserver::kubeconfig::for_user(
        &args.data_dir,
        &args.user,
        &args.groups,
        &args.namespace,
        args.expires,
    )?;
    std::io::stdout().write_all(doc.as_bytes())?;
    Ok(std::process::ExitCode::SUCCESS)
}
