//! Leader election on paused time against scripted renewals: deadlines, retries, holders, standby expiry, release.

use std::collections::VecDeque;

use super::*;

const DEADLINE: Duration = Duration::from_secs(10);
const RETRY: Duration = Duration::from_secs(2);

fn lease(version: &str, holder: &str, seconds: i32) -> Lease {
    let mut lease = Lease::default();
    lease.metadata.name = Some("ruleplane".into());
    lease.metadata.resource_version = Some(version.into());
    lease.spec = Some(LeaseSpec {
        holder_identity: Some(holder.into()),
        lease_duration_seconds: Some(seconds),
        lease_transitions: Some(3),
        ..Default::default()
    });
    lease
}

/// Renewals answered in order, each after `delay`; once the script is used up, renewals never answer.
struct Scripted {
    delay: Duration,
    answers: VecDeque<Option<String>>,
    asked: Vec<Instant>,
}

impl Scripted {
    fn new(delay: Duration, answers: impl IntoIterator<Item = Option<&'static str>>) -> Self {
        Scripted {
            delay,
            answers: answers.into_iter().map(|h| h.map(str::to_owned)).collect(),
            asked: Vec::new(),
        }
    }
}

impl Renew for Scripted {
    async fn renew(&mut self) -> Renewal {
        let sent = Instant::now();
        self.asked.push(sent);
        let Some(answer) = self.answers.pop_front() else {
            return std::future::pending().await;
        };
        tokio::time::sleep(self.delay).await;
        match answer {
            Some(holder) if holder == "me" => Renewal::Confirmed { sent },
            Some(holder) if holder == "timeout" => Renewal::Failed(LeaseError::Timeout(self.delay)),
            other => Renewal::Lost(other),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_leader_whose_renewal_hangs_stops_at_the_renew_deadline() {
    let start = Instant::now();
    let mut hanging = Scripted::new(Duration::ZERO, []);
    let end = hold(&mut hanging, start, DEADLINE, RETRY, std::future::pending()).await;
    assert_eq!(end, HoldEnd::DeadlinePassed);
    assert_eq!(
        start.elapsed(),
        DEADLINE,
        "not a moment later, although the request never answered"
    );
    assert_eq!(hanging.asked, vec![start + RETRY], "one renewal, hanging ever since");
}

#[tokio::test(start_paused = true)]
async fn the_deadline_counts_from_when_the_last_confirmed_renewal_was_sent_not_answered() {
    let start = Instant::now();
    // Each renewal takes 1.5 s to be answered; after three the apiserver goes silent.
    let mut slow = Scripted::new(Duration::from_millis(1_500), [Some("me"), Some("me"), Some("me")]);
    let end = hold(&mut slow, start, DEADLINE, RETRY, std::future::pending()).await;
    assert_eq!(end, HoldEnd::DeadlinePassed);
    let last_confirmed_sent = slow.asked[2];
    assert_eq!(slow.asked[..3], [start + RETRY, start + 2 * RETRY, start + 3 * RETRY]);
    assert_eq!(start.elapsed(), last_confirmed_sent - start + DEADLINE);
}

#[tokio::test(start_paused = true)]
async fn failed_renewals_are_retried_every_retry_period_until_the_deadline() {
    let start = Instant::now();
    let mut failing = Scripted::new(Duration::from_millis(300), [Some("timeout"); 10]);
    let end = hold(&mut failing, start, DEADLINE, RETRY, std::future::pending()).await;
    assert_eq!(end, HoldEnd::DeadlinePassed);
    assert_eq!(start.elapsed(), DEADLINE);
    let offsets: Vec<Duration> = failing.asked.iter().map(|t| *t - start).collect();
    // The one due at 10 s is not sent: the deadline wins the tie.
    assert_eq!(offsets, [2, 4, 6, 8].map(Duration::from_secs));
}

#[tokio::test(start_paused = true)]
async fn a_renewal_answered_with_another_holder_ends_leadership_at_once() {
    let start = Instant::now();
    let mut taken = Scripted::new(Duration::from_millis(5), [Some("me"), Some("someone-else")]);
    let end = hold(&mut taken, start, DEADLINE, RETRY, std::future::pending()).await;
    assert_eq!(end, HoldEnd::Lost(Some("someone-else".into())));
    assert_eq!(start.elapsed(), 2 * RETRY + Duration::from_millis(5));
}

#[tokio::test(start_paused = true)]
async fn shutdown_ends_the_hold_while_a_renewal_hangs() {
    let start = Instant::now();
    let mut hanging = Scripted::new(Duration::ZERO, []);
    let end = hold(
        &mut hanging,
        start,
        DEADLINE,
        RETRY,
        tokio::time::sleep(Duration::from_secs(3)),
    )
    .await;
    assert_eq!(end, HoldEnd::Shutdown);
    assert_eq!(start.elapsed(), Duration::from_secs(3));
}

#[test]
fn only_an_answer_naming_us_is_leadership() {
    assert_eq!(check_holder(&lease("7", "me", 15), "me"), Ok(()));
    assert_eq!(check_holder(&lease("7", "other", 15), "me"), Err(Some("other".into())));
    assert_eq!(check_holder(&lease("7", "", 1), "me"), Err(None), "released");
    assert_eq!(check_holder(&Lease::default(), "me"), Err(None));
}

#[tokio::test(start_paused = true)]
async fn a_standby_counts_expiry_from_when_it_first_saw_the_version() {
    let first = Instant::now();
    let seen = Observed::see(None, &lease("7", "leader", 15), Duration::from_secs(30), first);
    assert_eq!(
        seen.free_at(),
        first + Duration::from_secs(15),
        "the Lease's own duration"
    );
    tokio::time::advance(Duration::from_secs(9)).await;
    // The same version read again (a poll) does not restart the clock...
    let again = Observed::see(Some(seen), &lease("7", "leader", 15), DEADLINE, Instant::now());
    assert_eq!(again.free_at(), first + Duration::from_secs(15));
    // ...a renewal (a new version) does, whatever renewTime it carries.
    let renewed = Observed::see(Some(again), &lease("8", "leader", 15), DEADLINE, Instant::now());
    assert_eq!(renewed.free_at(), first + Duration::from_secs(9 + 15));
}

#[tokio::test(start_paused = true)]
async fn a_released_lease_is_free_at_once() {
    let now = Instant::now();
    let seen = Observed::see(None, &lease("9", "", 1), DEADLINE, now);
    assert_eq!(seen.holder, None);
    assert_eq!(seen.free_at(), now);
}

#[test]
fn every_write_is_based_on_the_version_it_read() {
    let now = micro_now();
    let observed = lease("41", "old", 15);
    let taken = taken_over(&observed, "me", Duration::from_secs(15), now.clone());
    assert_eq!(taken.metadata.resource_version.as_deref(), Some("41"));
    let spec = taken.spec.as_ref().expect("spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("me"));
    assert_eq!(spec.lease_transitions, Some(4), "a new holder is a transition");
    assert_eq!(spec.renew_time, Some(now.clone()));

    let mine = lease("42", "me", 15);
    let again = taken_over(&mine, "me", Duration::from_secs(15), now.clone());
    assert_eq!(
        again.spec.and_then(|s| s.lease_transitions),
        Some(3),
        "not a transition"
    );

    let renewal = renewed(&mine, now.clone());
    assert_eq!(renewal.metadata.resource_version.as_deref(), Some("42"));
    assert_eq!(
        renewal.spec.as_ref().and_then(|s| s.renew_time.clone()),
        Some(now.clone())
    );
    assert_eq!(check_holder(&renewal, "me"), Ok(()));

    let release = released(&mine, now);
    assert_eq!(release.metadata.resource_version.as_deref(), Some("42"));
    assert_eq!(check_holder(&release, "me"), Err(None));
    assert_eq!(release.spec.and_then(|s| s.lease_duration_seconds), Some(1));
}

#[test]
fn a_409_is_a_lost_race_not_a_failure() {
    let status = kube::core::Status::failure("the object has been modified", "Conflict").with_code(409);
    assert!(matches!(
        LeaseError::from(kube::Error::Api(Box::new(status))),
        LeaseError::Conflict
    ));
}

fn timings(lease: u64, deadline: u64, retry: u64) -> LeaderConfig {
    LeaderConfig {
        namespace: "default".into(),
        lease_name: "ruleplane".into(),
        identity: "me".into(),
        lease_duration: Duration::from_secs(lease),
        renew_deadline: Duration::from_secs(deadline),
        retry_period: Duration::from_secs(retry),
    }
}

#[test]
fn timings_that_could_overlap_two_leaders_are_refused() {
    assert_eq!(timings(15, 10, 2).check(), Ok(()));
    assert!(matches!(
        timings(10, 10, 2).check(),
        Err(TimingError::DeadlineNotBeforeExpiry { .. })
    ));
    assert!(matches!(
        timings(15, 10, 10).check(),
        Err(TimingError::RetryNotBeforeDeadline { .. })
    ));
    assert_eq!(timings(15, 10, 2).request_timeout(), RETRY);
}
