//! NodeDeclaredFeatures (from v1.36): a pod whose spec needs a node feature goes only to nodes declaring it.

// kube-scheduler's `nodedeclaredfeatures/nodedeclaredfeatures.go` over component-helpers' registry
// (`nodedeclaredfeatures/features`, v0.36/v0.37): PreFilter infers the features the pod needs and skips when there
// are none; Filter rejects, UnschedulableAndUnresolvable, a node whose `status.declaredFeatures` lacks one. Of the
// registry, only the features whose scheduling inference reads the pod are here: the others infer nothing for
// scheduling, and v1.37's VolumeBindMountOptions reads `volumeMounts[].bindMountOptions`, which the apiserver
// drops while its alpha gate is off (the default).

use super::{Cycle, NodeFilter, PreFilter, PreFilterPlugin};
use crate::scheduler::engine::snapshot::NodeInfo;
use crate::scheduler::engine::status::Verdict;
use k8s_openapi::api::core::v1::PodSpec;

/// The reason for nodes that do not declare a feature the pod needs.
pub const REASON: &str = "node(s) didn't match Pod's required features";

/// The plugin.
#[derive(Debug)]
pub struct NodeDeclaredFeatures;

struct Check {
    needed: Vec<&'static str>,
}

impl PreFilterPlugin for NodeDeclaredFeatures {
    fn pre_filter<'a>(&'a self, cycle: &Cycle<'a>) -> PreFilter<'a> {
        let needed = cycle.pod.pod().spec.as_ref().map(needed_features).unwrap_or_default();
        if needed.is_empty() {
            return PreFilter::Skip;
        }
        PreFilter::run(Check { needed })
    }
}

impl NodeFilter for Check {
    fn filter(&self, node: &NodeInfo) -> Option<Verdict> {
        // Read whole only here: pods needing a feature are rare, and the node stays kept as text.
        let node = node.to_node();
        let declared = node
            .status
            .as_ref()
            .and_then(|s| s.declared_features.as_deref())
            .unwrap_or_default();
        let missing = self.needed.iter().any(|feature| !declared.iter().any(|d| d == feature));
        missing.then(|| Verdict::unresolvable(REASON))
    }
}

/// The features a pod needs to be scheduled (`Framework.InferForPodScheduling`), by the names nodes declare.
pub(crate) fn needed_features(spec: &PodSpec) -> Vec<&'static str> {
    let mut needed = Vec::new();
    // restartallcontainers: a container restart rule whose action restarts every container.
    let containers = spec.containers.iter().chain(spec.init_containers.iter().flatten());
    let restarts_all = containers
        .flat_map(|c| c.restart_policy_rules.iter().flatten())
        .any(|rule| rule.action == "RestartAllContainers");
    if restarts_all {
        needed.push("RestartAllContainersOnContainerExits");
    }
    // usernamespaceshostnetwork: host network inside a user namespace.
    if spec.host_network == Some(true) && spec.host_users == Some(false) {
        needed.push("UserNamespacesHostNetworkSupport");
    }
    needed
}
