//! Active-active sharding's pure decisions (issue 26): the units, which member owns each, and the Lease handover.

mod assignment;
mod handover;
#[cfg(test)]
mod simulation;
mod units;

pub use assignment::{Assignment, assign};
pub use handover::{Action, Event, LeaseRecord, Local, Observed, TimingError, Timings, UnitView, decide, members};
pub use units::{
    DEFAULT_SHARDS, MAX_SHARDS, Unit, fnv1a_64, member_lease_name, member_lease_prefix, shard_label_value, shard_of,
    unit_lease_name, unit_lease_prefix, units,
};
