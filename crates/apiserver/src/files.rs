//! Private files under the data directory (token, keys, kubeconfig).

use std::path::Path;

/// Writes a file readable only by its owner, atomically (temporary file, fsync, rename).
pub fn write_private(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    #[cfg(unix)]
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    opts.mode(0o600);
    let mut f = opts.open(&tmp)?;
    f.write_all(data)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// Reads a secret (hex text), creating a random one of `bytes` bytes on first use.
pub fn load_or_create_secret(path: &Path, bytes: usize) -> std::io::Result<String> {
    use rand::Rng;
    if let Ok(t) = std::fs::read_to_string(path) {
        let t = t.trim().to_string();
        if !t.is_empty() {
            return Ok(t);
        }
    }
    let mut raw = vec![0u8; bytes];
    rand::rng().fill(&mut raw[..]);
    let secret: String = raw.iter().map(|b| format!("{b:02x}")).collect();
    write_private(path, secret.as_bytes())?;
    Ok(secret)
}
