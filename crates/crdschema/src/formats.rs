//! String and integer `format` checks. Unknown formats pass, as in
//! kube-apiserver, which only validates the formats it knows.

use std::net::{Ipv4Addr, Ipv6Addr};

use base64::Engine;

pub(crate) fn check_string(format: &str, s: &str) -> bool {
    match format {
        "date-time" | "datetime" => is_date_time(s),
        "date" => is_date(s),
        "byte" => base64::engine::general_purpose::STANDARD.decode(s).is_ok(),
        "uuid" => is_uuid(s),
        "uuid3" => is_uuid(s) && s.as_bytes()[14] == b'3',
        "uuid4" => is_uuid(s) && s.as_bytes()[14] == b'4',
        "uuid5" => is_uuid(s) && s.as_bytes()[14] == b'5',
        "hostname" => is_hostname(s),
        "ipv4" => s.parse::<Ipv4Addr>().is_ok(),
        "ipv6" => s.contains(':') && s.parse::<Ipv6Addr>().is_ok(),
        "cidr" => is_cidr(s),
        "uri" => is_uri(s),
        "mac" => is_mac(s),
        "duration" => is_duration(s),
        "email" => is_email(s),
        _ => true,
    }
}

/// Integer formats: the value must fit the named width.
pub(crate) fn check_integer(format: &str, n: &serde_json::Number) -> bool {
    let as_i64 = n.as_i64().or_else(|| {
        n.as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 9.2e18)
            .map(|f| f as i64)
    });
    match format {
        "int32" => as_i64.is_some_and(|i| i32::try_from(i).is_ok()),
        "int64" => as_i64.is_some(),
        _ => true,
    }
}

fn digits(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let (Some(y), Some(m), Some(d)) = (digits(&s[0..4]), digits(&s[5..7]), digits(&s[8..10]))
    else {
        return false;
    };
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&d)
}

/// RFC 3339, plus the relaxations go-openapi's strfmt accepts: a lower-case
/// or space separator, a zone offset without colon, or no zone at all.
fn is_date_time(s: &str) -> bool {
    if s.len() < 19 || !s.is_char_boundary(10) || !s.is_char_boundary(19) {
        return false;
    }
    if !is_date(&s[..10]) || !matches!(s.as_bytes()[10], b'T' | b't' | b' ') {
        return false;
    }
    let time = &s[11..19];
    let tb = time.as_bytes();
    if tb[2] != b':' || tb[5] != b':' {
        return false;
    }
    let (Some(h), Some(mi), Some(sec)) = (
        digits(&time[0..2]),
        digits(&time[3..5]),
        digits(&time[6..8]),
    ) else {
        return false;
    };
    if h > 23 || mi > 59 || sec > 60 {
        return false;
    }
    let mut rest = &s[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return false;
        }
        rest = &frac[n..];
    }
    match rest {
        "" | "Z" | "z" => true,
        zone => {
            let zb = zone.as_bytes();
            if !matches!(zb[0], b'+' | b'-') {
                return false;
            }
            let z = &zone[1..];
            if !z.is_ascii() {
                return false;
            }
            let (hh, mm) = match z.len() {
                5 if z.as_bytes()[2] == b':' => (&z[0..2], &z[3..5]),
                4 => (&z[0..2], &z[2..4]),
                _ => return false,
            };
            matches!((digits(hh), digits(mm)), (Some(h), Some(m)) if h <= 23 && m <= 59)
        }
    }
}

fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

fn is_hostname(s: &str) -> bool {
    let s = s.strip_suffix('.').unwrap_or(s);
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

fn is_cidr(s: &str) -> bool {
    let Some((addr, bits)) = s.split_once('/') else {
        return false;
    };
    let Some(bits) = digits(bits) else {
        return false;
    };
    if addr.parse::<Ipv4Addr>().is_ok() {
        bits <= 32
    } else if addr.parse::<Ipv6Addr>().is_ok() {
        bits <= 128
    } else {
        false
    }
}

/// Go's `url.ParseRequestURI`: an absolute URI with a scheme, or an
/// absolute path; no whitespace or control characters.
pub(crate) fn is_uri(s: &str) -> bool {
    if s.is_empty() || s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return false;
    }
    if s.starts_with('/') {
        return true;
    }
    let Some((scheme, rest)) = s.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        && !rest.is_empty()
}

/// Go's `net.ParseMAC`: 6, 8 or 20 octets separated by `:` or `-`, or
/// groups of four hex digits separated by `.`.
fn is_mac(s: &str) -> bool {
    let hex = |g: &str, n: usize| g.len() == n && g.bytes().all(|c| c.is_ascii_hexdigit());
    for sep in [':', '-'] {
        if s.contains(sep) {
            let groups: Vec<&str> = s.split(sep).collect();
            return matches!(groups.len(), 6 | 8 | 20) && groups.iter().all(|g| hex(g, 2));
        }
    }
    let groups: Vec<&str> = s.split('.').collect();
    matches!(groups.len(), 3 | 4 | 10) && groups.iter().all(|g| hex(g, 4))
}

/// Go's `time.ParseDuration` syntax, with the day and week units strfmt
/// adds.
fn is_duration(s: &str) -> bool {
    parse_duration(s).is_some()
}

/// Parses a Go-style duration (`1h30m`, `-1.5s`, `3d`) into nanoseconds.
pub(crate) fn parse_duration(s: &str) -> Option<i64> {
    let (neg, s) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if s == "0" {
        return Some(0);
    }
    if s.is_empty() {
        return None;
    }
    let mut total: f64 = 0.0;
    let mut rest = s;
    while !rest.is_empty() {
        let n = rest
            .bytes()
            .take_while(|c| c.is_ascii_digit() || *c == b'.')
            .count();
        let num = &rest[..n];
        if num.is_empty() || num == "." || num.matches('.').count() > 1 {
            return None;
        }
        let value: f64 = num.parse().ok()?;
        rest = &rest[n..];
        let unit_len = rest
            .char_indices()
            .find(|(_, c)| c.is_ascii_digit() || *c == '.')
            .map_or(rest.len(), |(i, _)| i);
        let scale: f64 = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "d" => 86400e9,
            "w" => 7.0 * 86400e9,
            _ => return None,
        };
        total += value * scale;
        rest = &rest[unit_len..];
    }
    // Go refuses durations beyond int64 nanoseconds (about 292 years).
    if !total.is_finite() || total >= 9.2e18 {
        return None;
    }
    let nanos = total.round() as i64;
    Some(if neg { -nanos } else { nanos })
}

fn is_email(s: &str) -> bool {
    let Some((local, domain)) = s.rsplit_once('@') else {
        return false;
    };
    !local.is_empty() && !local.chars().any(char::is_whitespace) && is_hostname(domain)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        let cases: &[(&str, &str, bool)] = &[
            ("date-time", "2024-02-29T12:00:00Z", true),
            ("date-time", "2024-02-29T12:00:00.123+02:00", true),
            ("date-time", "2023-02-29T12:00:00Z", false),
            ("date-time", "2024-01-01T25:00:00Z", false),
            ("date-time", "yesterday", false),
            ("date-time", "2024-01-01T00:00:00é", false),
            ("date", "2024-12-31", true),
            ("date", "2024-13-01", false),
            ("byte", "aGVsbG8=", true),
            ("byte", "not base64!", false),
            ("uuid", "123e4567-e89b-12d3-a456-426614174000", true),
            ("uuid", "123e4567e89b12d3a456426614174000", false),
            ("hostname", "bmc-1.example.com", true),
            ("hostname", "-bad.example.com", false),
            ("ipv4", "192.0.2.10", true),
            ("ipv4", "192.0.2.300", false),
            ("ipv6", "2001:db8::1", true),
            ("ipv6", "192.0.2.1", false),
            ("cidr", "10.0.0.0/8", true),
            ("cidr", "2001:db8::/129", false),
            ("uri", "redfish://192.0.2.1/redfish/v1/Systems/1", true),
            ("uri", "not a uri", false),
            ("mac", "52:54:00:12:34:56", true),
            ("mac", "52:54:00:12:34", false),
            ("duration", "1h30m", true),
            ("duration", "1.5s", true),
            ("duration", "3d", true),
            ("duration", "10 parsecs", false),
            ("email", "ops@example.com", true),
            ("email", "ops", false),
            ("no-such-format", "anything", true),
        ];
        for (format, s, ok) in cases {
            assert_eq!(check_string(format, s), *ok, "{format} {s:?}");
        }
    }

    #[test]
    fn integer_formats() {
        let n = |v: serde_json::Value| v.as_number().cloned().unwrap();
        assert!(check_integer("int32", &n(serde_json::json!(2147483647))));
        assert!(!check_integer(
            "int32",
            &n(serde_json::json!(2147483648i64))
        ));
        assert!(check_integer(
            "int64",
            &n(serde_json::json!(-9223372036854775808i64))
        ));
        assert!(!check_integer(
            "int64",
            &n(serde_json::json!(18446744073709551615u64))
        ));
    }
}
