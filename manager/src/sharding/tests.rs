//! The unit loop's bookkeeping: what it takes in, what it forgets, what it publishes.

use std::collections::BTreeSet;

use super::*;
use k8s_openapi::api::coordination::v1::LeaseSpec;

fn unit_loop(shards: u32) -> UnitLoop {
    let client = crate::context::offline_context().client;
    let config = ShardingConfig {
        namespace: "ns".into(),
        prefix: "ruleplane".into(),
        identity: "me".into(),
        timings: Timings::default(),
        shards,
    };
    UnitLoop::new(
        Api::namespaced(client, "ns"),
        ShardGate::closed(shards),
        std::sync::Arc::new(Metrics::new()),
        config,
    )
}

fn lease(name: &str, version: &str, holder: &str) -> Lease {
    let mut lease = Lease::default();
    lease.metadata.name = Some(name.into());
    lease.metadata.resource_version = Some(version.into());
    lease.spec = Some(LeaseSpec {
        holder_identity: Some(holder.into()),
        lease_duration_seconds: Some(15),
        ..Default::default()
    });
    lease
}

#[tokio::test(start_paused = true)]
async fn an_older_version_of_a_lease_never_replaces_a_newer_one_and_other_leases_are_ignored() {
    let mut state = unit_loop(4);
    state.see(lease("ruleplane-unit-schedulers", "12", "b"));
    state.see(lease("ruleplane-unit-schedulers", "9", "a"));
    let seen = state.view.observed("ruleplane-unit-schedulers").expect("seen");
    assert_eq!(
        (seen.version.as_str(), seen.record.holder.as_deref()),
        ("12", Some("b"))
    );
    state.see(lease("kube-scheduler", "3", "x"));
    assert!(!state.view.contains("kube-scheduler"), "not one of ours");
    state.take_in(watcher::Event::Delete(lease("ruleplane-unit-schedulers", "13", "b")));
    assert!(state.view.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_relist_forgets_a_member_lease_deleted_while_the_watch_was_down() {
    let mut state = unit_loop(2);
    state.take_in(watcher::Event::Apply(lease("ruleplane-member-me", "40", "me")));
    state.take_in(watcher::Event::Apply(lease("ruleplane-member-peer", "41", "peer")));
    // The watch failed (410), a peer deleted this replica's member Lease meanwhile, the watch relists.
    state.take_in(watcher::Event::Init);
    state.take_in(watcher::Event::InitApply(lease("ruleplane-member-peer", "41", "peer")));
    state.take_in(watcher::Event::InitApply(lease("kube-scheduler", "3", "x")));
    assert!(
        state.view.contains("ruleplane-member-me"),
        "swapped only at the relist's end"
    );
    state.take_in(watcher::Event::InitDone);
    assert!(!state.view.contains("ruleplane-member-me"), "deleted during the gap");
    assert!(state.view.contains("ruleplane-member-peer") && state.view.len() == 1);
    let plan = plan_tick(&TickInput {
        me: "me",
        prefix: "ruleplane",
        units: &state.units,
        view: &state.view,
        local: &state.local,
        leaving: false,
        now: state.now(),
        timings: &state.config.timings,
    });
    let (slot, _, action) = plan.actions.first().expect("an action");
    assert_eq!((*slot, *action), (Slot::Member, Action::Acquire));
    let body = acquired(
        state.view.body("ruleplane-member-me"),
        "ruleplane-member-me",
        "me",
        Duration::from_secs(15),
        micro_now(),
    );
    assert_eq!(
        body.metadata.resource_version, None,
        "a create, not a PUT of a stale body"
    );
}

#[tokio::test(start_paused = true)]
async fn a_read_back_that_finds_nothing_forgets_the_lease_and_a_lost_hold_closes_the_unit() {
    let mut state = unit_loop(2);
    state.see(lease("ruleplane-member-me", "40", "me"));
    let mut outcome = Outcome::new(Slot::Member);
    outcome.gone = true;
    let mut aborted = false;
    state.take_outcome(outcome, &mut aborted);
    assert!(!state.view.contains("ruleplane-member-me"));
    let unit = Slot::Unit(Unit::ReconcilerShard(1));
    state.local.insert(unit, Local::Running { confirmed: state.now() });
    state.see(lease("ruleplane-unit-reconciler-shard-1", "50", "me"));
    let mut outcome = Outcome::new(unit);
    outcome.gone = true;
    outcome.events.push(Event::Lost);
    state.take_outcome(outcome, &mut aborted);
    assert_eq!(state.local(unit), Local::Idle);
    assert!(aborted, "its work was running: aborted at once");
    assert!(!state.view.contains("ruleplane-unit-reconciler-shard-1"));
}

#[tokio::test(start_paused = true)]
async fn membership_is_joining_then_member_then_retrying_and_ready_only_when_it_should_be() {
    let mut state = unit_loop(2);
    assert_eq!(state.membership(false), Membership::Joining);
    assert!(Membership::Joining.ready().is_err());
    state
        .local
        .insert(Slot::Member, Local::Running { confirmed: state.now() });
    assert_eq!(state.membership(false), Membership::Member);
    assert!(Membership::Member.ready().is_ok());
    state.local.insert(Slot::Member, Local::Idle);
    assert_eq!(state.membership(false), Membership::Retrying { answered: true });
    let why = Membership::Retrying { answered: true }.ready().expect_err("not ready");
    assert!(why.contains("not a member"), "{why}");
    state.answered = false;
    assert_eq!(state.membership(false), Membership::Retrying { answered: false });
    assert!(
        Membership::Retrying { answered: false }.ready().is_ok(),
        "the apiserver does not answer anyone: not this replica's fault"
    );
    assert_eq!(state.membership(true), Membership::Leaving);
    let metric = |s: &str| {
        state
            .metrics
            .membership_state
            .get_or_create(&crate::metrics::StateLabels { state: s.into() })
            .get()
    };
    assert_eq!((metric("leaving"), metric("member")), (1, 0));
}

#[tokio::test(start_paused = true)]
async fn held_units_open_their_gate_until_the_renew_deadline_and_a_stopping_one_stays_closed() {
    let mut state = unit_loop(4);
    let confirmed = state.now();
    state
        .local
        .insert(Slot::Unit(Unit::ReconcilerShard(1)), Local::Starting { confirmed });
    state
        .local
        .insert(Slot::Unit(Unit::Schedulers), Local::Running { confirmed });
    state.local.insert(
        Slot::Unit(Unit::ReconcilerShard(2)),
        Local::Stopping {
            confirmed,
            in_flight: 1,
        },
    );
    let owned = state.publish(2, false, false);
    assert_eq!(owned.shards, BTreeSet::from([1]));
    assert!(owned.schedulers && !owned.resource_definitions);
    assert_eq!(
        owned.describe(4),
        "1 of 4 reconciler shards (1), schedulers; 2 member(s)"
    );
    assert!(state.gate.admits(Unit::ReconcilerShard(1)));
    assert!(!state.gate.admits(Unit::ReconcilerShard(2)), "stopping: no new work");
    assert_eq!(
        state.local(Slot::Unit(Unit::ReconcilerShard(1))),
        Local::Running { confirmed },
        "started"
    );
    tokio::time::advance(Timings::default().renew_deadline).await;
    assert!(
        !state.gate.admits(Unit::ReconcilerShard(1)),
        "the gate closes at the renew deadline without the loop"
    );
    let later = state.publish(2, true, false);
    assert!(
        later.shards.is_empty() && !later.schedulers,
        "past the deadline nothing runs"
    );
    assert_eq!(later.aborts, 1);
}
