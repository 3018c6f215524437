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
    #[arg(long, default_value = "720h", value_parser = parse_duration)]
    expires: std::time::Duration,
}

fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let (num, unit) = match s.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 720h, 30d or 3600"))?;
    let secs = match unit {
        "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        "d" => n * 86_400,
        _ => return Err(format!("{s:?}: the unit must be s, m, h or d")),
    };
    if secs == 0 || secs > 10 * 365 * 86_400 {
        return Err(format!("{s:?}: must be between 1s and 10 years"));
    }
    Ok(std::time::Duration::from_secs(secs))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("720h").unwrap().as_secs(), 720 * 3600);
        assert_eq!(parse_duration("30d").unwrap().as_secs(), 30 * 86_400);
        assert_eq!(parse_duration("90").unwrap().as_secs(), 90);
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("5y").is_err());
        assert!(parse_duration("h").is_err());
    }
}
