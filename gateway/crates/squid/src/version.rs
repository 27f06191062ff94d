//! The installed Squid's version (from `squid -v`) and the collapsed-forwarding advisory check.

use serde::Serialize;
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct SquidVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl fmt::Display for SquidVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl SquidVersion {
    pub const fn new(major: u32, minor: u32, patch: u32) -> Self {
        SquidVersion {
            major,
            minor,
            patch,
        }
    }
}

/// Parses the first `Version X.Y[.Z]` in `squid -v` output ("Squid Cache: Version 5.7").
pub fn parse_squid_v(output: &str) -> Option<SquidVersion> {
    let rest = output.split("Version ").nth(1)?;
    let token: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let mut nums = token
        .split('.')
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<u32>().ok());
    let major = nums.next()??;
    let minor = nums.next().flatten().unwrap_or(0);
    let patch = nums.next().flatten().unwrap_or(0);
    Some(SquidVersion {
        major,
        minor,
        patch,
    })
}

/// A published advisory and the inclusive range of versions it affects.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Advisory {
    pub id: &'static str,
    pub summary: &'static str,
    pub first_affected: SquidVersion,
    pub last_affected: SquidVersion,
    pub fixed_in: SquidVersion,
}

impl Advisory {
    pub fn affects(&self, v: SquidVersion) -> bool {
        self.first_affected <= v && v <= self.last_affected
    }
}

/// CVE-2023-49288 (Squid security advisory "Denial of Service in HTTP Collapsed Forwarding",
/// a use-after-free): every Squid from 3.5 up to and including 5.9 with `collapsed_forwarding on`
/// can be crashed remotely; fixed in 6.0.1. Distribution patch levels are not visible in
/// `squid -v`, so a 3.5-5.9 version is treated as affected even if the vendor backported a fix.
pub const COLLAPSED_FORWARDING_ADVISORY: Advisory = Advisory {
    id: "CVE-2023-49288",
    summary: "use-after-free (denial of service) in HTTP collapsed forwarding",
    first_affected: SquidVersion::new(3, 5, 0),
    last_affected: SquidVersion::new(5, 9, u32::MAX),
    fixed_in: SquidVersion::new(6, 0, 1),
};

/// Whether `collapsed_forwarding on` may be rendered for this Squid. Unknown version → no.
pub fn collapsed_forwarding_safe(v: Option<SquidVersion>) -> bool {
    v.is_some_and(|v| !COLLAPSED_FORWARDING_ADVISORY.affects(v) && v >= SquidVersion::new(3, 5, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_versions() {
        let deb = "Squid Cache: Version 5.7\nService Name: squid\n";
        assert_eq!(parse_squid_v(deb), Some(SquidVersion::new(5, 7, 0)));
        assert_eq!(
            parse_squid_v("Squid Cache: Version 6.0.1-VCS\n"),
            Some(SquidVersion::new(6, 0, 1))
        );
        assert_eq!(
            parse_squid_v("Squid Cache: Version 4.0.25\n"),
            Some(SquidVersion::new(4, 0, 25))
        );
        assert_eq!(parse_squid_v("no version here"), None);
    }

    #[test]
    fn advisory_range_is_3_5_through_5_9() {
        let unsafe_versions = [(3, 5, 0), (3, 5, 28), (4, 17, 0), (5, 7, 0), (5, 9, 0)];
        for (a, b, c) in unsafe_versions {
            assert!(
                !collapsed_forwarding_safe(Some(SquidVersion::new(a, b, c))),
                "{a}.{b}.{c}"
            );
        }
        for (a, b, c) in [(6, 0, 1), (6, 6, 0), (7, 1, 0)] {
            assert!(
                collapsed_forwarding_safe(Some(SquidVersion::new(a, b, c))),
                "{a}.{b}.{c}"
            );
        }
        // Older than the feature's rework, or unknown: stay off.
        assert!(!collapsed_forwarding_safe(Some(SquidVersion::new(3, 4, 0))));
        assert!(!collapsed_forwarding_safe(None));
    }
}
