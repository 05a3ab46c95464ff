//! VolumeBinding's PreBind for an assumed pod: the `nominatedNodeName` expectation, the PersistentVolume and claim
//! writes of its Reserve plan, and the wait until every claim is bound, before `pods/binding`.

// kube-scheduler v1.35: PreBindPreFlight says VolumeBinding has work, so the pod's `status.nominatedNodeName` is
// patched to the node first (`NominatedNodeNameForExpectation`, a failure only logged); `BindPodVolumes` updates
// every volume, then every claim to provision, then polls `checkBindings` every second up to `bindTimeoutSeconds`.
// Nothing provisions on Ruleplane's side: the persistentvolume-binder completes static bindings, an external
// provisioner the claims it sees annotated with the selected node.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use ruleplane_config::scheduler::engine::volume_plan::VolumePlan;
use tracing::debug;

use super::{PodKey, PodScheduler};

/// How often the claims are checked (`BindPodVolumes`' poll interval).
const POLL: Duration = Duration::from_secs(1);

/// kube-scheduler's text of a failed PreBind (`framework/runtime/framework.go`).
fn pre_bind_error(error: impl std::fmt::Display) -> String {
    format!("running PreBind plugin \"VolumeBinding\": {error}")
}

/// An API error as Go's `StatusError` prints it (its message), anything else as it is.
fn api_text(error: kube::Error) -> String {
    match error {
        kube::Error::Api(status) => status.message,
        other => other.to_string(),
    }
}

impl PodScheduler {
    /// PreBind for the pod assumed on `node`: nothing when Reserve found no volume work; else the writes and the
    /// wait, told to `waiting` as it starts (the binding slot is given back: a pod waiting up to
    /// `bindTimeoutSeconds` for a provisioner must not hold up other pods' bindings). On success the assumed
    /// versions are dropped (the watch holds the bound ones); on failure the caller forgets the pod, which
    /// unreserves them. The error is the FailedScheduling text.
    pub(super) async fn pre_bind_volumes(&self, pod: &Pod, node: &str, waiting: impl FnOnce()) -> Result<(), String> {
        let Some(reserved) = self.cache.reserved_volumes(pod).await else {
            return Ok(());
        };
        let plan = reserved.map_err(|error| format!("running Reserve plugin \"VolumeBinding\": {error}"))?;
        self.nominate_for_expectation(pod, node).await;
        let written = self.write_bindings(plan).await.map_err(pre_bind_error)?;
        let timeout = self.policy.profile().args.volume_binding.bind_timeout_seconds();
        let deadline = Instant::now() + Duration::from_secs(u64::try_from(timeout).unwrap_or(0));
        waiting();
        loop {
            // As `PollUntilContextTimeout` without an immediate check: the deadline wins over a tick at the same time.
            tokio::time::sleep(POLL.min(deadline.saturating_duration_since(Instant::now()))).await;
            if Instant::now() >= deadline {
                return Err(pre_bind_error("binding volumes: context deadline exceeded"));
            }
            match self.cache.check_volumes(&written, pod, node) {
                Ok(true) => break,
                Ok(false) => {}
                Err(error) => return Err(pre_bind_error(format!("binding volumes: {error}"))),
            }
        }
        self.cache.volumes_bound(pod).await;
        Ok(())
    }

    /// `status.nominatedNodeName` set to the node before the volume work, so observers (the cluster autoscaler)
    /// see where the pod goes; the apiserver clears it at binding.
    async fn nominate_for_expectation(&self, pod: &Pod, node: &str) {
        let key = PodKey {
            namespace: pod.namespace().unwrap_or_default(),
            name: pod.name_any(),
        };
        if let Err(error) = self.writer.set_nominated_node(&key, Some(node)).await {
            debug!(%error, pod = %pod.name_any(), "could not set nominatedNodeName before binding volumes");
        }
    }

    /// `bindAPIUpdate`: every volume, then every claim to provision, updated as planned (conditional on the
    /// version read); returns the plan with the objects as the apiserver returned them.
    async fn write_bindings(&self, mut plan: VolumePlan) -> Result<VolumePlan, String> {
        for binding in &mut plan.bindings {
            binding.volume = self.writer.replace_volume(&binding.volume).await.map_err(api_text)?;
        }
        for claim in &mut plan.provisions {
            *claim = self.writer.replace_claim(claim).await.map_err(api_text)?;
        }
        Ok(plan)
    }
}
