//! Label selectors, node selector terms and taint tolerations, with apimachinery's matching and parsing rules.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Node, NodeSelector as NodeSelectorSpec, NodeSelectorRequirement, NodeSelectorTerm, Pod, PreferredSchedulingTerm,
    Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::field::{FieldError, FieldPath};
use super::validation::{label_value_errors, qualified_name_errors};

/// A label set.
pub type Labels = BTreeMap<String, String>;

static NO_LABELS: Labels = BTreeMap::new();

/// The labels of an object, empty when it has none.
pub fn labels_of(labels: &Option<Labels>) -> &Labels {
    labels.as_ref().unwrap_or(&NO_LABELS)
}

/// Selector operators (`selection.Operator`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operator {
    /// Value among the listed ones.
    In,
    /// Label absent or value not listed.
    NotIn,
    /// Label present.
    Exists,
    /// Label absent.
    DoesNotExist,
    /// Exactly this value (from `matchLabels` and label sets).
    Equals,
    /// Integer value greater than the one given.
    GreaterThan,
    /// Integer value less than the one given.
    LessThan,
}

/// One requirement of a label selector.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Requirement {
    key: String,
    operator: Operator,
    values: Vec<String>,
}

impl Requirement {
    /// Builds a requirement, checking it as `labels.NewRequirement` does; errors are located under `path`.
    pub fn new(
        key: &str,
        operator: Operator,
        values: &[String],
        path: &FieldPath,
    ) -> Result<Requirement, Vec<FieldError>> {
        let mut errors = Vec::new();
        let key_errors = qualified_name_errors(key);
        if !key_errors.is_empty() {
            errors.push(FieldError::invalid(path.key("key"), key, key_errors.join("; ")));
        }
        let values_path = path.key("values");
        match operator {
            Operator::In | Operator::NotIn if values.is_empty() => errors.push(FieldError::invalid(
                values_path.clone(),
                values.to_vec(),
                "for 'in', 'notin' operators, values set can't be empty",
            )),
            Operator::Equals if values.len() != 1 => errors.push(FieldError::invalid(
                values_path.clone(),
                values.to_vec(),
                "exact-match compatibility requires one single value",
            )),
            Operator::Exists | Operator::DoesNotExist if !values.is_empty() => errors.push(FieldError::invalid(
                values_path.clone(),
                values.to_vec(),
                "values set must be empty for exists and does not exist",
            )),
            Operator::GreaterThan | Operator::LessThan => {
                if values.len() != 1 {
                    errors.push(FieldError::invalid(
                        values_path.clone(),
                        values.to_vec(),
                        "for 'Gt', 'Lt' operators, exactly one value is required",
                    ));
                }
                for (i, value) in values.iter().enumerate() {
                    if value.parse::<i64>().is_err() {
                        errors.push(FieldError::invalid(
                            values_path.index(i),
                            value.as_str(),
                            "for 'Gt', 'Lt' operators, the value must be an integer",
                        ));
                    }
                }
            }
            _ => {}
        }
        for (i, value) in values.iter().enumerate() {
            let value_errors = label_value_errors(value);
            if !value_errors.is_empty() {
                errors.push(FieldError::invalid(
                    values_path.index(i).key(key),
                    value.as_str(),
                    value_errors.join("; "),
                ));
            }
        }
        if errors.is_empty() {
            Ok(Requirement {
                key: key.to_string(),
                operator,
                values: values.to_vec(),
            })
        } else {
            Err(errors)
        }
    }

    /// The label key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Whether `labels` satisfy the requirement.
    pub fn matches(&self, labels: &Labels) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            Operator::In | Operator::Equals => value.is_some_and(|v| self.values.contains(v)),
            Operator::NotIn => value.is_none_or(|v| !self.values.contains(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let (Some(actual), [wanted]) = (value.and_then(|v| v.parse::<i64>().ok()), self.values.as_slice())
                else {
                    return false;
                };
                let Ok(wanted) = wanted.parse::<i64>() else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    actual > wanted
                } else {
                    actual < wanted
                }
            }
        }
    }
}

/// A label selector: nothing (a nil `LabelSelector`), or requirements that must all hold (none = everything).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Selector {
    /// Matches no label set.
    Nothing,
    /// Matches label sets satisfying every requirement; an empty list matches everything.
    All(Vec<Requirement>),
}

impl Selector {
    /// Matches every label set.
    pub fn everything() -> Selector {
        Selector::All(Vec::new())
    }

    /// `labels.SelectorFromSet`: every key equal to its value.
    pub(crate) fn from_set(set: &Labels) -> Selector {
        Selector::All(
            set.iter()
                .map(|(key, value)| Requirement {
                    key: key.clone(),
                    operator: Operator::Equals,
                    values: vec![value.clone()],
                })
                .collect(),
        )
    }

    /// `metav1.LabelSelectorAsSelector`: nil → nothing, empty → everything.
    pub(crate) fn from_label_selector(
        selector: Option<&LabelSelector>,
        path: &FieldPath,
    ) -> Result<Selector, Vec<FieldError>> {
        let Some(selector) = selector else {
            return Ok(Selector::Nothing);
        };
        let mut requirements = Vec::new();
        let mut errors = Vec::new();
        for (key, value) in selector.match_labels.iter().flatten() {
            match Requirement::new(
                key,
                Operator::Equals,
                std::slice::from_ref(value),
                &path.key("matchLabels"),
            ) {
                Ok(requirement) => requirements.push(requirement),
                Err(mut e) => errors.append(&mut e),
            }
        }
        for (i, expression) in selector.match_expressions.iter().flatten().enumerate() {
            let expression_path = path.key("matchExpressions").index(i);
            let operator = match expression.operator.as_str() {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => {
                    errors.push(FieldError::not_supported(
                        expression_path.key("operator"),
                        other,
                        &["In", "NotIn", "Exists", "DoesNotExist"],
                    ));
                    continue;
                }
            };
            let values = expression.values.as_deref().unwrap_or_default();
            add_requirement(
                &mut requirements,
                &mut errors,
                &expression.key,
                operator,
                values,
                &expression_path,
            );
        }
        all_of(requirements, errors)
    }

    /// Whether `labels` match.
    pub fn matches(&self, labels: &Labels) -> bool {
        match self {
            Selector::Nothing => false,
            Selector::All(requirements) => requirements.iter().all(|r| r.matches(labels)),
        }
    }

    /// `Selector.Empty()`: true only for the match-everything selector (a nil selector is not empty).
    pub fn is_empty(&self) -> bool {
        matches!(self, Selector::All(requirements) if requirements.is_empty())
    }

    /// `Selector.Add`: more requirements; the nothing-selector stays nothing.
    pub fn with(&self, more: &[Requirement]) -> Selector {
        match self {
            Selector::Nothing => Selector::Nothing,
            Selector::All(requirements) => Selector::All(requirements.iter().chain(more).cloned().collect()),
        }
    }

    /// The requirements (`None` for the nothing-selector).
    pub(crate) fn requirements(&self) -> Option<&[Requirement]> {
        match self {
            Selector::Nothing => None,
            Selector::All(requirements) => Some(requirements),
        }
    }
}

/// A compiled node selector term: label requirements ANDed with `metadata.name` field requirements.
#[derive(Clone, Debug, PartialEq)]
pub struct CompiledTerm {
    labels: Option<Selector>,
    fields: Option<Vec<(String, String, bool)>>,
    errors: Vec<FieldError>,
}

impl CompiledTerm {
    fn compile(term: &NodeSelectorTerm, path: &FieldPath) -> CompiledTerm {
        let mut compiled = CompiledTerm {
            labels: None,
            fields: None,
            errors: Vec::new(),
        };
        let expressions = term.match_expressions.as_deref().unwrap_or_default();
        if !expressions.is_empty() {
            match label_requirements(expressions, &path.key("matchExpressions")) {
                Ok(selector) => compiled.labels = Some(selector),
                Err(mut e) => compiled.errors.append(&mut e),
            }
        }
        let fields = term.match_fields.as_deref().unwrap_or_default();
        if !fields.is_empty() {
            match field_requirements(fields, &path.key("matchFields")) {
                Ok(requirements) => compiled.fields = Some(requirements),
                Err(mut e) => compiled.errors.append(&mut e),
            }
        }
        compiled
    }

    /// Whether the node matches; a term that failed to parse matches nothing.
    fn matches(&self, labels: &Labels, node_name: &str) -> bool {
        if !self.errors.is_empty() {
            return false;
        }
        if let Some(selector) = &self.labels
            && !selector.matches(labels)
        {
            return false;
        }
        // Fields are only checked when the node has a name (`extractNodeFields` yields nothing otherwise).
        if let Some(fields) = &self.fields
            && !node_name.is_empty()
        {
            let field_value = |key: &str| if key == "metadata.name" { node_name } else { "" };
            return fields
                .iter()
                .all(|(key, value, equal)| (field_value(key) == value) == *equal);
        }
        true
    }
}

fn is_empty_term(term: &NodeSelectorTerm) -> bool {
    term.match_expressions.as_deref().unwrap_or_default().is_empty()
        && term.match_fields.as_deref().unwrap_or_default().is_empty()
}

/// A requirement of a selector, or why it is not one.
fn add_requirement(
    requirements: &mut Vec<Requirement>,
    errors: &mut Vec<FieldError>,
    key: &str,
    operator: Operator,
    values: &[String],
    path: &FieldPath,
) {
    match Requirement::new(key, operator, values, path) {
        Ok(requirement) => requirements.push(requirement),
        Err(mut e) => errors.append(&mut e),
    }
}

/// The selector of every requirement, or every error found while reading them.
fn all_of(requirements: Vec<Requirement>, errors: Vec<FieldError>) -> Result<Selector, Vec<FieldError>> {
    if errors.is_empty() {
        Ok(Selector::All(requirements))
    } else {
        Err(errors)
    }
}

fn label_requirements(expressions: &[NodeSelectorRequirement], path: &FieldPath) -> Result<Selector, Vec<FieldError>> {
    let mut requirements = Vec::new();
    let mut errors = Vec::new();
    for (i, expression) in expressions.iter().enumerate() {
        let p = path.index(i);
        let operator = match expression.operator.as_str() {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            "Gt" => Operator::GreaterThan,
            "Lt" => Operator::LessThan,
            other => {
                errors.push(FieldError::not_supported(
                    p.key("operator"),
                    other,
                    &["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"],
                ));
                continue;
            }
        };
        let values = expression.values.as_deref().unwrap_or_default();
        add_requirement(&mut requirements, &mut errors, &expression.key, operator, values, &p);
    }
    all_of(requirements, errors)
}

fn field_requirements(
    expressions: &[NodeSelectorRequirement],
    path: &FieldPath,
) -> Result<Vec<(String, String, bool)>, Vec<FieldError>> {
    let mut requirements = Vec::new();
    let mut errors = Vec::new();
    for (i, expression) in expressions.iter().enumerate() {
        let p = path.index(i);
        let values = expression.values.as_deref().unwrap_or_default();
        let equal = match expression.operator.as_str() {
            "In" => true,
            "NotIn" => false,
            other => {
                errors.push(FieldError::not_supported(p.key("operator"), other, &["In", "NotIn"]));
                continue;
            }
        };
        match values {
            [value] => requirements.push((expression.key.clone(), value.clone(), equal)),
            _ => errors.push(FieldError::invalid(
                p.key("values"),
                values.to_vec(),
                "must have one element",
            )),
        }
    }
    if errors.is_empty() {
        Ok(requirements)
    } else {
        Err(errors)
    }
}

/// A node selector (terms ORed); terms that fail to parse are kept and never match, as in the lazy Go selector.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeSelector {
    terms: Vec<CompiledTerm>,
}

impl NodeSelector {
    /// Compiles the non-empty terms, locating parse errors under `path`.
    pub fn compile(selector: &NodeSelectorSpec, path: &FieldPath) -> NodeSelector {
        let terms_path = path.key("nodeSelectorTerms");
        NodeSelector {
            terms: selector
                .node_selector_terms
                .iter()
                .enumerate()
                .filter(|(_, term)| !is_empty_term(term))
                .map(|(i, term)| CompiledTerm::compile(term, &terms_path.index(i)))
                .collect(),
        }
    }

    /// Every parse error of every term.
    pub fn errors(&self) -> Vec<FieldError> {
        self.terms.iter().flat_map(|t| t.errors.iter().cloned()).collect()
    }

    /// Whether any term matches the node.
    pub fn matches(&self, node: &(impl NodeFields + ?Sized)) -> bool {
        let (labels, name) = (node.node_labels(), node.node_name());
        self.terms.iter().any(|term| term.matches(labels, name))
    }
}

/// Weighted preferred node selector terms.
#[derive(Clone, Debug, PartialEq)]
pub struct PreferredTerms {
    terms: Vec<(CompiledTerm, i64)>,
}

impl PreferredTerms {
    /// Compiles the terms with non-zero weight and non-empty preference; any parse error fails the whole list.
    pub fn compile(terms: &[PreferredSchedulingTerm], path: &FieldPath) -> Result<PreferredTerms, Vec<FieldError>> {
        let mut compiled = Vec::new();
        let mut errors = Vec::new();
        for (i, term) in terms.iter().enumerate() {
            if term.weight == 0 || is_empty_term(&term.preference) {
                continue;
            }
            let parsed = CompiledTerm::compile(&term.preference, &path.index(i));
            if parsed.errors.is_empty() {
                compiled.push((parsed, i64::from(term.weight)));
            } else {
                errors.extend(parsed.errors);
            }
        }
        if errors.is_empty() {
            Ok(PreferredTerms { terms: compiled })
        } else {
            Err(errors)
        }
    }

    /// Sum of the weights of the terms the node matches.
    pub fn score(&self, node: &(impl NodeFields + ?Sized)) -> i64 {
        let (labels, name) = (node.node_labels(), node.node_name());
        self.terms
            .iter()
            .filter(|(term, _)| term.matches(labels, name))
            .map(|(_, weight)| weight)
            .sum()
    }
}

/// A pod's `nodeSelector` AND its required node affinity (`nodeaffinity.GetRequiredNodeAffinity`).
#[derive(Clone, Debug, PartialEq)]
pub struct RequiredNodeAffinity {
    node_selector: Option<Selector>,
    affinity: Option<NodeSelector>,
}

impl RequiredNodeAffinity {
    /// From the pod's spec.
    pub fn of(pod: &Pod) -> RequiredNodeAffinity {
        let spec = pod.spec.as_ref();
        let node_selector = spec
            .and_then(|s| s.node_selector.as_ref())
            .filter(|set| !set.is_empty())
            .map(Selector::from_set);
        let affinity = spec
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|na| na.required_during_scheduling_ignored_during_execution.as_ref())
            .map(|required| NodeSelector::compile(required, &FieldPath::root()));
        RequiredNodeAffinity {
            node_selector,
            affinity,
        }
    }

    /// Whether the pod requires nothing of a node (every node matches).
    pub(crate) fn requires_nothing(&self) -> bool {
        self.node_selector.is_none() && self.affinity.is_none()
    }

    /// Whether the node satisfies both.
    pub fn matches(&self, node: &(impl NodeFields + ?Sized)) -> bool {
        if let Some(selector) = &self.node_selector
            && !selector.matches(node.node_labels())
        {
            return false;
        }
        self.affinity.as_ref().is_none_or(|affinity| affinity.matches(node))
    }
}

/// `Toleration.ToleratesTaint` with the TaintTolerationComparisonOperators gate off (v1.35 default), so `Lt`/`Gt`
/// tolerations tolerate nothing.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or_default() {
        "" | "Equal" => toleration.value.as_deref().unwrap_or_default() == taint.value.as_deref().unwrap_or_default(),
        "Exists" => true,
        _ => false,
    }
}

/// Whether any toleration tolerates the taint.
pub(crate) fn tolerated(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|toleration| tolerates(toleration, taint))
}

/// The first NoSchedule/NoExecute taint of the node that the tolerations do not tolerate.
pub(crate) fn untolerated_hard_taint<'a>(taints: &'a [Taint], tolerations: &[Toleration]) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|taint| taint.effect == "NoSchedule" || taint.effect == "NoExecute")
        .find(|taint| !tolerated(tolerations, taint))
}

/// The pod's tolerations.
pub(crate) fn pod_tolerations(pod: &Pod) -> &[Toleration] {
    pod.spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default()
}

/// The node's taints.
pub(crate) fn node_taints(node: &Node) -> &[Taint] {
    node.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or_default()
}

/// What node selectors and taint checks read of a node: a node object, or the snapshot's node, which keeps them
/// apart from its object.
pub trait NodeFields {
    /// `metadata.name`.
    fn node_name(&self) -> &str;
    /// `metadata.labels`.
    fn node_labels(&self) -> &Labels;
    /// `spec.taints`.
    fn node_taints(&self) -> &[Taint];
}

impl NodeFields for Node {
    fn node_name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    fn node_labels(&self) -> &Labels {
        labels_of(&self.metadata.labels)
    }

    fn node_taints(&self) -> &[Taint] {
        node_taints(self)
    }
}
