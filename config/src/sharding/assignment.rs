//! Which live member owns each unit: rendezvous hashing with a capacity bound, the same on every replica.
//!
//! Every member scores every unit with a hash of the pair; the highest scores win, as in plain rendezvous
//! (highest-random-weight) hashing, but a member takes no more than its fair share: with `U` units and `M`
//! members, `U mod M` members hold `⌈U/M⌉` units and the others `⌊U/M⌋`. The pairs are taken in one global order
//! (score, then names), each given to its member while that member has room, so the result depends only on the
//! set of members and units, not on the order a replica happens to list them.
//!
//! Movement: a pair's score never changes, so when a member joins it takes the units it scores highest (within
//! its share) and the others keep theirs except where the smaller share makes one give up its lowest-scored
//! unit; when a member leaves, its units go to the members that score them next. Exact fair shares cost some
//! extra movement, because which members hold the one unit above `⌊U/M⌋` changes with `M`: over joins from 1 to
//! 12 members of the 34 default units, 91 units move where the joining members take 72 (1.26×), over leaves 279
//! against the 216 the leaving members held (1.29×), never more than twice the minimum plus one (the tests).
//! A stateless rule (no input but the members) was preferred to one that reads the current owners: replicas that
//! observe the Leases at different moments would compute different answers.
//!
//! The two whole-set units are placed first, on different members when there are at least two: each is heavier
//! than a shard (every ResourceDefinition, every SchedulerPolicy with its node and pod caches), so they never
//! both land on one replica. They count toward that member's share like any unit.
//!
//! The scores are part of the protocol: replicas of two releases running side by side during an upgrade must
//! agree, so the hash is the documented FNV-1a 64 of [`super::units::fnv1a_64`] finished with SplitMix64's mixer.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use super::units::{Unit, fnv1a_64};

/// The owner of each unit, for one set of members.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assignment {
    owners: BTreeMap<Unit, String>,
}

impl Assignment {
    /// The member that should hold `unit`; `None` when there are no members or the unit was not assigned.
    pub fn owner(&self, unit: Unit) -> Option<&str> {
        self.owners.get(&unit).map(String::as_str)
    }

    /// The units `member` should hold, in order.
    #[cfg(test)]
    pub(crate) fn units_of(&self, member: &str) -> Vec<Unit> {
        self.owners
            .iter()
            .filter(|(_, owner)| owner.as_str() == member)
            .map(|(unit, _)| *unit)
            .collect()
    }

    /// Every unit with its owner, in unit order.
    pub fn iter(&self) -> impl Iterator<Item = (Unit, &str)> {
        self.owners.iter().map(|(unit, owner)| (*unit, owner.as_str()))
    }
}

/// SplitMix64's finaliser: every output bit depends on every input bit.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The rendezvous score of `member` for the unit named `unit`.
fn score(member: &str, unit: &str) -> u64 {
    mix(fnv1a_64(member.as_bytes()) ^ mix(fnv1a_64(unit.as_bytes())))
}

/// How many units each member holds so far, against the fair shares.
struct Shares<'a> {
    held: BTreeMap<&'a str, usize>,
    floor: usize,
    /// How many members may hold `floor + 1`.
    above_floor: usize,
    at_ceiling: usize,
}

impl<'a> Shares<'a> {
    fn new(members: &BTreeSet<&'a str>, units: usize) -> Self {
        let count = members.len().max(1);
        Shares {
            held: members.iter().map(|member| (*member, 0)).collect(),
            floor: units / count,
            above_floor: units % count,
            at_ceiling: 0,
        }
    }

    /// Whether `member` may take one more unit without taking a share another member needs.
    fn has_room(&self, member: &str) -> bool {
        let held = self.held.get(member).copied().unwrap_or(0);
        held < self.floor || (held == self.floor && self.at_ceiling < self.above_floor)
    }

    fn take(&mut self, member: &'a str) {
        let held = self.held.entry(member).or_insert(0);
        *held += 1;
        if *held == self.floor + 1 {
            self.at_ceiling += 1;
        }
    }
}

/// The owner of each of `units` among `members` (duplicates in either ignored). Deterministic: the same sets give
/// the same answer on every replica, whatever their order.
pub(crate) fn assign<'a>(members: impl IntoIterator<Item = &'a str>, units: &[Unit]) -> Assignment {
    let members: BTreeSet<&str> = members.into_iter().collect();
    let units: BTreeSet<Unit> = units.iter().copied().collect();
    if members.is_empty() {
        return Assignment::default();
    }
    let (shards, whole_sets): (Vec<Unit>, Vec<Unit>) = units.iter().partition(|unit| unit.shard().is_some());
    let mut shares = Shares::new(&members, units.len());
    let mut owners = BTreeMap::new();
    // The whole-set units first, one per member while there are members enough.
    let spread = members.len() >= whole_sets.len();
    let mut holding_whole_set = BTreeSet::new();
    for (_, member, unit) in ranked(&members, &whole_sets) {
        if owners.contains_key(&unit) || !shares.has_room(member) || (spread && holding_whole_set.contains(member)) {
            continue;
        }
        shares.take(member);
        holding_whole_set.insert(member);
        owners.insert(unit, member.to_owned());
    }
    let ranked_shards = ranked(&members, &shards);
    for (_, member, unit) in ranked_shards {
        if owners.contains_key(&unit) || !shares.has_room(member) {
            continue;
        }
        shares.take(member);
        owners.insert(unit, member.to_owned());
    }
    Assignment { owners }
}

/// Every (member, unit) pair, highest score first; ties (never seen in practice) broken by the names.
fn ranked<'a>(members: &BTreeSet<&'a str>, units: &[Unit]) -> Vec<(Reverse<u64>, &'a str, Unit)> {
    let mut pairs: Vec<(Reverse<u64>, &str, Unit)> = units
        .iter()
        .flat_map(|unit| {
            let name = unit.to_string();
            members
                .iter()
                .map(move |member| (Reverse(score(member, &name)), *member, *unit))
        })
        .collect();
    pairs.sort();
    pairs
}

#[cfg(test)]
mod tests {
    use super::super::units::{DEFAULT_SHARDS, units};
    use super::*;

    /// Identities as a Deployment names its pods.
    fn members(count: usize) -> Vec<String> {
        (0..count)
            .map(|i| format!("ruleplane-6f7c9d{i}b-x{}q", i * 7 % 10))
            .collect()
    }

    fn refs(members: &[String]) -> Vec<&str> {
        members.iter().map(String::as_str).collect()
    }

    fn moved(before: &Assignment, after: &Assignment) -> usize {
        before
            .iter()
            .filter(|(unit, owner)| after.owner(*unit) != Some(owner))
            .count()
    }

    #[test]
    fn every_member_holds_its_fair_share_from_1_to_12_members() {
        let all = units(DEFAULT_SHARDS);
        for count in 1..=12 {
            let members = members(count);
            let assignment = assign(refs(&members), &all);
            assert_eq!(
                assignment.iter().count(),
                all.len(),
                "{count} members: every unit owned"
            );
            let (floor, ceiling) = (all.len() / count, all.len().div_ceil(count));
            let mut at_ceiling = 0;
            for member in &members {
                let held = assignment.units_of(member).len();
                assert!(
                    held == floor || held == ceiling,
                    "{count} members: {member} holds {held}"
                );
                at_ceiling += usize::from(held == ceiling && ceiling != floor);
            }
            assert_eq!(at_ceiling, all.len() % count, "{count} members");
        }
    }

    #[test]
    fn the_whole_set_units_go_to_different_members() {
        let all = units(DEFAULT_SHARDS);
        for count in 2..=12 {
            let members = members(count);
            let assignment = assign(refs(&members), &all);
            assert_ne!(
                assignment.owner(Unit::ResourceDefinitions),
                assignment.owner(Unit::Schedulers),
                "{count} members"
            );
        }
        let one = members(1);
        let assignment = assign(refs(&one), &all);
        assert_eq!(assignment.units_of(&one[0]).len(), all.len());
    }

    #[test]
    fn the_assignment_does_not_depend_on_the_order_of_its_inputs() {
        let all = units(DEFAULT_SHARDS);
        let members = members(7);
        let forward = assign(refs(&members), &all);
        let mut reversed_members = refs(&members);
        reversed_members.reverse();
        let mut reversed_units = all.clone();
        reversed_units.reverse();
        assert_eq!(assign(reversed_members.clone(), &reversed_units), forward);
        reversed_members.push(members[3].as_str());
        assert_eq!(
            assign(reversed_members, &all),
            forward,
            "a duplicate member changes nothing"
        );
    }

    #[test]
    fn a_member_joining_moves_about_the_share_it_takes() {
        let all = units(DEFAULT_SHARDS);
        let mut total_moved = 0;
        let mut total_minimum = 0;
        for count in 1..=11 {
            let members = members(count + 1);
            let before = assign(refs(&members[..count]), &all);
            let after = assign(refs(&members), &all);
            let minimum = after.units_of(&members[count]).len();
            let moved = moved(&before, &after);
            assert!(
                moved <= 2 * minimum + 1,
                "{count} → {}: moved {moved}, minimum {minimum}",
                count + 1
            );
            total_moved += moved;
            total_minimum += minimum;
        }
        assert!(
            total_moved * 100 <= total_minimum * 135,
            "moved {total_moved} against a minimum of {total_minimum}"
        );
    }

    #[test]
    fn a_member_leaving_moves_about_the_share_it_held() {
        let all = units(DEFAULT_SHARDS);
        let mut total_moved = 0;
        let mut total_minimum = 0;
        for count in 2..=12 {
            let members = members(count);
            for leaving in [0, count / 2, count - 1] {
                let before = assign(refs(&members), &all);
                let rest: Vec<&str> = refs(&members)
                    .into_iter()
                    .enumerate()
                    .filter_map(|(i, member)| (i != leaving).then_some(member))
                    .collect();
                let after = assign(rest, &all);
                let minimum = before.units_of(&members[leaving]).len();
                let moved = moved(&before, &after);
                assert!(
                    moved <= 2 * minimum + 1,
                    "{count} − 1: moved {moved}, minimum {minimum}"
                );
                total_moved += moved;
                total_minimum += minimum;
            }
        }
        assert!(
            total_moved * 100 <= total_minimum * 135,
            "moved {total_moved} against a minimum of {total_minimum}"
        );
    }

    #[test]
    fn no_members_own_nothing() {
        assert_eq!(assign([], &units(4)).iter().count(), 0);
        assert_eq!(assign(["a"], &units(4)).owner(Unit::Schedulers), Some("a"));
    }
}
