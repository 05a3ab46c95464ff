//! One replica's tick as a pure plan: the live members, the member Leases to delete, an action for each Lease.
//!
//! The manager's unit loop carries the plan out against the apiserver and the simulation against its model, so
//! what the simulation checks is what the replicas do.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::assignment::assign;
use super::handover::{Action, LeaseRecord, Local, Timings, UnitView, decide, members};
use super::units::{Unit, member_lease_name, member_lease_prefix, unit_lease_name};
use super::view::LeaseView;

/// A replica's member Lease, or one unit's Lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Slot {
    Member,
    Unit(Unit),
}

/// Who is planning, and what it knows.
#[derive(Debug, Clone, Copy)]
pub struct TickInput<'a, T> {
    pub me: &'a str,
    /// The Leases' name prefix (`--leader-election-id`).
    pub prefix: &'a str,
    pub units: &'a [Unit],
    pub view: &'a LeaseView<T>,
    /// This replica's state of each slot; a slot missing is [`Local::Idle`].
    pub local: &'a BTreeMap<Slot, Local>,
    pub leaving: bool,
    pub now: Duration,
    pub timings: &'a Timings,
}

/// What one tick does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TickPlan {
    /// The members this replica counts, itself included while its member Lease is confirmed and it stays.
    pub live: BTreeSet<String>,
    /// Member Leases of replicas gone (released, or expired on this replica's clock), each with the version seen
    /// to expire: a delete preconditioned on it.
    pub deletes: Vec<(String, String)>,
    /// Each slot's action but [`Action::Wait`], with its Lease's name.
    pub actions: Vec<(Slot, String, Action)>,
}

/// The name of `slot`'s Lease.
pub fn slot_lease_name(prefix: &str, me: &str, slot: Slot) -> String {
    match slot {
        Slot::Member => member_lease_name(prefix, me),
        Slot::Unit(unit) => unit_lease_name(prefix, unit),
    }
}

/// The plan of one tick at `input.now`.
pub fn plan_tick<T>(input: &TickInput<'_, T>) -> TickPlan {
    let local = |slot: Slot| input.local.get(&slot).copied().unwrap_or(Local::Idle);
    let member_prefix = member_lease_prefix(input.prefix);
    let own_member = member_lease_name(input.prefix, input.me);
    let others = || {
        input
            .view
            .iter()
            .filter(|(name, _)| name.starts_with(&member_prefix) && *name != own_member)
    };
    // Member Leases of replicas gone are deleted: a replica joining later would otherwise count such a member
    // alive for a whole lease duration of its own, and every rollout would leave its pods' Leases behind.
    let deletes = others()
        .filter(|(_, seen)| seen.is_free(input.now))
        .map(|(name, seen)| (name.to_owned(), seen.version.clone()))
        .collect();
    let mut live = members(others().map(|(_, seen)| seen), input.now);
    live.remove(input.me);
    if local(Slot::Member).runs_work(input.now, input.timings) && !input.leaving {
        live.insert(input.me.to_owned());
    }
    let assignment = assign(live.iter().map(String::as_str), input.units);
    let slots = std::iter::once(Slot::Member).chain(input.units.iter().map(|unit| Slot::Unit(*unit)));
    let mut actions = Vec::new();
    for slot in slots {
        let name = slot_lease_name(input.prefix, input.me, slot);
        let lease = input.view.observed(&name);
        let view = UnitView {
            me: input.me,
            lease,
            local: local(slot),
            desired_owner: match slot {
                Slot::Member => (!input.leaving).then_some(input.me),
                Slot::Unit(unit) => assignment.owner(unit),
            },
            leaving: input.leaving,
            now: input.now,
        };
        let action = match decide(&view, input.timings) {
            // A holder that is no member any more (its member Lease expired) cannot answer: a mark would only
            // change the Lease's version and so restart the expiry count of every replica waiting for it (a
            // takeover after a kill -9 took 29 s instead of 15).
            Action::MarkForHandover
                if lease
                    .and_then(|seen| seen.record.holder.as_deref())
                    .is_some_and(|holder| !live.contains(holder)) =>
            {
                Action::Wait
            }
            action => action,
        };
        if action != Action::Wait {
            actions.push((slot, name, action));
        }
    }
    TickPlan { live, deletes, actions }
}

/// Whether the Lease as last seen (`seen`) may be the base of `action`'s write. A renewal or a release of a
/// held Lease must be based on a version naming this replica: the view may already hold a later version naming
/// another (this replica's release was stored but its answer lost, and the next owner took the Lease), and a
/// release based on that would clear the new owner's hold while it works. Otherwise the Lease is read back first
/// ([`after_refusal`]).
pub fn based_on_seen(action: Action, holding: bool, seen: Option<&LeaseRecord>, me: &str) -> bool {
    match (action, seen) {
        (_, None) => action == Action::Acquire,
        (Action::Renew | Action::Release, Some(record)) if holding => record.holder.as_deref() == Some(me),
        _ => true,
    }
}

/// What a refused write (a conflict) of one slot leads to once its Lease is read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterRefusal {
    /// The Lease still names this replica: the next write is based on the version read.
    StillHeld,
    /// The hold is over: the Lease names another replica, or is gone ([`super::Event::Lost`]).
    Lost,
    /// Nothing was held here: the version read (or its absence) is simply taken in.
    Refreshed,
}

/// The answer to a refused write: `holding` when the slot's state holds the Lease; `read_back` is the Lease read
/// after the refusal, `None` when it does not exist (then the view must forget it, or every later write would
/// again be based on a version that is gone).
pub fn after_refusal(holding: bool, read_back: Option<&LeaseRecord>, me: &str) -> AfterRefusal {
    match read_back {
        _ if !holding => AfterRefusal::Refreshed,
        Some(record) if record.holder.as_deref() == Some(me) => AfterRefusal::StillHeld,
        _ => AfterRefusal::Lost,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sharding::units;

    const S: fn(u64) -> Duration = Duration::from_secs;

    fn record(holder: Option<&str>) -> LeaseRecord {
        LeaseRecord {
            holder: holder.map(str::to_owned),
            duration: S(15),
            handover_to: None,
        }
    }

    #[test]
    fn a_member_lease_deleted_by_a_peer_is_created_again_once_forgotten() {
        let units = units(2);
        let timings = Timings::default();
        let local = BTreeMap::new();
        let mut view: LeaseView<()> = LeaseView::default();
        view.see("ruleplane-member-me", "40", record(Some("me")), (), S(1));
        let plan_of = |view: &LeaseView<()>| {
            plan_tick(&TickInput {
                me: "me",
                prefix: "ruleplane",
                units: &units,
                view,
                local: &local,
                leaving: false,
                now: S(100),
                timings: &timings,
            })
        };
        let plan = plan_of(&view);
        assert!(
            plan.actions
                .contains(&(Slot::Member, "ruleplane-member-me".into(), Action::Acquire)),
            "a Lease naming this replica is taken again: {plan:?}"
        );
        // The replace on version 40 was refused: the Lease is gone. Forgotten, the next plan creates it.
        assert_eq!(after_refusal(false, None, "me"), AfterRefusal::Refreshed);
        view.forget("ruleplane-member-me");
        let plan = plan_of(&view);
        assert!(plan.live.is_empty(), "not a member until its Lease is stored");
        assert_eq!(
            plan.actions.first(),
            Some(&(Slot::Member, "ruleplane-member-me".into(), Action::Acquire))
        );
    }

    #[test]
    fn expired_member_leases_of_others_are_deleted_on_the_version_seen_and_their_holders_are_not_marked() {
        let units = units(1);
        let timings = Timings::default();
        let local = BTreeMap::from([(Slot::Member, Local::Running { confirmed: S(95) })]);
        let mut view: LeaseView<()> = LeaseView::default();
        view.see("ruleplane-member-gone", "7", record(Some("gone")), (), S(10));
        view.see("ruleplane-unit-schedulers", "8", record(Some("gone")), (), S(90));
        let plan = plan_tick(&TickInput {
            me: "me",
            prefix: "ruleplane",
            units: &units,
            view: &view,
            local: &local,
            leaving: false,
            now: S(100),
            timings: &timings,
        });
        assert_eq!(plan.deletes, vec![("ruleplane-member-gone".into(), "7".into())]);
        assert_eq!(plan.live, BTreeSet::from(["me".to_owned()]));
        assert!(
            !plan
                .actions
                .iter()
                .any(|(slot, _, _)| *slot == Slot::Unit(Unit::Schedulers)),
            "no mark on a Lease whose holder is no member: {plan:?}"
        );
    }

    #[test]
    fn a_held_lease_is_renewed_or_released_only_on_a_version_naming_this_replica() {
        let mine = record(Some("me"));
        let theirs = record(Some("b"));
        assert!(based_on_seen(Action::Release, true, Some(&mine), "me"));
        assert!(
            !based_on_seen(Action::Release, true, Some(&theirs), "me"),
            "the next owner's version"
        );
        assert!(!based_on_seen(Action::Renew, true, Some(&theirs), "me"));
        assert!(
            !based_on_seen(Action::Renew, true, None, "me"),
            "nothing seen: read it first"
        );
        assert!(based_on_seen(Action::Acquire, false, None, "me"), "a create");
        assert!(based_on_seen(Action::MarkForHandover, false, Some(&theirs), "me"));
        assert!(!based_on_seen(Action::MarkForHandover, false, None, "me"));
    }

    #[test]
    fn a_refused_write_of_a_held_lease_is_lost_unless_the_lease_still_names_this_replica() {
        assert_eq!(
            after_refusal(true, Some(&record(Some("me"))), "me"),
            AfterRefusal::StillHeld
        );
        assert_eq!(after_refusal(true, Some(&record(Some("b"))), "me"), AfterRefusal::Lost);
        assert_eq!(after_refusal(true, Some(&record(None)), "me"), AfterRefusal::Lost);
        assert_eq!(after_refusal(true, None, "me"), AfterRefusal::Lost, "deleted");
        assert_eq!(
            after_refusal(false, Some(&record(Some("b"))), "me"),
            AfterRefusal::Refreshed
        );
    }
}
