//! The resolved policy the engine runs (plugins, weights, args), the plugin-name vocabulary and the presets.

use std::collections::BTreeSet;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::args::{
    CoschedulingArgs, DefaultPreemptionArgs, InterPodAffinityArgs, NodeAffinityArgs,
    NodeResourcesBalancedAllocationArgs, NodeResourcesFitArgs, PodTopologySpreadArgs, ResourceSpec, ScoringStrategy,
    ScoringStrategyType, VolumeBindingArgs,
};
use super::declarative::{NodeLabelArgs, NodeValueArgs};
use super::features::Feature;
use super::field::FieldError;

macro_rules! plugin_names {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)*
        }

        impl $name {
            /// Every plugin name.
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            /// The name as kube-scheduler (or Ruleplane, for its own plugins) spells it.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => stringify!($variant),)*
                }
            }

            /// The plugin with this name.
            pub(crate) fn from_name(name: &str) -> Option<$name> {
                Self::ALL.iter().copied().find(|p| p.as_str() == name)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

plugin_names!(
    /// Filter plugins: every kube-scheduler v1.35 in-tree filter, plus Ruleplane's declarative `NodeValue`.
    FilterPlugin {
        /// Rejects `spec.unschedulable` nodes unless tolerated.
        NodeUnschedulable,
        /// Rejects nodes other than `spec.nodeName`.
        NodeName,
        /// Rejects nodes with untolerated NoSchedule/NoExecute taints.
        TaintToleration,
        /// `nodeSelector`, required node affinity and the profile's added affinity.
        NodeAffinity,
        /// Host port conflicts.
        NodePorts,
        /// Requests against allocatable resources and pod count.
        NodeResourcesFit,
        /// In-tree disk conflicts and ReadWriteOncePod claims in use.
        VolumeRestrictions,
        /// CSI attach limits (CSINode `allocatable.count`).
        NodeVolumeLimits,
        /// PersistentVolumeClaims bound, matched to volumes or provisioned on the node (its Filter).
        VolumeBinding,
        /// Zone and region labels of bound PersistentVolumes.
        VolumeZone,
        /// Hard topology spread constraints.
        PodTopologySpread,
        /// Required pod affinity and anti-affinity.
        InterPodAffinity,
        /// Dynamic resource allocation (not implemented).
        DynamicResources,
        /// Features the pod needs that the node must declare (`status.declaredFeatures`); runs from v1.36.
        NodeDeclaredFeatures,
        /// Ruleplane: a node value selected by JSONPath must be in a set or range.
        NodeValue,
    }
);

plugin_names!(
    /// Score plugins: every kube-scheduler v1.35 in-tree score, plus Ruleplane's declarative `NodeLabel`.
    ScorePlugin {
        /// Fewer untolerated PreferNoSchedule taints is better.
        TaintToleration,
        /// Preferred node affinity (and the profile's added preferences).
        NodeAffinity,
        /// Resource allocation (LeastAllocated, MostAllocated, RequestedToCapacityRatio).
        NodeResourcesFit,
        /// Storage capacity (not implemented).
        VolumeBinding,
        /// Soft topology spread constraints, including the system defaults.
        PodTopologySpread,
        /// Preferred pod affinity and anti-affinity.
        InterPodAffinity,
        /// Dynamic resource allocation (not implemented).
        DynamicResources,
        /// Balance of resource fractions.
        NodeResourcesBalancedAllocation,
        /// Images already present on the node.
        ImageLocality,
        /// Ruleplane: a node value selected by JSONPath, mapped through a table or a shape.
        NodeLabel,
    }
);

impl FilterPlugin {
    /// Whether the engine evaluates this filter.
    pub(crate) fn is_implemented(self) -> bool {
        !matches!(self, FilterPlugin::DynamicResources)
    }
}

impl ScorePlugin {
    /// Whether the engine evaluates this score.
    pub(crate) fn is_implemented(self) -> bool {
        !matches!(self, ScorePlugin::DynamicResources)
    }

    /// The weight in kube-scheduler's default profile (1 for plugins it does not weight).
    pub(crate) fn default_weight(self) -> i64 {
        match self {
            ScorePlugin::TaintToleration => 3,
            ScorePlugin::NodeAffinity
            | ScorePlugin::PodTopologySpread
            | ScorePlugin::InterPodAffinity
            | ScorePlugin::DynamicResources => 2,
            _ => 1,
        }
    }
}

/// A filter of a profile: a built-in plugin or a declarative `NodeValue` instance.
#[derive(Clone, Debug, PartialEq)]
pub enum FilterEntry {
    /// A built-in plugin (its args, if any, come from [`PluginArgs`]).
    Plugin(FilterPlugin),
    /// A `NodeValue` instance with its own name and args.
    NodeValue(NodeValueArgs),
}

/// A score of a profile: a built-in plugin with its weight, or a declarative `NodeLabel` instance.
#[derive(Clone, Debug, PartialEq)]
pub enum ScoreEntry {
    /// A built-in plugin and its weight (0 means 1, as in kube-scheduler).
    Plugin {
        /// The plugin.
        plugin: ScorePlugin,
        /// Its weight.
        weight: i64,
    },
    /// A `NodeLabel` instance (name and weight are in its args).
    NodeLabel(NodeLabelArgs),
}

/// Args of the built-in plugins, keyed by plugin name as in kube-scheduler's `pluginConfig` (its defaults when
/// not given).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PluginArgs {
    /// NodeResourcesFit (filter and score).
    #[serde(rename = "NodeResourcesFit", default, skip_serializing_if = "is_default")]
    pub node_resources_fit: NodeResourcesFitArgs,
    /// NodeResourcesBalancedAllocation.
    #[serde(
        rename = "NodeResourcesBalancedAllocation",
        default,
        skip_serializing_if = "is_default"
    )]
    pub node_resources_balanced_allocation: NodeResourcesBalancedAllocationArgs,
    /// NodeAffinity (filter and score).
    #[serde(rename = "NodeAffinity", default, skip_serializing_if = "is_default")]
    pub node_affinity: NodeAffinityArgs,
    /// PodTopologySpread (filter and score).
    #[serde(rename = "PodTopologySpread", default, skip_serializing_if = "is_default")]
    pub pod_topology_spread: PodTopologySpreadArgs,
    /// InterPodAffinity (filter and score).
    #[serde(rename = "InterPodAffinity", default, skip_serializing_if = "is_default")]
    pub inter_pod_affinity: InterPodAffinityArgs,
    /// DefaultPreemption (how many nodes a preemption dry run examines).
    #[serde(rename = "DefaultPreemption", default, skip_serializing_if = "is_default")]
    pub default_preemption: DefaultPreemptionArgs,
    /// VolumeBinding (how long PreBind waits for the claims).
    #[serde(rename = "VolumeBinding", default, skip_serializing_if = "is_default")]
    pub volume_binding: VolumeBindingArgs,
    /// scheduler-plugins' Coscheduling (gangs in the PodGroup dialect).
    #[serde(rename = "Coscheduling", default, skip_serializing_if = "is_default")]
    pub coscheduling: CoschedulingArgs,
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

impl PluginArgs {
    /// Whether every plugin has kube-scheduler's default args.
    pub fn is_empty(&self) -> bool {
        is_default(self)
    }
}

/// How ties between the best-scored nodes are broken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum TieBreak {
    /// Uniformly at random among the best, from the engine's seeded generator.
    #[default]
    Random,
    /// As kube-scheduler v1.35 with `parallelism: 1` (and no extenders) does: the top of its heap over the
    /// feasible nodes in evaluation order.
    HeapOrder,
}

/// The resolved policy the engine runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    /// Filters in the order they run (PreFilter runs in the same order).
    pub filters: Vec<FilterEntry>,
    /// Scores.
    pub scores: Vec<ScoreEntry>,
    /// Args of built-in plugins.
    pub args: PluginArgs,
    /// Percentage of nodes to find feasible before stopping (0 = kube-scheduler's adaptive rule; 1–100).
    pub percentage_of_nodes_to_score: u8,
    /// Features to ignore instead of refusing pods that need them.
    pub ignored_features: BTreeSet<Feature>,
    /// Tie-breaking among the best nodes.
    pub tie_break: TieBreak,
}

impl Profile {
    /// kube-scheduler's default profile (v1.35 to v1.37), restricted to the plugins the engine implements, in the
    /// default MultiPoint order (filters NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts,
    /// NodeResourcesFit, VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone, PodTopologySpread,
    /// InterPodAffinity, NodeDeclaredFeatures (v1.36 on); scores TaintToleration 3, NodeAffinity 2, NodeResourcesFit 1,
    /// VolumeBinding 1 (v1.37 on), PodTopologySpread 2, InterPodAffinity 2, BalancedAllocation 1, ImageLocality 1).
    pub fn default_provider() -> Profile {
        Profile::preset(ScoringStrategyType::LeastAllocated)
    }

    /// The default profile with MostAllocated scoring (bin-packing), as the legacy ClusterAutoscalerProvider.
    pub(crate) fn cluster_autoscaler_provider() -> Profile {
        Profile::preset(ScoringStrategyType::MostAllocated)
    }

    fn preset(strategy: ScoringStrategyType) -> Profile {
        let filters = [
            FilterPlugin::NodeUnschedulable,
            FilterPlugin::NodeName,
            FilterPlugin::TaintToleration,
            FilterPlugin::NodeAffinity,
            FilterPlugin::NodePorts,
            FilterPlugin::NodeResourcesFit,
            FilterPlugin::VolumeRestrictions,
            FilterPlugin::NodeVolumeLimits,
            FilterPlugin::VolumeBinding,
            FilterPlugin::VolumeZone,
            FilterPlugin::PodTopologySpread,
            FilterPlugin::InterPodAffinity,
            // In the default profile from v1.36; the engine leaves it out for v1.35 (`Behaviour::filter_order`).
            FilterPlugin::NodeDeclaredFeatures,
        ];
        let scores = [
            ScorePlugin::TaintToleration,
            ScorePlugin::NodeAffinity,
            ScorePlugin::NodeResourcesFit,
            // Scores from v1.37 (StorageCapacityScoring); skips before.
            ScorePlugin::VolumeBinding,
            ScorePlugin::PodTopologySpread,
            ScorePlugin::InterPodAffinity,
            ScorePlugin::NodeResourcesBalancedAllocation,
            ScorePlugin::ImageLocality,
        ];
        let mut args = PluginArgs::default();
        if strategy != ScoringStrategyType::LeastAllocated {
            args.node_resources_fit.scoring_strategy = Some(ScoringStrategy {
                type_: Some(strategy),
                resources: vec![ResourceSpec::new("cpu", 1), ResourceSpec::new("memory", 1)],
                requested_to_capacity_ratio: None,
            });
        }
        Profile {
            filters: filters.into_iter().map(FilterEntry::Plugin).collect(),
            scores: scores
                .into_iter()
                .map(|plugin| ScoreEntry::Plugin {
                    plugin,
                    weight: plugin.default_weight(),
                })
                .collect(),
            args,
            percentage_of_nodes_to_score: 0,
            ignored_features: BTreeSet::new(),
            tie_break: TieBreak::Random,
        }
    }
}

/// Why a profile cannot run.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ProfileError {
    /// A plugin the engine does not implement.
    #[error("plugin {plugin} is not implemented by Ruleplane's scheduler")]
    NotImplemented {
        /// The plugin.
        plugin: &'static str,
    },
    /// A declarative plugin listed by name without its args.
    #[error("{plugin} needs its own arguments; list it as a NodeValue/NodeLabel entry")]
    MissingArgs {
        /// The plugin.
        plugin: &'static str,
    },
    /// Two filters or two scores with the same name.
    #[error("plugin name {name} is used twice in the {stage} list")]
    DuplicateName {
        /// The name.
        name: String,
        /// `filter` or `score`.
        stage: &'static str,
    },
    /// A negative weight.
    #[error("score plugin {plugin} has weight {weight}; weights must be positive")]
    InvalidWeight {
        /// The plugin.
        plugin: String,
        /// The weight.
        weight: i64,
    },
    /// The weights could overflow the total score.
    #[error("total score of score plugins could overflow")]
    WeightOverflow,
    /// `percentageOfNodesToScore` above 100.
    #[error("percentageOfNodesToScore: Invalid value: {0}: not in valid range [0-100]")]
    InvalidPercentage(u8),
    /// Invalid plugin args.
    #[error("invalid args of plugin {plugin}: {}", join(errors))]
    InvalidArgs {
        /// The plugin (instance name for declarative plugins).
        plugin: String,
        /// The problems, with paths relative to the args object.
        errors: Vec<FieldError>,
    },
}

fn join(errors: &[FieldError]) -> String {
    errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

/// A profile as people read it: filter names in order, scores with weights, the args after kube-scheduler's
/// defaulting (what the golden tests of resolved policies show).
impl Serialize for Profile {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(untagged)]
        enum Filter<'a> {
            Plugin(&'static str),
            NodeValue(&'a NodeValueArgs),
        }
        #[derive(Serialize)]
        #[serde(untagged)]
        enum Score<'a> {
            Plugin { name: &'static str, weight: i64 },
            NodeLabel(&'a NodeLabelArgs),
        }
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct View<'a> {
            filters: Vec<Filter<'a>>,
            scores: Vec<Score<'a>>,
            plugin_args: PluginArgs,
            percentage_of_nodes_to_score: u8,
            #[serde(skip_serializing_if = "BTreeSet::is_empty")]
            ignored_features: &'a BTreeSet<Feature>,
        }
        let args = &self.args;
        View {
            filters: self
                .filters
                .iter()
                .map(|entry| match entry {
                    FilterEntry::Plugin(plugin) => Filter::Plugin(plugin.as_str()),
                    FilterEntry::NodeValue(args) => Filter::NodeValue(args),
                })
                .collect(),
            scores: self
                .scores
                .iter()
                .map(|entry| match entry {
                    ScoreEntry::Plugin { plugin, weight } => Score::Plugin {
                        name: plugin.as_str(),
                        weight: *weight,
                    },
                    ScoreEntry::NodeLabel(args) => Score::NodeLabel(args),
                })
                .collect(),
            plugin_args: PluginArgs {
                node_resources_fit: args.node_resources_fit.defaulted(),
                node_resources_balanced_allocation: args.node_resources_balanced_allocation.defaulted(),
                node_affinity: args.node_affinity.clone(),
                pod_topology_spread: args.pod_topology_spread.clone(),
                inter_pod_affinity: args.inter_pod_affinity.clone(),
                default_preemption: args.default_preemption.clone(),
                volume_binding: args.volume_binding.clone(),
                coscheduling: args.coscheduling.clone(),
            },
            percentage_of_nodes_to_score: self.percentage_of_nodes_to_score,
            ignored_features: &self.ignored_features,
        }
        .serialize(serializer)
    }
}
