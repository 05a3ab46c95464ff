//! Pieces shared by all rule kinds: metadata, label selectors, durations and the rule-kind tag.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The only `apiVersion` rule documents may have.
pub const API_VERSION: &str = "ruleplane.dev/v1alpha1";

/// Which of the three rule kinds a rule is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum RuleKind {
    /// Declares a custom resource type (becomes a CustomResourceDefinition).
    ResourceDefinition,
    /// Watches objects of one kind and renders child objects and status from each.
    Reconciler,
    /// A scheduler: which filters and scores decide where pods of one `schedulerName` go.
    SchedulerPolicy,
}

impl RuleKind {
    /// All rule kinds, in documentation order.
    pub const ALL: [RuleKind; 3] = [
        RuleKind::ResourceDefinition,
        RuleKind::Reconciler,
        RuleKind::SchedulerPolicy,
    ];

    /// The `kind:` spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleKind::ResourceDefinition => "ResourceDefinition",
            RuleKind::Reconciler => "Reconciler",
            RuleKind::SchedulerPolicy => "SchedulerPolicy",
        }
    }

    /// Parses the `kind:` spelling.
    pub(crate) fn from_name(name: &str) -> Option<RuleKind> {
        RuleKind::ALL.into_iter().find(|kind| kind.as_str() == name)
    }
}

impl fmt::Display for RuleKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Identifies the rule. Rules are not Kubernetes objects, so there is no namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuleMetadata {
    /// Unique name of the rule within the rule set. It appears in the `ruleplane.dev/rule` label of
    /// everything the rule creates. For a ResourceDefinition it is also the resource type's name
    /// (`cron-tab.stable.example.com` or `crontabs.stable.example.com`).
    pub name: String,
    /// Free-form labels, copied onto nothing; for your own bookkeeping.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Free-form annotations, copied onto nothing; for your own bookkeeping.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// Selects objects by their labels, as in Kubernetes: all `matchLabels` and all `matchExpressions` must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelector {
    /// Labels that must be present with exactly these values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// Set-based requirements on labels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

impl LabelSelector {
    /// The selector as kube-core's I/O-free [`kube_core::Selector`], which matches labels and prints the
    /// query-string syntax of the Kubernetes API.
    pub(crate) fn to_selector(&self) -> kube_core::Selector {
        let equal = self
            .match_labels
            .iter()
            .map(|(key, value)| kube_core::Expression::Equal(key.clone(), value.clone()));
        let expressions = self.match_expressions.iter().map(|requirement| {
            let key = requirement.key.clone();
            let values = || requirement.values.iter().cloned().collect();
            match requirement.operator {
                LabelSelectorOperator::In => kube_core::Expression::In(key, values()),
                LabelSelectorOperator::NotIn => kube_core::Expression::NotIn(key, values()),
                LabelSelectorOperator::Exists => kube_core::Expression::Exists(key),
                LabelSelectorOperator::DoesNotExist => kube_core::Expression::DoesNotExist(key),
            }
        });
        equal.chain(expressions).collect()
    }

    /// The selector in the query-string syntax of the Kubernetes API (`labelSelector=`), e.g.
    /// `app=web,tier in (a,b),!legacy`.
    pub fn to_query_string(&self) -> String {
        self.to_selector().to_string()
    }

    /// Whether an object with these labels is selected.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        kube_core::SelectorExt::matches(&self.to_selector(), labels)
    }
}

/// One set-based label requirement.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelectorRequirement {
    /// Label key.
    pub key: String,
    /// How the label's value is compared with `values`.
    pub operator: LabelSelectorOperator,
    /// Values for `In` and `NotIn`; must be empty for `Exists` and `DoesNotExist`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// Label selector operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum LabelSelectorOperator {
    /// The label's value is one of `values`.
    In,
    /// The label is absent or its value is none of `values`.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
}

/// A text that is not a duration.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration `{text}`: expected e.g. `30s`, `10m`, `1h30m`")]
pub struct InvalidDuration {
    /// The text as written.
    pub text: String,
}

/// A duration written like Go's: `30s`, `10m`, `1h30m`, `500ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HumanDuration {
    duration: Duration,
}

impl HumanDuration {
    /// The duration.
    pub fn duration(self) -> Duration {
        self.duration
    }

    /// Parses `30s`, `10m`, `1h30m`, `500ms` (units ms, s, m, h; at least one component).
    pub fn parse(text: &str) -> Result<HumanDuration, InvalidDuration> {
        let invalid = || InvalidDuration { text: text.to_string() };
        let mut total_millis: u64 = 0;
        let mut rest = text;
        if rest.is_empty() {
            return Err(invalid());
        }
        while !rest.is_empty() {
            let digits_end = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(invalid)?;
            if digits_end == 0 {
                return Err(invalid());
            }
            let amount: u64 = rest[..digits_end].parse().map_err(|_| invalid())?;
            rest = &rest[digits_end..];
            let (unit_millis, unit_len) = if rest.starts_with("ms") {
                (1, 2)
            } else if rest.starts_with('s') {
                (1_000, 1)
            } else if rest.starts_with('m') {
                (60_000, 1)
            } else if rest.starts_with('h') {
                (3_600_000, 1)
            } else {
                return Err(invalid());
            };
            rest = &rest[unit_len..];
            total_millis = amount
                .checked_mul(unit_millis)
                .and_then(|millis| total_millis.checked_add(millis))
                .ok_or_else(invalid)?;
        }
        Ok(HumanDuration {
            duration: Duration::from_millis(total_millis),
        })
    }
}

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut millis = self.duration.as_millis();
        if millis == 0 {
            return f.write_str("0s");
        }
        for (unit, size) in [("h", 3_600_000u128), ("m", 60_000), ("s", 1_000), ("ms", 1)] {
            if millis >= size {
                write!(f, "{}{unit}", millis / size)?;
                millis %= size;
            }
        }
        Ok(())
    }
}

impl Serialize for HumanDuration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        HumanDuration::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// Pattern shared by the JSON schema and the loader, so editors flag the same mistakes.
pub(crate) const DURATION_PATTERN: &str = "^([0-9]+(ms|s|m|h))+$";

/// Pattern of child ids (they appear in status paths as `children.<id>`).
pub(crate) const IDENTIFIER_PATTERN: &str = "^[a-zA-Z][a-zA-Z0-9_-]*$";

impl JsonSchema for HumanDuration {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": DURATION_PATTERN,
            "description": "A duration such as `30s`, `10m` or `1h30m` (units: ms, s, m, h).",
        })
    }
}

/// What every rule document has: its name, where it was written, and equality that ignores the position
/// (moving a rule within its file must not restart its worker).
macro_rules! rule_document {
    ($rule:ty) => {
        impl $rule {
            /// The rule's `metadata.name`.
            pub fn name(&self) -> &str {
                &self.metadata.name
            }

            /// Where the rule's document starts.
            pub fn source(&self) -> &crate::diagnostics::SourceLocation {
                &self.source
            }
        }

        impl PartialEq for $rule {
            fn eq(&self, other: &Self) -> bool {
                self.api_version == other.api_version
                    && self.kind == other.kind
                    && self.metadata == other.metadata
                    && self.spec == other.spec
            }
        }
    };
}
pub(crate) use rule_document;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_and_print() {
        assert_eq!(
            HumanDuration::parse("10m").unwrap().duration(),
            Duration::from_secs(600)
        );
        assert_eq!(HumanDuration::parse("1h30m").unwrap().to_string(), "1h30m");
        assert_eq!(
            HumanDuration::parse("500ms").unwrap().duration(),
            Duration::from_millis(500)
        );
        for bad in ["", "10", "m", "10x", "1.5h", "-1s", "99999999999999999999h"] {
            assert!(HumanDuration::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn selectors_match_and_print() {
        let selector = LabelSelector {
            match_labels: BTreeMap::from([("app".into(), "web".into())]),
            match_expressions: vec![LabelSelectorRequirement {
                key: "tier".into(),
                operator: LabelSelectorOperator::In,
                values: vec!["a".into(), "b".into()],
            }],
        };
        assert_eq!(selector.to_query_string(), "app=web,tier in (a,b)");
        let labels = BTreeMap::from([("app".into(), "web".into()), ("tier".into(), "b".into())]);
        assert!(selector.matches(&labels));
        assert!(!selector.matches(&BTreeMap::new()));
        let absent_or_other = LabelSelector {
            match_labels: BTreeMap::new(),
            match_expressions: vec![
                LabelSelectorRequirement {
                    key: "tier".into(),
                    operator: LabelSelectorOperator::NotIn,
                    values: vec!["a".into()],
                },
                LabelSelectorRequirement {
                    key: "legacy".into(),
                    operator: LabelSelectorOperator::DoesNotExist,
                    values: vec![],
                },
                LabelSelectorRequirement {
                    key: "app".into(),
                    operator: LabelSelectorOperator::Exists,
                    values: vec![],
                },
            ],
        };
        assert_eq!(absent_or_other.to_query_string(), "tier notin (a),!legacy,app");
        assert!(absent_or_other.matches(&labels), "NotIn holds for another value");
        assert!(
            absent_or_other.matches(&BTreeMap::from([("app".into(), "x".into())])),
            "and for an absent key"
        );
        let legacy = BTreeMap::from([("app".into(), "x".into()), ("legacy".into(), "".into())]);
        assert!(!absent_or_other.matches(&legacy), "DoesNotExist fails on a present key");
    }
}
