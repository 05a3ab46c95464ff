//! Pod resource requests and the scheduler's `Resource` vector, as kube-scheduler aggregates them.

// Pod resource requests (containers, init and sidecar containers, pod-level resources, overhead) and the scheduler's
// `Resource` vector, as `resourcehelper.PodRequests` and `framework.Resource` compute them.
//
// Feature gates (v1.35 defaults): SidecarContainers on, PodLevelResources on, InPlacePodVerticalScaling on (pods
// already on nodes are accounted with their effective resized requests), InPlacePodLevelResourcesVerticalScaling off
// (pod-level requests always come from the spec).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::quantity::{Amount, QuantityError, parse};

/// Exact quantities by resource name.
pub type ResourceList = BTreeMap<String, Amount>;

/// CPU a container without a CPU request counts for when scoring (milli-CPU).
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// Memory a container without a memory request counts for when scoring (bytes).
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// A quantity in an object that does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {source}")]
pub struct InvalidQuantity {
    /// Where the quantity is, e.g. `spec.containers[0].resources.requests[cpu]`.
    pub field: String,
    /// The parse error.
    #[source]
    pub source: QuantityError,
}

/// Parses a resource map, naming the field of a bad entry.
pub(crate) fn parse_list(
    list: Option<&BTreeMap<String, Quantity>>,
    field: &str,
) -> Result<ResourceList, InvalidQuantity> {
    let mut parsed = ResourceList::new();
    for (name, quantity) in list.into_iter().flatten() {
        let amount = parse(&quantity.0).map_err(|source| InvalidQuantity {
            field: format!("{field}[{name}]"),
            source,
        })?;
        parsed.insert(name.clone(), amount);
    }
    Ok(parsed)
}

fn add_list(into: &mut ResourceList, more: &ResourceList) {
    for (name, amount) in more {
        let entry = into.entry(name.clone()).or_default();
        *entry = entry.saturating_add(*amount);
    }
}

fn max_list(into: &mut ResourceList, other: &ResourceList) {
    for (name, amount) in other {
        match into.get_mut(name) {
            Some(current) if *current >= *amount => {}
            Some(current) => *current = *amount,
            None => {
                into.insert(name.clone(), *amount);
            }
        }
    }
}

/// How to aggregate a pod's requests.
#[derive(Clone, Copy, Debug, Default)]
pub struct RequestOptions<'a> {
    /// Use the effective (resized) requests reported in container statuses.
    pub use_status: bool,
    /// Requests added to every container that lacks them (the scoring defaults).
    pub non_missing: Option<&'a ResourceList>,
}

/// Every quantity of a pod that request aggregation reads, parsed once.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ParsedPodResources {
    containers: Vec<ParsedContainer>,
    init_containers: Vec<ParsedContainer>,
    pod_level: Option<ResourceList>,
    overhead: Option<ResourceList>,
    resize_infeasible: bool,
}

#[derive(Clone, Debug, Default, PartialEq)]
struct ParsedContainer {
    requests: ResourceList,
    restartable: bool,
    /// (actuated, allocated) from the container status, when the status reports resources.
    status: Option<(ResourceList, ResourceList)>,
}

impl ParsedPodResources {
    /// Parses the pod's requests, overhead and container-status resources.
    pub fn parse(pod: &Pod) -> Result<ParsedPodResources, InvalidQuantity> {
        let Some(spec) = pod.spec.as_ref() else {
            return Ok(ParsedPodResources::default());
        };
        let status = pod.status.as_ref();
        let statuses: Vec<&ContainerStatus> = status
            .into_iter()
            .flat_map(|s| {
                s.container_statuses
                    .iter()
                    .flatten()
                    .chain(s.init_container_statuses.iter().flatten())
            })
            .collect();
        let parse_container = |container: &Container, field: String| -> Result<ParsedContainer, InvalidQuantity> {
            let requests = parse_list(
                container.resources.as_ref().and_then(|r| r.requests.as_ref()),
                &format!("{field}.resources.requests"),
            )?;
            let container_status = statuses.iter().find(|s| s.name == container.name);
            let status = match container_status.and_then(|s| s.resources.as_ref().map(|r| (s, r))) {
                Some((s, resources)) => Some((
                    parse_list(
                        resources.requests.as_ref(),
                        "status.containerStatuses.resources.requests",
                    )?,
                    parse_list(
                        s.allocated_resources.as_ref(),
                        "status.containerStatuses.allocatedResources",
                    )?,
                )),
                None => None,
            };
            Ok(ParsedContainer {
                requests,
                restartable: container.restart_policy.as_deref() == Some("Always"),
                status,
            })
        };
        let containers = spec
            .containers
            .iter()
            .enumerate()
            .map(|(i, c)| parse_container(c, format!("spec.containers[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        let init_containers = spec
            .init_containers
            .iter()
            .flatten()
            .enumerate()
            .map(|(i, c)| parse_container(c, format!("spec.initContainers[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        let pod_level = match spec.resources.as_ref().and_then(|r| r.requests.as_ref()) {
            Some(requests) => Some(parse_list(Some(requests), "spec.resources.requests")?),
            None => None,
        };
        let overhead = match spec.overhead.as_ref() {
            Some(overhead) => Some(parse_list(Some(overhead), "spec.overhead")?),
            None => None,
        };
        let resize_infeasible = status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|conditions| conditions.iter().find(|c| c.type_ == "PodResizePending"))
            .is_some_and(|c| c.reason.as_deref() == Some("Infeasible"));
        Ok(ParsedPodResources {
            containers,
            init_containers,
            pod_level,
            overhead,
            resize_infeasible,
        })
    }

    /// Whether the pod sets pod-level requests for a supported resource (cpu, memory, hugepages-*).
    pub(crate) fn pod_level_requests_set(&self) -> bool {
        self.pod_level
            .as_ref()
            .is_some_and(|requests| requests.keys().any(|name| is_supported_pod_level_resource(name)))
    }

    /// The pod's requests (`resourcehelper.PodRequests` with pod-level resources enabled).
    pub fn requests(&self, options: RequestOptions<'_>) -> ResourceList {
        let mut requests = self.container_requests(options);
        if let Some(pod_level) = &self.pod_level
            && self.pod_level_requests_set()
        {
            for (name, amount) in pod_level {
                if is_supported_pod_level_resource(name) {
                    requests.insert(name.clone(), *amount);
                }
            }
        }
        if let Some(overhead) = &self.overhead {
            add_list(&mut requests, overhead);
        }
        requests
    }

    fn effective(&self, container: &ParsedContainer, options: RequestOptions<'_>) -> ResourceList {
        let mut requests = match (&container.status, options.use_status) {
            (Some((actuated, allocated)), true) => {
                // A resize the kubelet found infeasible is not going to happen: only what runs counts.
                let mut effective = if self.resize_infeasible {
                    actuated.clone()
                } else {
                    let mut spec = container.requests.clone();
                    max_list(&mut spec, actuated);
                    spec
                };
                max_list(&mut effective, allocated);
                effective
            }
            _ => container.requests.clone(),
        };
        if let Some(defaults) = options.non_missing {
            for (name, amount) in defaults {
                requests.entry(name.clone()).or_insert(*amount);
            }
        }
        requests
    }

    fn container_requests(&self, options: RequestOptions<'_>) -> ResourceList {
        let mut requests = ResourceList::new();
        for container in &self.containers {
            add_list(&mut requests, &self.effective(container, options));
        }
        // Sidecars (restartable init containers) run alongside everything that starts after them, so they add
        // to the pod's total and to every later init container's peak.
        let mut sidecars = ResourceList::new();
        let mut init_peak = ResourceList::new();
        for container in &self.init_containers {
            // Resized (status) resources are only honoured for sidecars: ordinary init containers have finished.
            let own = if container.restartable {
                self.effective(container, options)
            } else {
                self.effective(
                    container,
                    RequestOptions {
                        use_status: false,
                        ..options
                    },
                )
            };
            let peak = if container.restartable {
                add_list(&mut requests, &own);
                add_list(&mut sidecars, &own);
                sidecars.clone()
            } else {
                let mut peak = own;
                add_list(&mut peak, &sidecars);
                peak
            };
            max_list(&mut init_peak, &peak);
        }
        max_list(&mut requests, &init_peak);
        requests
    }
}

fn is_supported_pod_level_resource(name: &str) -> bool {
    name == "cpu" || name == "memory" || name.starts_with("hugepages-")
}

/// `IsExtendedResourceName`: a domain-prefixed name outside `kubernetes.io/` that is a valid quota name.
pub(crate) fn is_extended_resource_name(name: &str) -> bool {
    if is_native_resource(name) || name.starts_with("requests.") {
        return false;
    }
    super::validation::qualified_name_errors(&format!("requests.{name}")).is_empty()
}

fn is_native_resource(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// `IsScalarResourceName`: extended, hugepages, `kubernetes.io/`-prefixed or attachable-volume resources.
pub(crate) fn is_scalar_resource_name(name: &str) -> bool {
    is_extended_resource_name(name)
        || name.starts_with("hugepages-")
        || name.contains("kubernetes.io/")
        || name.starts_with("attachable-volumes-")
}

/// `framework.Resource`: the scheduler's integer view of a resource list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resource {
    /// CPU in milli-CPU.
    pub milli_cpu: i64,
    /// Memory in bytes.
    pub memory: i64,
    /// Ephemeral storage in bytes.
    pub ephemeral_storage: i64,
    /// Pods a node can hold (allocatable only).
    pub allowed_pod_number: i64,
    /// Extended, hugepages and other scalar resources.
    pub scalar: BTreeMap<String, i64>,
}

impl Resource {
    /// `Resource.Add`: sums the list into the resource (unknown names are ignored).
    pub(crate) fn add_list(&mut self, list: &ResourceList) {
        for (name, amount) in list {
            match name.as_str() {
                "cpu" => self.milli_cpu = self.milli_cpu.saturating_add(amount.milli_value()),
                "memory" => self.memory = self.memory.saturating_add(amount.value()),
                "pods" => self.allowed_pod_number = self.allowed_pod_number.saturating_add(amount.value()),
                "ephemeral-storage" => self.ephemeral_storage = self.ephemeral_storage.saturating_add(amount.value()),
                other if is_scalar_resource_name(other) => {
                    let entry = self.scalar.entry(other.to_string()).or_default();
                    *entry = entry.saturating_add(amount.value());
                }
                _ => {}
            }
        }
    }

    /// `Resource.SetMaxResource` on an empty resource: every known resource, at least zero.
    pub(crate) fn max_with_zero(list: &ResourceList) -> Resource {
        let mut resource = Resource::default();
        for (name, amount) in list {
            match name.as_str() {
                "cpu" => resource.milli_cpu = amount.milli_value().max(0),
                "memory" => resource.memory = amount.value().max(0),
                "ephemeral-storage" => resource.ephemeral_storage = amount.value().max(0),
                other if is_scalar_resource_name(other) => {
                    resource.scalar.insert(other.to_string(), amount.value().max(0));
                }
                _ => {}
            }
        }
        resource
    }

    /// Adds (`sign` = 1) or subtracts (`sign` = -1) another resource's requests.
    pub(crate) fn accumulate(&mut self, other: &Resource, sign: i64) {
        self.milli_cpu += sign * other.milli_cpu;
        self.memory += sign * other.memory;
        self.ephemeral_storage += sign * other.ephemeral_storage;
        for (name, value) in &other.scalar {
            *self.scalar.entry(name.clone()).or_default() += sign * value;
        }
    }

    /// A scalar resource's value (0 when absent).
    pub fn scalar(&self, name: &str) -> i64 {
        self.scalar.get(name).copied().unwrap_or(0)
    }
}

/// The scoring defaults for containers that request no CPU or memory.
pub(crate) fn scoring_defaults() -> ResourceList {
    ResourceList::from([
        ("cpu".to_string(), Amount::from_milli(DEFAULT_MILLI_CPU_REQUEST)),
        ("memory".to_string(), Amount::from_units(DEFAULT_MEMORY_REQUEST)),
    ])
}

/// What a pod on a node adds to the node's accounting (`PodInfo.CalculateResource`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodResources {
    /// Requests (effective, with overhead and pod-level resources).
    pub requested: Resource,
    /// CPU with the scoring default for containers without a CPU request.
    pub non_zero_milli_cpu: i64,
    /// Memory with the scoring default for containers without a memory request.
    pub non_zero_memory: i64,
}

impl PodResources {
    /// Computes the accounting of a pod already placed on a node.
    pub fn of(parsed: &ParsedPodResources) -> PodResources {
        let options = RequestOptions {
            use_status: true,
            non_missing: None,
        };
        let requests = parsed.requests(options);
        // With pod-level requests, defaults only fill a resource that neither the pod nor its containers request.
        let non_missing = if parsed.pod_level_requests_set() {
            let mut defaults = scoring_defaults();
            defaults.retain(|name, _| !requests.contains_key(name));
            defaults
        } else {
            scoring_defaults()
        };
        let non_zero = if non_missing.is_empty() {
            requests.clone()
        } else {
            parsed.requests(RequestOptions {
                use_status: true,
                non_missing: Some(&non_missing),
            })
        };
        let mut requested = Resource::default();
        requested.add_list(&requests);
        PodResources {
            requested,
            non_zero_milli_cpu: non_zero.get("cpu").copied().unwrap_or_default().milli_value(),
            non_zero_memory: non_zero.get("memory").copied().unwrap_or_default().value(),
        }
    }
}
