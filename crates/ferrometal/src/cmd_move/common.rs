//! What the host and claim moves share: the two clusters' clients, progress lines, the summary
//! table and the crash-injection hook.

use std::path::Path;

use anyhow::{Context as _, bail};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};

/// The value of `baremetalhost.metal3.io/paused` this command sets (and removes).
pub(crate) const MOVE_PAUSE: &str = "ferrometal.io/move";

/// The environment variable of the crash-injection hook (tests only).
pub(crate) const CRASH_ENV: &str = "FERROMETAL_MOVE_CRASH_AFTER";

/// One side of the move.
pub(crate) struct Cluster {
    /// `--from` or `--to`, for messages.
    pub flag: &'static str,
    pub client: kube::Client,
    /// The API server's URL as the kubeconfig names it.
    pub url: String,
}

/// A client from the kubeconfig at `path`; errors name the flag and the path.
pub(crate) async fn connect(flag: &'static str, path: &Path) -> anyhow::Result<Cluster> {
    let kubeconfig = kube::config::Kubeconfig::read_from(path)
        .with_context(|| format!("{flag} {}: cannot read the kubeconfig", path.display()))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .with_context(|| format!("{flag} {}: not a usable kubeconfig", path.display()))?;
    let url = config
        .cluster_url
        .to_string()
        .trim_end_matches('/')
        .to_string();
    let client = kube::Client::try_from(config)
        .with_context(|| format!("{flag} {}: cannot build a client", path.display()))?;
    Ok(Cluster { flag, client, url })
}

/// Both clusters; refuses a move from a cluster onto itself (same API server URL).
pub(crate) async fn connect_both(from: &Path, to: &Path) -> anyhow::Result<(Cluster, Cluster)> {
    let source = connect("--from", from).await?;
    let target = connect("--to", to).await?;
    if source.url == target.url {
        bail!(
            "--from {} and --to {} name the same cluster ({}): nothing to move",
            from.display(),
            to.display(),
            source.url
        );
    }
    Ok((source, target))
}

/// Creates `namespace` at the cluster if it does not exist.
pub(crate) async fn ensure_namespace(cluster: &Cluster, namespace: &str) -> anyhow::Result<()> {
    let api: Api<Namespace> = Api::all(cluster.client.clone());
    if api
        .get_opt(namespace)
        .await
        .with_context(|| format!("{}: reading namespace {namespace}", cluster.flag))?
        .is_some()
    {
        return Ok(());
    }
    let mut ns = Namespace::default();
    ns.metadata.name = Some(namespace.to_string());
    match api.create(&PostParams::default(), &ns).await {
        Ok(_) => {
            progress("created", &format!("namespace {namespace}"), "");
            Ok(())
        }
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => {
            Err(e).with_context(|| format!("{}: creating namespace {namespace}", cluster.flag))
        }
    }
}

/// One progress line: the phase, padded, then the object and an optional note.
pub(crate) fn progress(phase: &str, object: &str, note: &str) {
    if note.is_empty() {
        println!("{phase:<9}{object}");
    } else {
        println!("{phase:<9}{object}  ({note})");
    }
}

/// A table cell for an empty value.
pub(crate) fn or_dash(s: &str) -> String {
    if s.is_empty() { "-".into() } else { s.into() }
}

/// Prints rows as a table with a header, columns padded to their widest cell.
pub(crate) fn table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(cell.len());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<w$}   ", w = widths[i]));
            }
        }
        println!("{}", out.trim_end());
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}

/// `FERROMETAL_MOVE_CRASH_AFTER=<phase>[:N]`: abort the process right after `phase` is done for
/// every object, or right after its Nth object. For tests of the move's idempotence only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CrashHook {
    phase: String,
    after: Option<usize>,
}

impl CrashHook {
    /// Reads the hook from the environment; `phases` are the names the caller knows.
    pub(crate) fn from_env(phases: &[&str]) -> anyhow::Result<Option<CrashHook>> {
        match std::env::var(CRASH_ENV) {
            Ok(value) if !value.trim().is_empty() => Self::parse(&value, phases).map(Some),
            _ => Ok(None),
        }
    }

    fn parse(value: &str, phases: &[&str]) -> anyhow::Result<CrashHook> {
        let (phase, after) = match value.trim().split_once(':') {
            Some((p, n)) => {
                let n: usize = n.parse().ok().filter(|n| *n > 0).with_context(|| {
                    format!("{CRASH_ENV}={value}: the count after ':' must be a positive number")
                })?;
                (p, Some(n))
            }
            None => (value.trim(), None),
        };
        if !phases.contains(&phase) {
            bail!("{CRASH_ENV}={value}: unknown phase {phase:?} (one of {phases:?})");
        }
        Ok(CrashHook {
            phase: phase.to_string(),
            after,
        })
    }

    /// Called after the `n`th object (1-based) of `phase` is done.
    pub(crate) fn object_done(hook: &Option<CrashHook>, phase: &str, n: usize) {
        if let Some(h) = hook
            && h.phase == phase
            && h.after == Some(n)
        {
            crash(phase, &format!(" after object {n}"));
        }
    }

    /// Called when `phase` is done for every object.
    pub(crate) fn phase_done(hook: &Option<CrashHook>, phase: &str) {
        if let Some(h) = hook
            && h.phase == phase
        {
            // A count larger than the number of objects crashes at the end of the phase.
            crash(phase, "");
        }
    }
}

fn crash(phase: &str, what: &str) -> ! {
    use std::io::Write as _;
    eprintln!("{CRASH_ENV}: aborting in phase {phase}{what}");
    let _ = std::io::stdout().flush();
    std::process::abort();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crash_hook_values() {
        let phases = ["pause", "copy"];
        assert_eq!(
            CrashHook::parse("copy", &phases).unwrap(),
            CrashHook {
                phase: "copy".into(),
                after: None
            }
        );
        assert_eq!(
            CrashHook::parse("pause:2", &phases).unwrap(),
            CrashHook {
                phase: "pause".into(),
                after: Some(2)
            }
        );
        let e = CrashHook::parse("remove", &phases).unwrap_err().to_string();
        assert!(e.contains(CRASH_ENV) && e.contains("remove"), "{e}");
        assert!(CrashHook::parse("copy:0", &phases).is_err());
        assert!(CrashHook::parse("copy:x", &phases).is_err());
    }
}
