//! The Kubernetes minor versions Ruleplane supports, and which one a check or a scheduler follows.

use std::fmt;
use std::str::FromStr;

/// A supported Kubernetes minor version: what differs between them (schemas, APIs, kube-scheduler's rules) is
/// decided by it. Ordered oldest first. The window is the three newest minors; when a new one comes out, the oldest
/// goes (`docs/compatibility.md`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KubernetesVersion {
    V1_35,
    V1_36,
    /// The newest: the default of the offline commands.
    #[default]
    V1_37,
}

impl KubernetesVersion {
    /// Every supported version, oldest first.
    pub const ALL: [KubernetesVersion; 3] = [
        KubernetesVersion::V1_35,
        KubernetesVersion::V1_36,
        KubernetesVersion::V1_37,
    ];
    /// The newest supported version (the offline commands' default).
    pub const NEWEST: KubernetesVersion = KubernetesVersion::V1_37;
    /// The oldest supported version.
    pub const OLDEST: KubernetesVersion = KubernetesVersion::V1_35;

    /// The minor number (`37`).
    pub fn minor(self) -> u32 {
        match self {
            KubernetesVersion::V1_35 => 35,
            KubernetesVersion::V1_36 => 36,
            KubernetesVersion::V1_37 => 37,
        }
    }

    /// The supported version of a minor number, if it is one.
    pub fn of_minor(minor: u32) -> Option<KubernetesVersion> {
        Self::ALL.into_iter().find(|v| v.minor() == minor)
    }

    /// The version a server of `major`.`minor` (its `/version` fields, e.g. `"1"` and `"37+"`) is run as: its own
    /// minor when supported; a newer server as the newest (with `ServerVersion::Newer`), an older one as the
    /// oldest (`ServerVersion::Older`), so a caller can warn and go on as kubectl does with skew.
    pub fn of_server(major: &str, minor: &str) -> Result<ServerVersion, UnknownVersion> {
        let digits = |s: &str| s.trim().trim_end_matches('+').parse::<u32>().ok();
        let unknown = || UnknownVersion(format!("{major}.{minor}"));
        let (major, minor) = (digits(major).ok_or_else(unknown)?, digits(minor).ok_or_else(unknown)?);
        if major != 1 {
            return Err(UnknownVersion(format!("{major}.{minor}")));
        }
        Ok(match Self::of_minor(minor) {
            Some(version) => ServerVersion::Supported(version),
            None if minor > Self::NEWEST.minor() => ServerVersion::Newer(Self::NEWEST, minor),
            None => ServerVersion::Older(Self::OLDEST, minor),
        })
    }

    /// The versions a user may name, for messages (`1.35, 1.36, 1.37`).
    pub fn supported_list() -> String {
        Self::ALL.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", ")
    }
}

/// How a server's version maps to a supported one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerVersion {
    Supported(KubernetesVersion),
    /// A minor newer than the window (the server's minor): run as the newest supported.
    Newer(KubernetesVersion, u32),
    /// A minor older than the window: run as the oldest supported.
    Older(KubernetesVersion, u32),
}

impl ServerVersion {
    /// The supported version to behave as.
    pub fn behave_as(self) -> KubernetesVersion {
        match self {
            ServerVersion::Supported(v) | ServerVersion::Newer(v, _) | ServerVersion::Older(v, _) => v,
        }
    }
}

impl fmt::Display for KubernetesVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "1.{}", self.minor())
    }
}

/// A version text that names no supported version.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a supported Kubernetes version (supported: {list})", list = KubernetesVersion::supported_list())]
pub struct UnknownVersion(pub String);

impl FromStr for KubernetesVersion {
    type Err = UnknownVersion;

    /// `1.36`, `v1.36` or a patch release (`1.36.3`, `v1.36.3`).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let unknown = || UnknownVersion(text.to_string());
        let trimmed = text.trim();
        let bare = trimmed.strip_prefix('v').unwrap_or(trimmed);
        let mut parts = bare.split('.');
        let (Some("1"), Some(minor)) = (parts.next(), parts.next()) else {
            return Err(unknown());
        };
        let patch_ok = match (parts.next(), parts.next()) {
            (None, _) => true,
            (Some(patch), None) => !patch.is_empty() && patch.bytes().all(|b| b.is_ascii_digit()),
            _ => false,
        };
        let minor = minor.parse::<u32>().map_err(|_| unknown())?;
        match Self::of_minor(minor) {
            Some(version) if patch_ok => Ok(version),
            _ => Err(unknown()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_forms_users_write() {
        for text in ["1.36", "v1.36", "1.36.3", "v1.36.3", " 1.36 "] {
            assert_eq!(
                text.parse::<KubernetesVersion>(),
                Ok(KubernetesVersion::V1_36),
                "{text}"
            );
        }
        for text in ["1.34", "1.38", "2.36", "1.36.x", "1.36.3.1", "", "latest", "1."] {
            let err = text.parse::<KubernetesVersion>().unwrap_err();
            assert!(err.to_string().contains("supported: 1.35, 1.36, 1.37"), "{err}");
        }
    }

    #[test]
    fn the_newest_is_the_default_and_the_window_is_ordered() {
        assert_eq!(KubernetesVersion::default(), KubernetesVersion::NEWEST);
        assert!(
            KubernetesVersion::ALL
                .windows(2)
                .all(|w| w[0] < w[1] && w[1].minor() == w[0].minor() + 1)
        );
        assert_eq!(KubernetesVersion::ALL[0], KubernetesVersion::OLDEST);
    }

    #[test]
    fn a_server_outside_the_window_behaves_as_its_nearest_end() {
        let v = |major: &str, minor: &str| KubernetesVersion::of_server(major, minor);
        assert_eq!(v("1", "36"), Ok(ServerVersion::Supported(KubernetesVersion::V1_36)));
        assert_eq!(v("1", "37+"), Ok(ServerVersion::Supported(KubernetesVersion::V1_37)));
        assert_eq!(v("1", "38"), Ok(ServerVersion::Newer(KubernetesVersion::V1_37, 38)));
        assert_eq!(v("1", "30"), Ok(ServerVersion::Older(KubernetesVersion::V1_35, 30)));
        assert!(v("1", "").is_err());
        assert!(v("2", "1").is_err());
    }
}
