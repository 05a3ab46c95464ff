//! The units of work replicas share: Reconciler parents hashed into virtual shards, and the two whole-set units.

use std::fmt;

use sha2::Digest as _;

use crate::naming::is_dns_subdomain;

/// Virtual shards of Reconciler parents when `--shards` is not given.
///
/// Every shard is one Lease, renewed by its holder every retry period whether or not the shard holds any parent,
/// so the count is a trade between balance and Lease traffic. With 32 shards (34 units with the two whole-set
/// units) each of up to 10 replicas holds 3 or 4 units (at 10: 4 against a mean of 3.4, the busiest replica
/// 18% above it; at 3: 11 or 12 units), and a replica that joins or leaves moves about 34/N of them. 64 shards
/// would halve that spread but double the renewals: 34 Leases renewed every 2 s are 17 small writes a second
/// for the whole installation, however many replicas share them. Beyond about 10 replicas a larger `--shards`
/// keeps the shares fair.
pub const DEFAULT_SHARDS: u32 = 32;

/// The most shards accepted: a Lease per shard, and a shard label value of at most 4 digits.
pub const MAX_SHARDS: u32 = 1024;

/// A shard count outside `1..=MAX_SHARDS`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the number of shards must be between 1 and {MAX_SHARDS}, not {0}: each shard is a Lease renewed every retry period"
)]
pub struct ShardCountError(pub u32);

/// The shard count `shards`, if it is one an installation may run with.
pub fn check_shard_count(shards: u32) -> Result<u32, ShardCountError> {
    if (1..=MAX_SHARDS).contains(&shards) {
        Ok(shards)
    } else {
        Err(ShardCountError(shards))
    }
}

/// FNV-1a, 64 bits, over `bytes` (the `fnv` crate, as the template helper `fnv64a`).
///
/// A fixed, published function rather than a std hasher: a parent's shard is written onto its children as a label
/// and computed by every replica, so it must be the same in every release and every language. Rust's
/// `DefaultHasher` promises neither; the test vectors below pin this one.
pub(crate) fn fnv1a_64(bytes: &[u8]) -> u64 {
    use std::hash::Hasher as _;
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(bytes);
    hasher.finish()
}

/// The shard of the parent `namespace/name` (`name` alone for a cluster-scoped parent, `namespace` empty) among
/// `shards`: FNV-1a 64 of `namespace/name` (`/name` when cluster-scoped), its two halves xor-ed, modulo `shards`.
///
/// Keyed by name, not UID: a parent deleted and created again keeps its shard, so its children (labelled with
/// it) stay in the cache of the replica that handles it. The fold matters: the low bits of an FNV-1a hash depend
/// only on the low bits of the input bytes (the last step is a multiplication), so `hash % 32` alone would put
/// `Web` and `web` in the same shard every time; the high half depends on every bit. `shards` of 0 counts as 1.
pub fn shard_of(namespace: &str, name: &str, shards: u32) -> u32 {
    let mut key = Vec::with_capacity(namespace.len() + 1 + name.len());
    key.extend_from_slice(namespace.as_bytes());
    key.push(b'/');
    key.extend_from_slice(name.as_bytes());
    let hash = fnv1a_64(&key);
    let folded = hash ^ (hash >> 32);
    // The remainder is below `shards`, a u32.
    u32::try_from(folded % u64::from(shards.max(1))).unwrap_or(0)
}

/// One unit of work a replica holds through its own Lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Unit {
    /// The Reconciler parents whose [`shard_of`] is this number, with their children; every Reconciler rule.
    ReconcilerShard(u32),
    /// Every ResourceDefinition rule: CRDs are few, and one worker set keeps their evolution checks in one place.
    ResourceDefinitions,
    /// Every SchedulerPolicy: one unit because the policies share one cache of nodes and pods, and two replicas
    /// each binding pods from their own view of a node's free capacity would overcommit it.
    Schedulers,
}

impl Unit {
    /// The shard number, for a Reconciler shard.
    pub fn shard(self) -> Option<u32> {
        match self {
            Unit::ReconcilerShard(shard) => Some(shard),
            Unit::ResourceDefinitions | Unit::Schedulers => None,
        }
    }
}

/// `reconciler-shard-<n>`, `resource-definitions`, `schedulers`: the unit's name in Lease names, logs and metrics.
impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unit::ReconcilerShard(shard) => write!(f, "reconciler-shard-{shard}"),
            Unit::ResourceDefinitions => f.write_str("resource-definitions"),
            Unit::Schedulers => f.write_str("schedulers"),
        }
    }
}

/// Every unit of an installation with `shards` Reconciler shards: the shards in order, then the ResourceDefinition
/// and SchedulerPolicy units. Present whether or not the rule set has rules of each kind, so that the assignment
/// (and with it every Lease's owner) does not move when a rule is added or removed.
pub fn units(shards: u32) -> Vec<Unit> {
    (0..shards.max(1))
        .map(Unit::ReconcilerShard)
        .chain([Unit::ResourceDefinitions, Unit::Schedulers])
        .collect()
}

/// The value of [`crate::ownership::SHARD_LABEL`] for children in `shard`: its decimal number.
pub(crate) fn shard_label_value(shard: u32) -> String {
    shard.to_string()
}

/// The Lease of `unit`: `<prefix>-unit-<unit>`, where `prefix` is the installation's Lease name
/// (`--leader-election-id`, `ruleplane` by default), so two installations in one namespace never share a Lease.
pub(crate) fn unit_lease_name(prefix: &str, unit: Unit) -> String {
    format!("{prefix}-unit-{unit}")
}

/// What every unit Lease's name of an installation starts with.
pub fn unit_lease_prefix(prefix: &str) -> String {
    format!("{prefix}-unit-")
}

/// What every member Lease's name of an installation starts with.
pub fn member_lease_prefix(prefix: &str) -> String {
    format!("{prefix}-member-")
}

/// The member Lease of the replica `identity`: `<prefix>-member-<identity>` when that is a valid Lease name (a pod
/// name always is), else the identity cut to 30 characters a Lease name may hold, then a digest of the whole
/// identity, so distinct identities keep distinct Leases. The identity itself is the Lease's holder, so nothing
/// reads it back from the name.
pub fn member_lease_name(prefix: &str, identity: &str) -> String {
    let head = member_lease_prefix(prefix);
    let plain = format!("{head}{identity}");
    if is_dns_subdomain(&plain) {
        return plain;
    }
    let digest = sha2::Sha256::digest(identity.as_bytes());
    let short: String = digest.iter().take(4).map(|byte| format!("{byte:02x}")).collect();
    let cleaned: String = identity
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9') => c,
            _ => '-',
        })
        .take(30)
        .collect();
    let cleaned = cleaned.trim_matches('-');
    if cleaned.is_empty() {
        format!("{head}{short}")
    } else {
        format!("{head}{cleaned}-{short}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_matches_the_published_test_vectors() {
        // From the FNV reference (Fowler, Noll, Vo; draft-eastlake-fnv).
        assert_eq!(fnv1a_64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a_64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a_64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn a_parents_shard_is_fixed_by_its_namespace_and_name() {
        // Pinned (computed apart from this code, from the documented recipe): children carry these numbers as
        // labels, so a change here would strand them outside their parent's shard.
        assert_eq!(shard_of("default", "web", 32), 19);
        assert_eq!(shard_of("team-a", "db", 32), 6);
        assert_eq!(shard_of("", "cluster-wide", 32), 18);
        assert_eq!(shard_of("any", "thing", 1), 0);
        assert_eq!(shard_of("any", "thing", 0), 0);
    }

    #[test]
    fn parents_spread_evenly_over_the_shards() {
        for shards in [DEFAULT_SHARDS, 7, 64] {
            let mut counts = vec![0_u32; shards as usize];
            let parents = 32_000;
            for i in 0..parents {
                counts[shard_of(&format!("tenant-{}", i % 40), &format!("app-{i}"), shards) as usize] += 1;
            }
            let mean = parents / shards;
            // Five standard deviations of a uniform spread (about sqrt(mean)).
            let tolerance = 5 * f64::from(mean).sqrt() as u32;
            for (shard, count) in counts.iter().enumerate() {
                assert!(
                    count.abs_diff(mean) < tolerance,
                    "shard {shard} of {shards}: {count} parents, mean {mean}"
                );
            }
        }
    }

    #[test]
    fn names_differing_only_in_high_bits_of_a_byte_still_spread() {
        // `A` (0x41) and `a` (0x61) differ in bit 5 only; without the fold every such pair shares a shard.
        let same = (0..200)
            .filter(|i| shard_of("ns", &format!("Web-{i}"), 32) == shard_of("ns", &format!("web-{i}"), 32))
            .count();
        assert!(same < 30, "{same} of 200 pairs share a shard");
    }

    #[test]
    fn shard_counts_are_checked() {
        assert_eq!(check_shard_count(DEFAULT_SHARDS), Ok(DEFAULT_SHARDS));
        assert_eq!(check_shard_count(1), Ok(1));
        assert_eq!(check_shard_count(0), Err(ShardCountError(0)));
        assert_eq!(check_shard_count(MAX_SHARDS + 1), Err(ShardCountError(MAX_SHARDS + 1)));
    }

    #[test]
    fn units_are_the_shards_then_the_two_whole_set_units() {
        let all = units(4);
        let names: Vec<String> = all.iter().map(ToString::to_string).collect();
        assert_eq!(
            names,
            [
                "reconciler-shard-0",
                "reconciler-shard-1",
                "reconciler-shard-2",
                "reconciler-shard-3",
                "resource-definitions",
                "schedulers"
            ]
        );
        assert_eq!(units(DEFAULT_SHARDS).len(), 34);
        assert_eq!(all[2].shard(), Some(2));
        assert_eq!(Unit::Schedulers.shard(), None);
    }

    #[test]
    fn lease_names_are_valid_and_prefixed_by_the_installation() {
        for unit in units(MAX_SHARDS) {
            let name = unit_lease_name("ruleplane", unit);
            assert!(is_dns_subdomain(&name), "{name}");
            assert!(name.starts_with(&unit_lease_prefix("ruleplane")));
        }
        assert_eq!(
            unit_lease_name("ruleplane", Unit::ReconcilerShard(7)),
            "ruleplane-unit-reconciler-shard-7"
        );
        assert_eq!(
            member_lease_name("ruleplane", "ruleplane-5d8f-x2"),
            "ruleplane-member-ruleplane-5d8f-x2"
        );
        assert!(member_lease_name("ruleplane", "x").starts_with(&member_lease_prefix("ruleplane")));
    }

    #[test]
    fn member_lease_names_are_valid_and_distinct_for_any_identity() {
        let identities = [
            "Host_A.example",
            "host-a.example",
            "host_a.example",
            "__",
            "",
            "a..b",
            "ünïcode",
            &"x".repeat(400),
            &format!("{}y", "x".repeat(399)),
        ];
        let names: Vec<String> = identities.iter().map(|id| member_lease_name("ruleplane", id)).collect();
        for (identity, name) in identities.iter().zip(&names) {
            assert!(is_dns_subdomain(name), "{identity:?} → {name}");
        }
        let distinct: std::collections::BTreeSet<&String> = names.iter().collect();
        assert_eq!(distinct.len(), names.len(), "{names:?}");
    }
}
