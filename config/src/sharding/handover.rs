//! One unit's Lease protocol as a pure state machine: what a replica does with a unit on each tick, and membership.
//!
//! Time here is a replica's own monotonic clock, as a `Duration` since any origin it chooses; no decision reads a
//! wall clock or another replica's clock (a Lease's `renewTime` is written for people, never read).

use std::collections::BTreeSet;
use std::time::Duration;

/// The Lease timings, shared by every unit Lease and member Lease of an installation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timings {
    /// How long a Lease version stays valid, counted by each observer from when it first saw that version.
    pub lease_duration: Duration,
    /// A holder whose last confirmed write was sent this long ago stops the unit's work.
    pub renew_deadline: Duration,
    /// How often a holder renews.
    pub retry_period: Duration,
}

impl Default for Timings {
    /// kube-scheduler's leader election's: 15 s, 10 s, 2 s.
    fn default() -> Self {
        Timings {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// Timings under which two holders of one unit's Lease could overlap.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimingError {
    #[error(
        "the renew deadline ({renew_deadline:?}) must be shorter than the lease duration ({lease_duration:?}): a \
         holder must stop before another replica may take the Lease over"
    )]
    DeadlineNotBeforeExpiry {
        renew_deadline: Duration,
        lease_duration: Duration,
    },
    #[error(
        "the retry period ({retry_period:?}) must be shorter than the renew deadline ({renew_deadline:?}), or a \
         holder never gets a second chance to renew"
    )]
    RetryNotBeforeDeadline {
        retry_period: Duration,
        renew_deadline: Duration,
    },
}

impl Timings {
    /// client-go's checks: the safety argument needs renew deadline < lease duration.
    pub fn check(&self) -> Result<(), TimingError> {
        if self.renew_deadline >= self.lease_duration {
            return Err(TimingError::DeadlineNotBeforeExpiry {
                renew_deadline: self.renew_deadline,
                lease_duration: self.lease_duration,
            });
        }
        if self.retry_period >= self.renew_deadline {
            return Err(TimingError::RetryNotBeforeDeadline {
                retry_period: self.retry_period,
                renew_deadline: self.renew_deadline,
            });
        }
        Ok(())
    }
}

/// What the protocol reads of a Lease (unit or member): `spec.holderIdentity` (empty = `None`: released),
/// `spec.leaseDurationSeconds`, and the [`crate::ownership::HANDOVER_ANNOTATION`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRecord {
    pub holder: Option<String>,
    pub duration: Duration,
    /// The member asking for the unit (unit Leases only).
    pub handover_to: Option<String>,
}

/// A Lease version as this replica observed it, and when it first saw that version on its own clock
/// (client-go's `observedTime`): an expiry is counted from there, so clock skew between replicas never matters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// `metadata.resourceVersion`: compared for equality only, as Kubernetes asks.
    pub version: String,
    pub record: LeaseRecord,
    pub first_seen: Duration,
}

impl Observed {
    /// `record` at `version`, seen at `now`; the first sighting's time is kept while the version does not change.
    pub fn see(previous: Option<Observed>, version: &str, record: LeaseRecord, now: Duration) -> Observed {
        match previous {
            Some(previous) if previous.version == version => previous,
            _ => Observed {
                version: version.to_owned(),
                record,
                first_seen: now,
            },
        }
    }

    /// Whether another replica may take the Lease at `now`: released (no holder), or this version unchanged for
    /// its whole duration since first seen here.
    pub(crate) fn is_free(&self, now: Duration) -> bool {
        self.record.holder.is_none() || now >= self.first_seen + self.record.duration
    }

    fn holder_is(&self, identity: &str) -> bool {
        self.record.holder.as_deref() == Some(identity)
    }
}

/// The members of the installation at `now`: holders of member Leases this replica has not seen expire. A replica
/// renews its own member Lease while it runs and releases it first when it leaves, so the others stop assigning
/// it units at once instead of after an expiry.
pub fn members<'a>(member_leases: impl IntoIterator<Item = &'a Observed>, now: Duration) -> BTreeSet<String> {
    member_leases
        .into_iter()
        .filter(|lease| !lease.is_free(now))
        .filter_map(|lease| lease.record.holder.clone())
        .collect()
}

/// This replica's side of one unit. Every state but `Idle` holds the Lease, `confirmed` being when the last
/// write the apiserver stored naming this replica was sent (on this replica's clock): the hold, and any work,
/// ends by `confirmed + renew_deadline`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Local {
    /// Not held here, no work.
    Idle,
    /// Acquired; the unit's workers are starting (their watches syncing).
    Starting { confirmed: Duration },
    /// The unit's workers take and reconcile its work.
    Running { confirmed: Duration },
    /// Told to take no new work; `in_flight` reconciles still running.
    Stopping { confirmed: Duration, in_flight: usize },
    /// No work left; the Lease still held until released.
    Stopped { confirmed: Duration },
}

/// What happened to a unit, moving its [`Local`] state on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A write taking the Lease (create or replace on a free version) was stored, sent at `sent`.
    Acquired { sent: Duration },
    /// A renewal was stored, sent at `sent`.
    Renewed { sent: Duration },
    /// The unit's workers are up.
    Started,
    /// The workers were told to stop; `in_flight` reconciles were running.
    StopRequested { in_flight: usize },
    /// In-flight reconciles finished; `left` still run.
    Drained { left: usize },
    /// The release was stored.
    Released,
    /// A renewal was refused and the Lease read back names someone else (or is gone): the hold is over.
    Lost,
    /// The work was aborted at once ([`Action::Abandon`]).
    Abandoned,
}

impl Local {
    /// When the last confirmed write naming this replica was sent, while the Lease is held here.
    pub fn confirmed(self) -> Option<Duration> {
        match self {
            Local::Idle => None,
            Local::Starting { confirmed }
            | Local::Running { confirmed }
            | Local::Stopping { confirmed, .. }
            | Local::Stopped { confirmed } => Some(confirmed),
        }
    }

    /// Whether the unit's work may run at `now`: started and not yet stopped, and within the renew deadline.
    /// The manager gates the unit's workers on this (a timer of its own), so a replica
    /// that stops ticking — paused, its requests hanging — still stops working at its deadline.
    pub fn runs_work(self, now: Duration, timings: &Timings) -> bool {
        match self {
            Local::Starting { confirmed } | Local::Running { confirmed } | Local::Stopping { confirmed, .. } => {
                now < confirmed + timings.renew_deadline
            }
            Local::Idle | Local::Stopped { .. } => false,
        }
    }

    /// The state after `event`. An event that does not apply to the state leaves it as it is.
    #[must_use]
    pub fn on(self, event: Event) -> Local {
        match (self, event) {
            (Local::Idle, Event::Acquired { sent }) => Local::Starting { confirmed: sent },
            (_, Event::Renewed { sent }) => self.with_confirmed(sent),
            (Local::Starting { confirmed }, Event::Started) => Local::Running { confirmed },
            (Local::Starting { confirmed } | Local::Running { confirmed }, Event::StopRequested { in_flight }) => {
                Local::Stopping { confirmed, in_flight }.drained()
            }
            (Local::Stopping { confirmed, .. }, Event::Drained { left }) => Local::Stopping {
                confirmed,
                in_flight: left,
            }
            .drained(),
            // A release is stored only once the work has stopped; one reported earlier leaves the work running,
            // so the overlap shows instead of being hidden here.
            (Local::Stopped { .. }, Event::Released) => Local::Idle,
            (_, Event::Lost | Event::Abandoned) => Local::Idle,
            (state, _) => state,
        }
    }

    fn drained(self) -> Local {
        match self {
            Local::Stopping {
                confirmed,
                in_flight: 0,
            } => Local::Stopped { confirmed },
            state => state,
        }
    }

    /// The same state, confirmed at `sent` if that is later.
    fn with_confirmed(self, sent: Duration) -> Local {
        let at = |confirmed: Duration| confirmed.max(sent);
        match self {
            Local::Idle => Local::Idle,
            Local::Starting { confirmed } => Local::Starting {
                confirmed: at(confirmed),
            },
            Local::Running { confirmed } => Local::Running {
                confirmed: at(confirmed),
            },
            Local::Stopping { confirmed, in_flight } => Local::Stopping {
                confirmed: at(confirmed),
                in_flight,
            },
            Local::Stopped { confirmed } => Local::Stopped {
                confirmed: at(confirmed),
            },
        }
    }
}

/// Everything one tick decides a unit from.
#[derive(Debug, Clone, Copy)]
pub struct UnitView<'a> {
    /// This replica's identity.
    pub me: &'a str,
    /// The unit's Lease as last observed; `None` when there is none (never created).
    pub lease: Option<&'a Observed>,
    pub local: Local,
    /// The unit's owner in this replica's [`super::assign`] of the members it sees.
    pub desired_owner: Option<&'a str>,
    /// This replica is shutting down: it takes nothing and hands everything back.
    pub leaving: bool,
    /// This replica's clock.
    pub now: Duration,
}

/// What a replica does with a unit on one tick. Every write is a replace preconditioned on the resourceVersion
/// it was based on (a create when there is no Lease), bounded by a request timeout; a refused write changes
/// nothing and the next tick decides again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Take the free Lease (released, expired, or naming this replica already): holder this replica, handover
    /// mark cleared, based on the observed version. Stored → [`Event::Acquired`], start the unit's workers.
    Acquire,
    /// Renew the held Lease, based on the version last written (on a conflict, read it back: still ours → renew
    /// on that version; someone else's → [`Event::Lost`]). Keeps the handover mark.
    Renew,
    /// Stop taking the unit's work; in-flight reconciles finish ([`Event::StopRequested`], [`Event::Drained`]).
    StopWork,
    /// Clear the holder (keeping the handover mark), based on the version last written — or, from `Idle`, on the
    /// observed one naming this replica. Only once no work runs: the new owner waits for exactly this.
    Release,
    /// Write this replica's identity into the held Lease's handover mark, based on the observed version: asks
    /// the holder to stop and release.
    MarkForHandover,
    /// Abort the unit's work at once and forget the hold: its renew deadline passed without a confirmed renewal.
    /// The Lease expires on its own.
    Abandon,
    Wait,
}

/// The one action for a unit at `view.now`.
///
/// A holder: past its renew deadline it abandons; stopped, it releases; a renewal due, it renews; running and
/// asked for the unit by the member that should own it (or leaving), it stops the work. A replica without the
/// Lease takes it only when it should own it and the Lease is free; if it is held, it marks it for handover.
pub fn decide(view: &UnitView<'_>, timings: &Timings) -> Action {
    let wants = view.desired_owner == Some(view.me) && !view.leaving;
    if let Some(confirmed) = view.local.confirmed() {
        if view.now >= confirmed + timings.renew_deadline {
            return Action::Abandon;
        }
        if let Local::Stopped { .. } = view.local {
            return Action::Release;
        }
        if view.now >= confirmed + timings.retry_period {
            return Action::Renew;
        }
        return match view.local {
            Local::Starting { .. } | Local::Running { .. } if hands_over(view) => Action::StopWork,
            _ => Action::Wait,
        };
    }
    let Some(lease) = view.lease else {
        return if wants { Action::Acquire } else { Action::Wait };
    };
    if lease.holder_is(view.me) {
        // Ours in the apiserver's eyes but not here: a write whose answer was lost, or this identity's previous
        // process. No work runs here, so taking it again or releasing it are both safe.
        return if wants { Action::Acquire } else { Action::Release };
    }
    if lease.is_free(view.now) {
        return if wants { Action::Acquire } else { Action::Wait };
    }
    if wants && lease.record.handover_to.as_deref() != Some(view.me) {
        return Action::MarkForHandover;
    }
    Action::Wait
}

/// Whether a holder gives the unit up: it is leaving, or the member that should own it (in this replica's view
/// too) has asked for it. Waiting for the ask means the work moves only to a replica that is up and wants it.
fn hands_over(view: &UnitView<'_>) -> bool {
    if view.leaving {
        return true;
    }
    let asked_by = view.lease.and_then(|lease| lease.record.handover_to.as_deref());
    matches!((view.desired_owner, asked_by), (Some(desired), Some(asking)) if desired != view.me && desired == asking)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    fn lease(holder: Option<&str>, handover_to: Option<&str>, first_seen: Duration) -> Observed {
        Observed {
            version: "7".into(),
            record: LeaseRecord {
                holder: holder.map(str::to_owned),
                duration: S(15),
                handover_to: handover_to.map(str::to_owned),
            },
            first_seen,
        }
    }

    fn view<'a>(lease: Option<&'a Observed>, local: Local, desired: &'a str, now: Duration) -> UnitView<'a> {
        UnitView {
            me: "a",
            lease,
            local,
            desired_owner: Some(desired),
            leaving: false,
            now,
        }
    }

    #[test]
    fn the_default_timings_pass_their_check_and_unsafe_ones_do_not() {
        assert_eq!(Timings::default().check(), Ok(()));
        let overlapping = Timings {
            renew_deadline: S(15),
            ..Timings::default()
        };
        assert!(matches!(
            overlapping.check(),
            Err(TimingError::DeadlineNotBeforeExpiry { .. })
        ));
        let no_retry = Timings {
            retry_period: S(10),
            ..Timings::default()
        };
        assert!(matches!(
            no_retry.check(),
            Err(TimingError::RetryNotBeforeDeadline { .. })
        ));
    }

    #[test]
    fn a_free_lease_is_taken_only_by_the_member_that_should_own_it() {
        let t = Timings::default();
        let released = lease(None, None, S(100));
        assert_eq!(
            decide(&view(Some(&released), Local::Idle, "a", S(100)), &t),
            Action::Acquire
        );
        assert_eq!(
            decide(&view(Some(&released), Local::Idle, "b", S(100)), &t),
            Action::Wait
        );
        assert_eq!(
            decide(&view(None, Local::Idle, "a", S(0)), &t),
            Action::Acquire,
            "created"
        );
        let leaving = UnitView {
            leaving: true,
            ..view(Some(&released), Local::Idle, "a", S(100))
        };
        assert_eq!(decide(&leaving, &t), Action::Wait, "a leaving replica takes nothing");
    }

    #[test]
    fn a_held_lease_is_free_only_once_its_version_was_seen_unchanged_for_its_duration() {
        let t = Timings::default();
        let held = lease(Some("b"), Some("a"), S(100));
        assert_eq!(decide(&view(Some(&held), Local::Idle, "a", S(114)), &t), Action::Wait);
        assert_eq!(
            decide(&view(Some(&held), Local::Idle, "a", S(115)), &t),
            Action::Acquire
        );
        let seen_again = Observed::see(Some(held.clone()), "7", held.record.clone(), S(110));
        assert_eq!(
            seen_again.first_seen,
            S(100),
            "the same version keeps its first sighting"
        );
        let renewed = Observed::see(Some(held.clone()), "8", held.record.clone(), S(110));
        assert!(!renewed.is_free(S(115)), "a new version starts the count again");
    }

    #[test]
    fn the_member_that_should_own_a_held_unit_marks_it_once() {
        let t = Timings::default();
        let unmarked = lease(Some("b"), None, S(100));
        assert_eq!(
            decide(&view(Some(&unmarked), Local::Idle, "a", S(101)), &t),
            Action::MarkForHandover
        );
        let marked = lease(Some("b"), Some("a"), S(100));
        assert_eq!(decide(&view(Some(&marked), Local::Idle, "a", S(101)), &t), Action::Wait);
        assert_eq!(
            decide(&view(Some(&unmarked), Local::Idle, "c", S(101)), &t),
            Action::Wait
        );
    }

    #[test]
    fn a_holder_stops_when_the_member_that_should_own_the_unit_asks_and_releases_once_drained() {
        let t = Timings::default();
        let running = Local::Running { confirmed: S(100) };
        let asked = lease(Some("a"), Some("b"), S(100));
        let unasked = lease(Some("a"), None, S(100));
        assert_eq!(decide(&view(Some(&unasked), running, "b", S(101)), &t), Action::Wait);
        assert_eq!(
            decide(&view(Some(&asked), running, "a", S(101)), &t),
            Action::Wait,
            "not in my view"
        );
        assert_eq!(decide(&view(Some(&asked), running, "b", S(101)), &t), Action::StopWork);
        let stopping = running.on(Event::StopRequested { in_flight: 2 });
        assert_eq!(
            stopping,
            Local::Stopping {
                confirmed: S(100),
                in_flight: 2
            }
        );
        assert!(stopping.runs_work(S(101), &t), "in-flight reconciles are work");
        assert_eq!(decide(&view(Some(&asked), stopping, "b", S(101)), &t), Action::Wait);
        let stopped = stopping.on(Event::Drained { left: 0 });
        assert_eq!(stopped, Local::Stopped { confirmed: S(100) });
        assert!(!stopped.runs_work(S(101), &t));
        assert_eq!(decide(&view(Some(&asked), stopped, "b", S(101)), &t), Action::Release);
        assert_eq!(stopped.on(Event::Released), Local::Idle);
        assert_eq!(stopping.on(Event::Released), stopping, "no release while work runs");
    }

    #[test]
    fn a_leaving_holder_stops_without_being_asked() {
        let t = Timings::default();
        let held = lease(Some("a"), None, S(100));
        let leaving = UnitView {
            leaving: true,
            ..view(Some(&held), Local::Running { confirmed: S(100) }, "a", S(101))
        };
        assert_eq!(decide(&leaving, &t), Action::StopWork);
        assert_eq!(
            Local::Running { confirmed: S(1) }.on(Event::StopRequested { in_flight: 0 }),
            Local::Stopped { confirmed: S(1) },
            "nothing in flight: stopped at once"
        );
    }

    #[test]
    fn a_holder_renews_every_retry_period_and_abandons_at_its_deadline() {
        let t = Timings::default();
        let held = lease(Some("a"), None, S(100));
        let running = Local::Running { confirmed: S(100) };
        assert_eq!(decide(&view(Some(&held), running, "a", S(101)), &t), Action::Wait);
        assert_eq!(decide(&view(Some(&held), running, "a", S(102)), &t), Action::Renew);
        assert_eq!(
            running.on(Event::Renewed { sent: S(102) }),
            Local::Running { confirmed: S(102) }
        );
        assert!(running.runs_work(Duration::from_millis(109_999), &t));
        assert!(
            !running.runs_work(S(110), &t),
            "the deadline stops the work whether or not a tick comes"
        );
        assert_eq!(decide(&view(Some(&held), running, "a", S(110)), &t), Action::Abandon);
        let stopping = Local::Stopping {
            confirmed: S(100),
            in_flight: 3,
        };
        assert_eq!(decide(&view(Some(&held), stopping, "b", S(110)), &t), Action::Abandon);
        assert_eq!(running.on(Event::Lost), Local::Idle);
    }

    #[test]
    fn a_lease_naming_this_replica_while_idle_is_taken_again_or_released() {
        let t = Timings::default();
        let ours = lease(Some("a"), None, S(100));
        assert_eq!(
            decide(&view(Some(&ours), Local::Idle, "a", S(100)), &t),
            Action::Acquire
        );
        assert_eq!(
            decide(&view(Some(&ours), Local::Idle, "b", S(100)), &t),
            Action::Release
        );
    }

    #[test]
    fn no_state_takes_an_action_outside_the_protocol() {
        let t = Timings::default();
        let locals = [
            Local::Idle,
            Local::Starting { confirmed: S(100) },
            Local::Running { confirmed: S(100) },
            Local::Stopping {
                confirmed: S(100),
                in_flight: 2,
            },
            Local::Stopped { confirmed: S(100) },
        ];
        let leases = [
            None,
            Some(lease(None, None, S(95))),
            Some(lease(None, Some("b"), S(95))),
            Some(lease(Some("a"), None, S(95))),
            Some(lease(Some("a"), Some("b"), S(95))),
            Some(lease(Some("b"), None, S(95))),
            Some(lease(Some("b"), Some("a"), S(95))),
            Some(lease(Some("b"), None, S(80))),
        ];
        for local in locals {
            for lease in &leases {
                for desired in [None, Some("a"), Some("b")] {
                    for leaving in [false, true] {
                        for now in [S(100), S(101), S(102), S(109), S(110), S(130)] {
                            let view = UnitView {
                                me: "a",
                                lease: lease.as_ref(),
                                local,
                                desired_owner: desired,
                                leaving,
                                now,
                            };
                            let action = decide(&view, &t);
                            let context = format!("{local:?} {lease:?} {desired:?} leaving {leaving} at {now:?}");
                            let holding = local != Local::Idle;
                            match action {
                                Action::Acquire => {
                                    assert!(!holding && !leaving && desired == Some("a"), "{context}");
                                    assert!(
                                        lease.as_ref().is_none_or(|l| l.is_free(now) || l.holder_is("a")),
                                        "{context}"
                                    );
                                }
                                Action::Release => assert!(
                                    matches!(local, Local::Stopped { .. })
                                        || (!holding && lease.as_ref().is_some_and(|l| l.holder_is("a"))),
                                    "never while work may run: {context}"
                                ),
                                Action::Renew | Action::Abandon => assert!(holding, "{context}"),
                                Action::StopWork => {
                                    assert!(
                                        matches!(local, Local::Starting { .. } | Local::Running { .. }),
                                        "{context}"
                                    );
                                }
                                Action::MarkForHandover => assert!(!holding && !leaving, "{context}"),
                                Action::Wait => {}
                            }
                            if holding && now >= S(110) {
                                assert_eq!(action, Action::Abandon, "past the deadline: {context}");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn members_are_the_holders_of_member_leases_not_seen_expire() {
        let alive = lease(Some("a"), None, S(100));
        let expired = lease(Some("b"), None, S(80));
        let released = lease(None, None, S(100));
        let found = members([&alive, &expired, &released], S(101));
        assert_eq!(found.into_iter().collect::<Vec<_>>(), ["a"]);
    }
}
