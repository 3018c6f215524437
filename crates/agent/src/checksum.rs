//! Image checksums as metal3 gives them: `md5`, `sha256`, `sha512` or `auto` (told by the
//! length of the hex digest), the digest itself or a checksum file's content (`HASH  NAME` lines,
//! as `sha256sum` writes them) from which the image's line is picked.

use md5::Md5;
use sha2::{Digest, Sha256, Sha512};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    Md5,
    Sha256,
    Sha512,
}

impl Algorithm {
    /// `md5`, `sha256`, `sha512`; `auto` or empty chooses by the digest's length.
    pub fn parse(kind: &str, digest: &str) -> Result<Algorithm, String> {
        match kind.trim().to_ascii_lowercase().as_str() {
            "md5" => Ok(Algorithm::Md5),
            "sha256" => Ok(Algorithm::Sha256),
            "sha512" => Ok(Algorithm::Sha512),
            "" | "auto" => match digest.len() {
                32 => Ok(Algorithm::Md5),
                64 => Ok(Algorithm::Sha256),
                128 => Ok(Algorithm::Sha512),
                n => Err(format!(
                    "checksumType auto cannot tell the algorithm of a {n}-character checksum (md5 has 32, sha256 64, sha512 128)"
                )),
            },
            other => Err(format!(
                "checksumType {other:?} is not md5, sha256, sha512 or auto"
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Md5 => "md5",
            Algorithm::Sha256 => "sha256",
            Algorithm::Sha512 => "sha512",
        }
    }

    pub fn hasher(self) -> Hasher {
        match self {
            Algorithm::Md5 => Hasher::Md5(Md5::new()),
            Algorithm::Sha256 => Hasher::Sha256(Sha256::new()),
            Algorithm::Sha512 => Hasher::Sha512(Box::new(Sha512::new())),
        }
    }
}

/// A running digest of the bytes downloaded.
pub enum Hasher {
    Md5(Md5),
    Sha256(Sha256),
    Sha512(Box<Sha512>),
}

impl Hasher {
    pub fn update(&mut self, data: &[u8]) {
        match self {
            Hasher::Md5(h) => h.update(data),
            Hasher::Sha256(h) => h.update(data),
            Hasher::Sha512(h) => h.update(data),
        }
    }

    /// Lower-case hex.
    pub fn finish(self) -> String {
        let bytes: Vec<u8> = match self {
            Hasher::Md5(h) => h.finalize().to_vec(),
            Hasher::Sha256(h) => h.finalize().to_vec(),
            Hasher::Sha512(h) => h.finalize().to_vec(),
        };
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// The digest for `image_url` in a checksum file's `text`: the line naming the image's file
/// name (`HASH  NAME`, `HASH *NAME`, or BSD's `ALGO (NAME) = HASH`), or the only hash in it.
pub fn digest_from_file(text: &str, image_url: &str) -> Result<String, String> {
    let file = image_url
        .split(['?', '#'])
        .next()
        .unwrap_or_default()
        .rsplit('/')
        .next()
        .unwrap_or_default();
    let mut hashes = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some((left, hash)) = line.split_once(") = ") {
            let name = left.split_once(" (").map(|(_, n)| n).unwrap_or_default();
            if name == file {
                return Ok(hash.trim().to_ascii_lowercase());
            }
            hashes.push(hash.trim().to_ascii_lowercase());
            continue;
        }
        let mut parts = line.split_whitespace();
        let hash = parts.next().unwrap_or_default();
        let name = parts.next().map(|n| n.trim_start_matches('*'));
        if !hash.chars().all(|c| c.is_ascii_hexdigit()) {
            continue;
        }
        if name == Some(file) {
            return Ok(hash.to_ascii_lowercase());
        }
        hashes.push(hash.to_ascii_lowercase());
    }
    match hashes.as_slice() {
        [only] => Ok(only.clone()),
        [] => Err("the checksum file holds no checksum".to_string()),
        _ => Err(format!(
            "the checksum file holds {} checksums and none for {file:?}",
            hashes.len()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn algorithms_are_named_or_told_by_length() {
        let cases = [
            ("md5", "", Ok(Algorithm::Md5)),
            ("SHA256", "", Ok(Algorithm::Sha256)),
            ("sha512", "", Ok(Algorithm::Sha512)),
            ("auto", &"a".repeat(32), Ok(Algorithm::Md5)),
            ("", &"a".repeat(64), Ok(Algorithm::Sha256)),
            ("auto", &"a".repeat(128), Ok(Algorithm::Sha512)),
        ];
        for (kind, digest, want) in cases {
            assert_eq!(Algorithm::parse(kind, digest), want, "{kind} {digest}");
        }
        let err = Algorithm::parse("auto", "abc").unwrap_err();
        assert!(err.contains("3-character"), "{err}");
        let err = Algorithm::parse("crc", "abc").unwrap_err();
        assert!(err.contains("\"crc\""), "{err}");
    }

    #[test]
    fn digests_match_the_standard_tools() {
        // Known answers for "abc".
        let digest = |a: Algorithm| {
            let mut h = a.hasher();
            h.update(b"a");
            h.update(b"bc");
            h.finish()
        };
        assert_eq!(digest(Algorithm::Md5), "900150983cd24fb0d6963f7d28e17f72");
        assert_eq!(
            digest(Algorithm::Sha256),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(digest(Algorithm::Sha512).starts_with("ddaf35a193617aba"));
    }

    #[test]
    fn the_images_line_is_picked_from_a_checksum_file() {
        let file = "aaaa  other.qcow2\nBBBB *disk.qcow2\n";
        assert_eq!(
            digest_from_file(file, "http://x/images/disk.qcow2?x=1").unwrap(),
            "bbbb"
        );
        assert_eq!(
            digest_from_file("SHA256 (disk.raw) = CCCC\n", "http://x/disk.raw").unwrap(),
            "cccc"
        );
        assert_eq!(digest_from_file("dddd\n", "http://x/a").unwrap(), "dddd");
        let err = digest_from_file(file, "http://x/third.raw").unwrap_err();
        assert!(err.contains("none for \"third.raw\""), "{err}");
        assert!(digest_from_file("# nothing\n", "http://x/a").is_err());
    }
}
