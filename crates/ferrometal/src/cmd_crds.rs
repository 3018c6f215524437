//! `ferrometal crds`: the CRDs as YAML, the same text as deploy/crds/.

pub fn run() -> anyhow::Result<std::process::ExitCode> {
    print!("{}", ferrometal_api::crds_yaml());
    Ok(std::process::ExitCode::SUCCESS)
}
