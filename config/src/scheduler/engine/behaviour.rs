//! Which kube-scheduler minor the engine behaves as: every v1.35/v1.36/v1.37 difference it mirrors, decided here.

// The engine gets a Kubernetes version once, when it is built (`Engine::for_version`); plugins and the PostFilter
// chain ask this type, never the version, so each difference is one named question with its upstream source. Only
// differences that change a verdict, a score, a message, an Event or a condition are here (of a pod without
// resource claims, or of a gang of the Workload API); `docs/scheduler.md` ("Behaviour by Kubernetes version")
// lists them with how each is tested.

use super::profile::{FilterEntry, FilterPlugin};
use crate::KubernetesVersion;

/// kube-scheduler's behaviour at one supported minor version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Behaviour(KubernetesVersion);

/// Which image volumes (`spec.volumes[].image`) ImageLocality counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageVolumes {
    /// v1.35: containers' images only.
    Ignored,
    /// v1.36: an image volume on the node adds to the sum; the threshold still counts containers only.
    InSum,
    /// v1.37: in the sum and in the image count the threshold is scaled by.
    InSumAndCount,
}

/// How kube-scheduler schedules a gang of the Workload API (GangScheduling).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GangCycle {
    /// v1.35: member by member, each waiting at Permit until the quorum is assumed (`gangscheduling.go` Permit).
    PermitWaits,
    /// v1.36: one pod-group cycle tries every member, each with its own PostFilter; the group is schedulable once
    /// Permit allows one of them (`schedule_one_podgroup.go` `podGroupSchedulingDefaultAlgorithm`).
    PodGroup,
    /// v1.37: one pod-group cycle checked by GangScheduling's PlacementFeasible after each member, which ends it once
    /// `minCount` is out of reach; no member runs PostFilter, the group's PodGroupPostFilter runs once at the end.
    PlacementFeasible,
}

impl Behaviour {
    /// kube-scheduler of `version`'s behaviour.
    pub fn of(version: KubernetesVersion) -> Behaviour {
        Behaviour(version)
    }

    /// The version behaved as.
    pub fn version(self) -> KubernetesVersion {
        self.0
    }

    /// NodeResourcesBalancedAllocation scores how much the pod improves the node's balance,
    /// `50 + (50 + withPod − withoutPod) / 2`, instead of the balance with the pod alone (v1.36:
    /// `noderesources/balanced_allocation.go` `balancedResourceScorer`).
    pub(crate) fn balance_scores_the_change(self) -> bool {
        self.0 >= KubernetesVersion::V1_36
    }

    /// What ImageLocality makes of image volumes (v1.36 and v1.37: `imagelocality/image_locality.go`
    /// `sumImageScores`, `calculatePriority`).
    pub(crate) fn image_volumes(self) -> ImageVolumes {
        match self.0 {
            KubernetesVersion::V1_35 => ImageVolumes::Ignored,
            KubernetesVersion::V1_36 => ImageVolumes::InSum,
            KubernetesVersion::V1_37 => ImageVolumes::InSumAndCount,
        }
    }

    /// NodeName filters before NodeUnschedulable, so a node failing both is reported by NodeName (v1.37:
    /// `apis/config/v1/default_plugins.go` `getDefaultPlugins`).
    pub(crate) fn node_name_filters_first(self) -> bool {
        self.0 >= KubernetesVersion::V1_37
    }

    /// A successful preemption says where it placed the pod, `preemption: found a potential placement for pod on
    /// node N, preempting V victims`, appended to FailedScheduling (v1.37: `framework/preemption/preemption.go`
    /// `Preempt`; before, a success appends nothing).
    pub(crate) fn preemption_reports_its_placement(self) -> bool {
        self.0 >= KubernetesVersion::V1_37
    }

    /// NodeDeclaredFeatures filters (its gate is on by default from v1.36: `pkg/features/kube_features.go`,
    /// `apis/config/v1/default_plugins.go` `applyFeatureGates`); before, kube-scheduler leaves it out of the
    /// default profile, and the plugin skips every pod when listed.
    pub(crate) fn declares_node_features(self) -> bool {
        self.0 >= KubernetesVersion::V1_36
    }

    /// NodeVolumeLimits takes Portworx's in-tree volumes as migrated to CSI on any node with a CSINode, without the
    /// CSINode's migrated-plugins annotation (v1.36: `nodevolumelimits/utils.go` `isCSIMigrationOn`).
    pub(crate) fn portworx_migrates_without_annotation(self) -> bool {
        self.0 >= KubernetesVersion::V1_36
    }

    /// NodeVolumeLimits rejects a node whose CSINode does not list a new volume's driver when that driver's
    /// CSIDriver sets `preventPodSchedulingIfMissing` (`<driver> CSI driver is not installed on the node`): the
    /// `VolumeLimitScaling` gate, beta and on by default from v1.37 (`nodevolumelimits/csi.go`
    /// `checkCSIDriverOnNode`; alpha and off before, and the apiserver drops the field while it is off).
    pub(crate) fn requires_opted_in_csi_drivers_on_node(self) -> bool {
        self.0 >= KubernetesVersion::V1_37
    }

    /// VolumeBinding scores nodes by how much of the storage its new volumes would use there, most room first: the
    /// `StorageCapacityScoring` gate, beta and on by default from v1.37 (`volumebinding/volume_binding.go` `Score`,
    /// `scorer.go`; the default shape from `apis/config/v1/defaults.go`). Before, the plugin has no scorer.
    pub(crate) fn scores_storage_capacity(self) -> bool {
        self.0 >= KubernetesVersion::V1_37
    }

    /// PodTopologySpread's and InterPodAffinity's pod hints take a nominated pod as placed, InterPodAffinity's
    /// queues the pod on its own label change and on the deletion of a pod whose anti-affinity it matched (v1.36:
    /// `podtopologyspread/plugin.go` `involvedInTopologySpreading`, `interpodaffinity/plugin.go`
    /// `isSchedulableAfterPodChange`).
    pub(crate) fn pod_hints_count_nominated_pods(self) -> bool {
        self.0 >= KubernetesVersion::V1_36
    }

    /// DynamicResources' PostFilter gives a reason, `no new claims to deallocate`, for a pod without claims, which
    /// FailedScheduling carries before DefaultPreemption's; from v1.37 it rejects without one
    /// (`dynamicresources/dynamicresources.go` `PostFilter`).
    pub(crate) fn dynamic_resources_explains_no_claims(self) -> bool {
        self.0 <= KubernetesVersion::V1_36
    }

    /// How a gang of the Workload API is scheduled ([`GangCycle`]).
    pub(crate) fn gang_cycle(self) -> GangCycle {
        match self.0 {
            KubernetesVersion::V1_35 => GangCycle::PermitWaits,
            KubernetesVersion::V1_36 => GangCycle::PodGroup,
            KubernetesVersion::V1_37 => GangCycle::PlacementFeasible,
        }
    }

    /// The condition kube-scheduler sets on a PodGroup after each pod-group cycle (`submitPodGroupAlgorithmResult`):
    /// `PodGroupScheduled` in v1.36, `PodGroupInitiallyScheduled` in v1.37; v1.35 has no PodGroup object.
    pub fn pod_group_condition(self) -> Option<&'static str> {
        match self.0 {
            KubernetesVersion::V1_35 => None,
            KubernetesVersion::V1_36 => Some("PodGroupScheduled"),
            KubernetesVersion::V1_37 => Some("PodGroupInitiallyScheduled"),
        }
    }

    /// Whether a Workload API gang member's own cycle runs the PostFilter chain (DefaultPreemption for that member
    /// alone, its text in the member's FailedScheduling): up to v1.36; from v1.37 a pod-group cycle skips it
    /// (`schedule_one.go` `schedulingAlgorithm`) and preempts for the group as a whole.
    pub(crate) fn gang_member_post_filter(self) -> bool {
        self.0 <= KubernetesVersion::V1_36
    }

    /// Whether a preemption victim stops counting against PodDisruptionBudgets at the first budget it takes below
    /// zero (v1.37: `preemption/util.go` `FilterVictimsWithPDBViolation` returns there; before, the pod's other
    /// budgets are decremented too, which changes later victims' verdicts when budgets overlap).
    pub fn pdb_check_stops_at_first_violation(self) -> bool {
        self.0 >= KubernetesVersion::V1_37
    }

    /// Whether a pod-group cycle starts by checking that the group's members name one scheduler, one preemption
    /// policy and the PodGroup's priority, failing them all with a SchedulerError otherwise (v1.37:
    /// `schedule_one_podgroup.go` `validatePodGroup`; v1.36 checks only the queued members' scheduler name, which
    /// one policy's queue always shares).
    pub fn validates_pod_groups(self) -> bool {
        self.0 >= KubernetesVersion::V1_37
    }

    /// The profile's filters this version runs, in its order: the profile lists built-in filters in v1.35's
    /// default order (NodeUnschedulable, then NodeName); from v1.37 NodeName comes first. NodeDeclaredFeatures is
    /// left out before v1.36, where it would skip every pod.
    pub(crate) fn filter_order(self, filters: &[FilterEntry]) -> Vec<&FilterEntry> {
        let declared_features = FilterEntry::Plugin(FilterPlugin::NodeDeclaredFeatures);
        let mut ordered: Vec<&FilterEntry> = filters
            .iter()
            .filter(|e| self.declares_node_features() || **e != declared_features)
            .collect();
        if self.node_name_filters_first() {
            let at = |plugin| ordered.iter().position(|e| **e == FilterEntry::Plugin(plugin));
            if let (Some(unschedulable), Some(name)) = (at(FilterPlugin::NodeUnschedulable), at(FilterPlugin::NodeName))
                && name > unschedulable
            {
                let entry = ordered.remove(name);
                ordered.insert(unschedulable, entry);
            }
        }
        ordered
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gangs_wait_at_permit_in_v1_35_and_run_one_pod_group_cycle_since() {
        let of = |version| Behaviour::of(version);
        assert_eq!(of(KubernetesVersion::V1_35).gang_cycle(), GangCycle::PermitWaits);
        assert_eq!(of(KubernetesVersion::V1_36).gang_cycle(), GangCycle::PodGroup);
        assert_eq!(of(KubernetesVersion::V1_37).gang_cycle(), GangCycle::PlacementFeasible);
        assert_eq!(of(KubernetesVersion::V1_35).pod_group_condition(), None);
        assert_eq!(
            of(KubernetesVersion::V1_36).pod_group_condition(),
            Some("PodGroupScheduled")
        );
        assert_eq!(
            of(KubernetesVersion::V1_37).pod_group_condition(),
            Some("PodGroupInitiallyScheduled")
        );
    }

    #[test]
    fn a_gang_member_runs_its_own_post_filter_until_v1_36() {
        assert!(Behaviour::of(KubernetesVersion::V1_35).gang_member_post_filter());
        assert!(Behaviour::of(KubernetesVersion::V1_36).gang_member_post_filter());
        assert!(!Behaviour::of(KubernetesVersion::V1_37).gang_member_post_filter());
    }
}
