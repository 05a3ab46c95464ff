//! Built-in Kubernetes kinds that Reconcilers may watch, look up or render, with their resource names.

/// A built-in kind: `apiVersion`/`kind` and how the API serves it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BuiltinKind {
    /// `group/version`, or `v1` for the core group.
    pub api_version: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Resource name in URLs (plural).
    pub plural: &'static str,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
}

const fn kind(api_version: &'static str, kind: &'static str, plural: &'static str, namespaced: bool) -> BuiltinKind {
    BuiltinKind {
        api_version,
        kind,
        plural,
        namespaced,
    }
}

/// The built-in kinds Ruleplane knows (Kubernetes 1.35).
pub const BUILTIN_KINDS: &[BuiltinKind] = &[
    kind("v1", "Pod", "pods", true),
    kind("v1", "Service", "services", true),
    kind("v1", "ConfigMap", "configmaps", true),
    kind("v1", "Secret", "secrets", true),
    kind("v1", "ServiceAccount", "serviceaccounts", true),
    kind("v1", "PersistentVolumeClaim", "persistentvolumeclaims", true),
    kind("v1", "PersistentVolume", "persistentvolumes", false),
    kind("v1", "Namespace", "namespaces", false),
    kind("v1", "Node", "nodes", false),
    kind("v1", "Endpoints", "endpoints", true),
    kind("v1", "Event", "events", true),
    kind("v1", "LimitRange", "limitranges", true),
    kind("v1", "ResourceQuota", "resourcequotas", true),
    kind("v1", "ReplicationController", "replicationcontrollers", true),
    kind("v1", "PodTemplate", "podtemplates", true),
    kind("apps/v1", "ControllerRevision", "controllerrevisions", true),
    kind("apps/v1", "Deployment", "deployments", true),
    kind("apps/v1", "StatefulSet", "statefulsets", true),
    kind("apps/v1", "DaemonSet", "daemonsets", true),
    kind("apps/v1", "ReplicaSet", "replicasets", true),
    kind("batch/v1", "Job", "jobs", true),
    kind("batch/v1", "CronJob", "cronjobs", true),
    kind("networking.k8s.io/v1", "Ingress", "ingresses", true),
    kind("networking.k8s.io/v1", "IngressClass", "ingressclasses", false),
    kind("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies", true),
    kind("rbac.authorization.k8s.io/v1", "Role", "roles", true),
    kind("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings", true),
    kind("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", false),
    kind(
        "rbac.authorization.k8s.io/v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
    ),
    kind("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets", true),
    kind(
        "autoscaling/v2",
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
        true,
    ),
    kind("storage.k8s.io/v1", "StorageClass", "storageclasses", false),
    kind("storage.k8s.io/v1", "CSIDriver", "csidrivers", false),
    kind("storage.k8s.io/v1", "VolumeAttachment", "volumeattachments", false),
    kind("node.k8s.io/v1", "RuntimeClass", "runtimeclasses", false),
    kind(
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        false,
    ),
    kind(
        "admissionregistration.k8s.io/v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        false,
    ),
    kind(
        "admissionregistration.k8s.io/v1",
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies",
        false,
    ),
    kind(
        "certificates.k8s.io/v1",
        "CertificateSigningRequest",
        "certificatesigningrequests",
        false,
    ),
    kind("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", false),
    kind("coordination.k8s.io/v1", "Lease", "leases", true),
    kind("discovery.k8s.io/v1", "EndpointSlice", "endpointslices", true),
    kind(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
    ),
];

/// Looks up a built-in kind by `apiVersion` and `kind`.
pub fn builtin_kind(api_version: &str, kind: &str) -> Option<&'static BuiltinKind> {
    BUILTIN_KINDS
        .iter()
        .find(|k| k.api_version == api_version && k.kind == kind)
}

/// Built-in kinds with this kind name in any API version (to explain an apiVersion mistake).
pub(crate) fn builtin_kinds_named(kind: &str) -> impl Iterator<Item = &'static BuiltinKind> + '_ {
    BUILTIN_KINDS.iter().filter(move |k| k.kind == kind)
}
