//! The Lease objects of the protocol: what [`super::decide`] reads of one, and the body of each write.
//!
//! Every body keeps the base object's `resourceVersion`, so the manager's `replace` is preconditioned on the
//! version the decision was based on; only a create has none.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

use super::handover::LeaseRecord;
use crate::ownership::HANDOVER_ANNOTATION;

/// What the protocol reads of `lease`: the holder (an empty `holderIdentity` is none: released), the duration
/// (`default_duration` when the Lease has none or a negative one) and the handover mark.
pub fn record_of(lease: &Lease, default_duration: Duration) -> LeaseRecord {
    let spec = lease.spec.as_ref();
    LeaseRecord {
        holder: spec
            .and_then(|spec| spec.holder_identity.clone())
            .filter(|holder| !holder.is_empty()),
        duration: spec
            .and_then(|spec| spec.lease_duration_seconds)
            .and_then(|seconds| u64::try_from(seconds).ok())
            .map_or(default_duration, Duration::from_secs),
        handover_to: lease
            .metadata
            .annotations
            .as_ref()
            .and_then(|annotations| annotations.get(HANDOVER_ANNOTATION))
            .filter(|member| !member.is_empty())
            .cloned(),
    }
}

/// The write of [`super::Action::Acquire`]: `base` (the observed Lease; `None` to create one named `name`)
/// naming `identity` for `duration`, its handover mark cleared. The transitions count goes up when the holder
/// changes, as client-go counts them.
pub fn acquired(base: Option<&Lease>, name: &str, identity: &str, duration: Duration, now: MicroTime) -> Lease {
    let mut lease = base.cloned().unwrap_or_default();
    lease.metadata.name = Some(name.to_owned());
    if let Some(annotations) = lease.metadata.annotations.as_mut() {
        annotations.remove(HANDOVER_ANNOTATION);
    }
    let created = base.is_none();
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    if created {
        spec.lease_transitions = Some(0);
    } else if spec.holder_identity.as_deref() != Some(identity) {
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
    }
    spec.holder_identity = Some(identity.to_owned());
    spec.lease_duration_seconds = Some(i32::try_from(duration.as_secs()).unwrap_or(i32::MAX));
    spec.acquire_time = Some(now.clone());
    spec.renew_time = Some(now);
    lease
}

/// The write of [`super::Action::Renew`]: `held` (the version last written, or read back) with a new renew time;
/// a handover mark written since is kept.
pub fn renewed(held: &Lease, now: MicroTime) -> Lease {
    let mut lease = held.clone();
    lease.spec.get_or_insert_with(LeaseSpec::default).renew_time = Some(now);
    lease
}

/// The write of [`super::Action::Release`]: no holder, valid for one more second (as client-go releases), the
/// handover mark kept so the member it names knows the release is its cue.
pub fn released(held: &Lease, now: MicroTime) -> Lease {
    let mut lease = held.clone();
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    spec.holder_identity = Some(String::new());
    spec.lease_duration_seconds = Some(1);
    spec.renew_time = Some(now);
    lease
}

/// The write of [`super::Action::MarkForHandover`]: the observed Lease with `identity` in its handover mark, the
/// holder's fields untouched.
pub fn marked(observed: &Lease, identity: &str) -> Lease {
    let mut lease = observed.clone();
    lease
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(HANDOVER_ANNOTATION.to_owned(), identity.to_owned());
    lease
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> MicroTime {
        MicroTime(k8s_openapi::jiff::Timestamp::from_second(seconds).expect("a valid time"))
    }

    fn stored(version: &str, lease: Lease) -> Lease {
        let mut lease = lease;
        lease.metadata.resource_version = Some(version.to_owned());
        lease
    }

    #[test]
    fn a_created_lease_names_its_holder_and_reads_back_as_held() {
        let lease = acquired(None, "ruleplane-unit-schedulers", "a", Duration::from_secs(15), at(100));
        assert_eq!(lease.metadata.resource_version, None, "a create");
        assert_eq!(lease.spec.as_ref().and_then(|s| s.lease_transitions), Some(0));
        let record = record_of(&lease, Duration::from_secs(99));
        assert_eq!(
            record,
            LeaseRecord {
                holder: Some("a".into()),
                duration: Duration::from_secs(15),
                handover_to: None
            }
        );
    }

    #[test]
    fn a_handover_marks_renews_releases_and_is_taken_by_the_member_that_asked() {
        let held = stored("1", acquired(None, "l", "a", Duration::from_secs(15), at(100)));
        let asked = stored("2", marked(&held, "b"));
        assert_eq!(
            marked(&held, "b").metadata.resource_version.as_deref(),
            Some("1"),
            "based on the observed one"
        );
        let record = record_of(&asked, Duration::from_secs(15));
        assert_eq!(
            (record.holder.as_deref(), record.handover_to.as_deref()),
            (Some("a"), Some("b"))
        );
        let renewal = renewed(&asked, at(102));
        assert_eq!(
            record_of(&renewal, Duration::ZERO).handover_to.as_deref(),
            Some("b"),
            "the mark is kept"
        );
        let release = stored("3", released(&renewal, at(103)));
        let record = record_of(&release, Duration::from_secs(15));
        assert_eq!(record.holder, None);
        assert_eq!(record.handover_to.as_deref(), Some("b"));
        assert_eq!(record.duration, Duration::from_secs(1));
        let taken = acquired(Some(&release), "l", "b", Duration::from_secs(15), at(104));
        assert_eq!(
            taken.metadata.resource_version.as_deref(),
            Some("3"),
            "preconditioned on the release"
        );
        let record = record_of(&taken, Duration::ZERO);
        assert_eq!((record.holder.as_deref(), record.handover_to), (Some("b"), None));
        assert_eq!(taken.spec.as_ref().and_then(|s| s.lease_transitions), Some(1));
    }

    #[test]
    fn a_released_or_negative_lease_reads_as_no_holder_for_the_default_duration() {
        let lease = stored("7", acquired(None, "l", "a", Duration::from_secs(15), at(100)));
        let mut odd = lease.clone();
        if let Some(spec) = odd.spec.as_mut() {
            spec.lease_duration_seconds = Some(-1);
            spec.holder_identity = Some(String::new());
        }
        let record = record_of(&odd, Duration::from_secs(15));
        assert_eq!((record.holder, record.duration), (None, Duration::from_secs(15)));
    }
}
