//! What the unit loop publishes: the units that run on this replica and whether it is a member.

use std::collections::BTreeSet;

/// Whether this replica is a member of the installation: only a member is assigned units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Membership {
    /// Started, its member Lease not confirmed yet.
    #[default]
    Joining,
    /// Its member Lease confirmed: the others count it and it may run units.
    Member,
    /// Not a member while it should be one: its member Lease is not confirmed (retrying). No unit is assigned to
    /// it; `answered` says whether the apiserver answered its last requests (if not, every replica is in the same
    /// place and nothing is wrong with this one).
    Retrying { answered: bool },
    /// Shutting down: everything handed back.
    Leaving,
}

impl Membership {
    pub fn label(self) -> &'static str {
        match self {
            Membership::Joining => "joining",
            Membership::Member => "member",
            Membership::Retrying { .. } => "retrying",
            Membership::Leaving => "leaving",
        }
    }

    /// Whether the replica may report ready: a member, or shut out only because the apiserver does not answer.
    /// A replica that the apiserver answers but that is no member runs nothing while looking healthy: not ready.
    pub fn ready(self) -> Result<(), String> {
        match self {
            Membership::Member => Ok(()),
            Membership::Retrying { answered: false } => Ok(()),
            Membership::Joining => Err("its member Lease is not confirmed yet".into()),
            Membership::Retrying { answered: true } => Err(
                "not a member: the apiserver answers but its member Lease is not confirmed; no unit is assigned \
                 to this replica (retrying)"
                    .into(),
            ),
            Membership::Leaving => Err("shutting down".into()),
        }
    }
}

/// What runs on this replica, as the unit loop last published it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Owned {
    /// Reconciler shards whose work runs here.
    pub shards: BTreeSet<u32>,
    pub resource_definitions: bool,
    pub schedulers: bool,
    /// Counts holds that ended while their work ran (an abandoned or lost Lease): the work still running must be
    /// aborted at once, not drained.
    pub aborts: u64,
    /// The live members this replica counts (itself included while its member Lease is confirmed); 0 before the
    /// first tick.
    pub members: usize,
    pub membership: Membership,
}

impl Owned {
    /// Every unit, for good: a process without Leases.
    pub fn everything(shards: u32) -> Self {
        Owned {
            shards: (0..shards).collect(),
            resource_definitions: true,
            schedulers: true,
            aborts: 0,
            members: 1,
            membership: Membership::Member,
        }
    }

    /// Whether any unit runs here.
    pub fn any(&self) -> bool {
        !self.shards.is_empty() || self.resource_definitions || self.schedulers
    }

    /// One line for `/readyz?verbose`.
    pub fn describe(&self, shards: u32) -> String {
        let mut parts = vec![format!(
            "{} of {shards} reconciler shards{}",
            self.shards.len(),
            if self.shards.is_empty() || self.shards.len() == shards as usize {
                String::new()
            } else {
                format!(
                    " ({})",
                    self.shards.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
                )
            }
        )];
        if self.resource_definitions {
            parts.push("resource-definitions".into());
        }
        if self.schedulers {
            parts.push("schedulers".into());
        }
        format!("{}; {} member(s)", parts.join(", "), self.members)
    }
}
