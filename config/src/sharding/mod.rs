//! Active-active sharding's pure decisions: the units, which member owns each, and the Lease handover.
//!
//! The parts, each with its reasons in its own docs:
//! - [`units`]: Reconciler parents hashed into [`DEFAULT_SHARDS`] virtual shards by [`shard_of`] (FNV-1a 64 of
//!   `namespace/name`, stable across releases), plus one ResourceDefinition unit and one SchedulerPolicy unit;
//!   each unit is owned through its own Lease ([`unit_lease_name`]);
//! - [`assign`]: which live member should own each unit, rendezvous hashing bounded to fair shares;
//! - [`decide`]: one unit's Lease protocol as a state machine, per replica and tick, and [`members`] from the
//!   member Leases. Its guarantee, no unit's work on two replicas at once, rests on leader election's argument:
//!   every write preconditioned on the resourceVersion it was based on, expiry counted by each observer on its
//!   own clock, and a holder's work ending at its renew deadline. A deterministic
//!   simulation (`simulation.rs`) checks it under conflicts, lost answers, crashes, pauses, joins and leaves;
//! - [`record_of`] and the write bodies ([`acquired`], [`renewed`], [`released`], [`marked`]): the Lease objects;
//! - [`LeaseView`]: what a replica knows of the Leases (a relist replaces it, a read finding nothing forgets);
//! - [`plan_tick`]: one replica's tick (members, deletes of gone members' Leases, an action per Lease) and
//!   [`after_refusal`], carried out by the manager and by the simulation alike.
//!
//! `docs/design.md` ("Active-active sharding: the protocol") describes the whole; `manager/src/sharding/` carries
//! it out against the apiserver.

mod assignment;
mod handover;
mod lease;
#[cfg(test)]
mod simulation;
mod tick;
mod units;
mod view;

pub use assignment::Assignment;
#[cfg(test)]
pub(crate) use assignment::assign;
pub use handover::{Action, Event, LeaseRecord, Local, Observed, TimingError, Timings, UnitView, decide, members};
pub use lease::{acquired, marked, record_of, released, renewed};
pub use tick::{AfterRefusal, Slot, TickInput, TickPlan, after_refusal, based_on_seen, plan_tick, slot_lease_name};
pub(crate) use units::shard_label_value;
#[cfg(test)]
pub(crate) use units::unit_lease_name;
pub use units::{
    DEFAULT_SHARDS, MAX_SHARDS, ShardCountError, Unit, check_shard_count, member_lease_name, member_lease_prefix,
    shard_of, unit_lease_prefix, units,
};
pub use view::LeaseView;
