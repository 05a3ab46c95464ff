//! Kubernetes name rules shared by every rule kind (DNS labels and subdomains).

/// Lower-case DNS label: what Kubernetes requires of plurals, singulars and short names.
pub(crate) fn is_dns_label(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 63
        && text.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && text.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && text
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// Lower-case DNS subdomain (dot-separated labels, at most 253 characters).
pub(crate) fn is_dns_subdomain(text: &str) -> bool {
    text.len() <= 253 && text.split('.').all(is_dns_label)
}

/// `v1`, `v2beta1`, `v1alpha2`: what Kubernetes accepts as version names that sort correctly.
pub(crate) fn is_version_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix('v') else {
        return false;
    };
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    if digits == 0 || rest.starts_with('0') {
        return false;
    }
    let tail = &rest[digits..];
    if tail.is_empty() {
        return true;
    }
    ["alpha", "beta"].iter().any(|stage| {
        tail.strip_prefix(stage)
            .is_some_and(|n| !n.is_empty() && !n.starts_with('0') && n.chars().all(|c| c.is_ascii_digit()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_names() {
        for good in ["v1", "v2beta1", "v10alpha3"] {
            assert!(is_version_name(good), "{good}");
        }
        for bad in ["1", "v0", "v1beta", "v1gamma1", "v01", "V1", "v1beta01"] {
            assert!(!is_version_name(bad), "{bad}");
        }
    }
}
