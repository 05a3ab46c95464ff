//! The plugin interfaces (PreFilter/Filter, PreScore/Score/Normalize) and building plugins from a profile.

mod balanced_allocation;
mod image_locality;
mod inter_pod_affinity;
mod inter_pod_affinity_score;
mod node_affinity;
mod node_declared_features;
mod node_label;
mod node_name;
mod node_ports;
mod node_resources_fit;
mod node_unschedulable;
pub(super) mod node_volume_limits;
pub(super) mod pod_topology_spread;
mod pod_topology_spread_score;
mod taint_toleration;
pub(super) mod volume_binding;
mod volume_binding_score;
pub(super) mod volume_restrictions;
mod volume_zone;

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::sync::Arc;

use super::behaviour::Behaviour;
use super::pod_info::PodInfo;
use super::profile::{FilterEntry, FilterPlugin, PluginArgs, ProfileError, ScoreEntry, ScorePlugin};
use super::snapshot::{NodeInfo, Snapshot};
use super::status::Verdict;

/// What one scheduling cycle's plugins read: the pod and the snapshot.
pub struct Cycle<'a> {
    /// The pod being scheduled.
    pub pod: &'a PodInfo,
    /// The cluster.
    pub snapshot: &'a Snapshot,
}

/// A PreFilter result.
pub enum PreFilter<'a> {
    /// The plugin has nothing to check for this pod; its Filter does not run.
    Skip,
    /// Run the filter on each node; `nodes`, when given, restricts the candidates (`PreFilterResult.NodeNames`).
    Run {
        /// The per-node check, holding the cycle state.
        filter: Box<dyn NodeFilter + 'a>,
        /// Node names the pod can only go to.
        nodes: Option<BTreeSet<String>>,
    },
    /// The pod cannot be placed on any node.
    Reject(Verdict),
    /// The plugin failed (kube-scheduler's `Error` status).
    Error(String),
}

impl<'a> PreFilter<'a> {
    /// Run `filter` on every node.
    pub fn run(filter: impl NodeFilter + 'a) -> PreFilter<'a> {
        PreFilter::Run {
            filter: Box::new(filter),
            nodes: None,
        }
    }
}

/// A filter plugin.
pub trait PreFilterPlugin: Debug + Send + Sync {
    /// PreFilter: computes the cycle state, or skips/rejects the pod.
    fn pre_filter<'a>(&'a self, cycle: &Cycle<'a>) -> PreFilter<'a>;
}

/// The per-node part of a filter.
pub trait NodeFilter {
    /// `None` when the node passes.
    fn filter(&self, node: &NodeInfo) -> Option<Verdict>;
}

/// A PreScore result.
pub enum PreScore<'a> {
    /// Nothing to score for this pod; the plugin's score is left out.
    Skip,
    /// Score each feasible node.
    Run(Box<dyn NodeScorer + 'a>),
    /// The plugin failed.
    Error(String),
}

/// A score plugin.
pub trait PreScorePlugin: Debug + Send + Sync {
    /// PreScore over the feasible nodes.
    fn pre_score<'a>(&'a self, cycle: &Cycle<'a>, nodes: &[&'a NodeInfo]) -> PreScore<'a>;
}

/// The per-node part of a score.
pub trait NodeScorer {
    /// The raw score.
    fn score(&self, node: &NodeInfo) -> i64;
    /// NormalizeScore over the feasible nodes' raw scores (identity when the plugin has none).
    fn normalize(&self, _nodes: &[&NodeInfo], _scores: &mut [i64]) {}
}

/// A built filter: its name (as reported) and the plugin.
pub type BuiltFilter = (Arc<str>, Box<dyn PreFilterPlugin>);
/// A built score: name, plugin and weight.
pub type BuiltScore = (Arc<str>, Box<dyn PreScorePlugin>, i64);

fn invalid_args(plugin: &str, errors: Vec<super::field::FieldError>) -> ProfileError {
    ProfileError::InvalidArgs {
        plugin: plugin.to_string(),
        errors,
    }
}

/// Builds a filter from a profile entry, validating its args.
pub(crate) fn build_filter(
    entry: &FilterEntry,
    args: &PluginArgs,
    behaviour: Behaviour,
) -> Result<BuiltFilter, ProfileError> {
    let plugin = match entry {
        FilterEntry::NodeValue(value_args) => {
            let path = value_args.compile().map_err(|e| invalid_args(&value_args.name, e))?;
            let plugin = node_label::NodeValue::new(value_args.clone(), path);
            return Ok((value_args.name.as_str().into(), Box::new(plugin)));
        }
        FilterEntry::Plugin(plugin) => *plugin,
    };
    let name: Arc<str> = plugin.as_str().into();
    let built: Box<dyn PreFilterPlugin> = match plugin {
        FilterPlugin::NodeUnschedulable => Box::new(node_unschedulable::NodeUnschedulable),
        FilterPlugin::NodeName => Box::new(node_name::NodeName),
        FilterPlugin::NodePorts => Box::new(node_ports::NodePorts),
        FilterPlugin::TaintToleration => Box::new(taint_toleration::TaintToleration),
        FilterPlugin::NodeAffinity => {
            args.node_affinity
                .validate()
                .map_err(|e| invalid_args(plugin.as_str(), e))?;
            Box::new(node_affinity::NodeAffinity::new(&args.node_affinity))
        }
        FilterPlugin::NodeResourcesFit => {
            let fit = args.node_resources_fit.defaulted();
            fit.validate().map_err(|e| invalid_args(plugin.as_str(), e))?;
            Box::new(node_resources_fit::Fit::new(&fit))
        }
        FilterPlugin::PodTopologySpread => {
            args.pod_topology_spread
                .validate()
                .map_err(|e| invalid_args(plugin.as_str(), e))?;
            Box::new(pod_topology_spread::PodTopologySpread::new(&args.pod_topology_spread))
        }
        FilterPlugin::InterPodAffinity => {
            args.inter_pod_affinity
                .validate()
                .map_err(|e| invalid_args(plugin.as_str(), e))?;
            Box::new(inter_pod_affinity::InterPodAffinity)
        }
        FilterPlugin::VolumeRestrictions => Box::new(volume_restrictions::VolumeRestrictions),
        FilterPlugin::VolumeZone => Box::new(volume_zone::VolumeZone),
        FilterPlugin::NodeVolumeLimits => Box::new(node_volume_limits::NodeVolumeLimits::new(behaviour)),
        FilterPlugin::VolumeBinding => Box::new(volume_binding::VolumeBinding),
        FilterPlugin::NodeDeclaredFeatures => Box::new(node_declared_features::NodeDeclaredFeatures),
        FilterPlugin::NodeValue => {
            return Err(ProfileError::MissingArgs {
                plugin: plugin.as_str(),
            });
        }
        other => return Err(ProfileError::NotImplemented { plugin: other.as_str() }),
    };
    Ok((name, built))
}

/// Builds a score from a profile entry, validating its args and weight (0 means 1).
pub(crate) fn build_score(
    entry: &ScoreEntry,
    args: &PluginArgs,
    behaviour: Behaviour,
) -> Result<BuiltScore, ProfileError> {
    let (plugin, weight) = match entry {
        ScoreEntry::NodeLabel(label_args) => {
            let path = label_args.compile().map_err(|e| invalid_args(&label_args.name, e))?;
            let weight = if label_args.weight == 0 { 1 } else { label_args.weight };
            let plugin = node_label::NodeLabel::new(label_args.clone(), path);
            return Ok((label_args.name.as_str().into(), Box::new(plugin), weight));
        }
        ScoreEntry::Plugin { plugin, weight } => (*plugin, *weight),
    };
    if weight < 0 {
        return Err(ProfileError::InvalidWeight {
            plugin: plugin.as_str().to_string(),
            weight,
        });
    }
    let weight = if weight == 0 { 1 } else { weight };
    let built: Box<dyn PreScorePlugin> = match plugin {
        ScorePlugin::TaintToleration => Box::new(taint_toleration::TaintToleration),
        ScorePlugin::NodeAffinity => {
            args.node_affinity
                .validate()
                .map_err(|e| invalid_args(plugin.as_str(), e))?;
            Box::new(node_affinity::NodeAffinity::new(&args.node_affinity))
        }
        ScorePlugin::NodeResourcesFit => {
            let fit = args.node_resources_fit.defaulted();
            fit.validate().map_err(|e| invalid_args(plugin.as_str(), e))?;
            Box::new(node_resources_fit::Fit::new(&fit))
        }
        ScorePlugin::NodeResourcesBalancedAllocation => {
            let balanced = args.node_resources_balanced_allocation.defaulted();
            balanced.validate().map_err(|e| invalid_args(plugin.as_str(), e))?;
            Box::new(balanced_allocation::BalancedAllocation::new(&balanced, behaviour))
        }
        ScorePlugin::ImageLocality => Box::new(image_locality::ImageLocality::new(behaviour)),
        ScorePlugin::VolumeBinding => Box::new(volume_binding_score::VolumeBindingScore {
            enabled: behaviour.scores_storage_capacity(),
        }),
        ScorePlugin::PodTopologySpread => {
            args.pod_topology_spread
                .validate()
                .map_err(|e| invalid_args(plugin.as_str(), e))?;
            Box::new(pod_topology_spread::PodTopologySpread::new(&args.pod_topology_spread))
        }
        ScorePlugin::InterPodAffinity => {
            args.inter_pod_affinity
                .validate()
                .map_err(|e| invalid_args(plugin.as_str(), e))?;
            Box::new(inter_pod_affinity_score::InterPodAffinityScore::new(
                &args.inter_pod_affinity,
            ))
        }
        ScorePlugin::NodeLabel => {
            return Err(ProfileError::MissingArgs {
                plugin: plugin.as_str(),
            });
        }
        other => return Err(ProfileError::NotImplemented { plugin: other.as_str() }),
    };
    Ok((plugin.as_str().into(), built, weight))
}

/// `helper.DefaultNormalizeScore`: scale to 0–100 by the maximum, optionally reversed.
pub(crate) fn default_normalize(scores: &mut [i64], reverse: bool) {
    let max = scores.iter().copied().max().unwrap_or(0).max(0);
    if max == 0 {
        if reverse {
            scores.iter_mut().for_each(|s| *s = 100);
        }
        return;
    }
    for score in scores.iter_mut() {
        let scaled = 100 * *score / max;
        *score = if reverse { 100 - scaled } else { scaled };
    }
}
