//! Builds the Kubernetes client from a kubeconfig flag, $KUBECONFIG, ~/.kube/config or in-cluster config, with
//! the client-side rate limit of `--kube-api-qps` / `--kube-api-burst`.

use std::collections::HashMap;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use anyhow::Context as _;
use kube::api::ApiResource;
use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::GroupVersion;
use kube::discovery::{ApiCapabilities, ApiGroup};
use kube::{Client, Config};
use tokio::time::{Instant, Sleep};

/// What the apiserver serves for `apiVersion`/`kind` (a rule's kinds may be CRDs registered moments ago).
pub async fn discover_kind(
    client: &Client,
    api_version: &str,
    kind: &str,
) -> Result<(kube::api::ApiResource, kube::discovery::ApiCapabilities), kube::Error> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
    kube::discovery::pinned_kind(client, &gvk).await
}

/// How long a group/version's discovery answer serves the kinds it lists.
const DISCOVERY_FRESH: Duration = Duration::from_secs(10);
/// How old an answer must be before a kind missing from it is asked for again (a CRD registered a moment ago).
const DISCOVERY_MISS_FRESH: Duration = Duration::from_secs(1);

/// Discovery shared by the workers: one request per group/version however many workers ask at the same moment.
/// 200 rules on ConfigMaps starting together sent 400 identical requests, each on a new connection of its own
/// (HTTP/1.1: one request per connection at a time), which the client then kept open, idle.
pub struct KindDiscovery {
    client: Client,
    /// The last answer for each group/version, behind a lock per group/version held while it is asked for, so
    /// concurrent askers wait for that one answer (and one slow group does not hold up the others).
    answers: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Option<Answer>>>>>,
}

/// A group/version's resources as the apiserver listed them, and when it was asked.
type Answer = (Instant, ApiGroup);

impl KindDiscovery {
    pub fn new(client: Client) -> Self {
        KindDiscovery {
            client,
            answers: Mutex::default(),
        }
    }

    /// What the apiserver serves for `apiVersion`/`kind`: the same answers and errors as [`discover_kind`].
    pub async fn kind(&self, api_version: &str, kind: &str) -> Result<(ApiResource, ApiCapabilities), kube::Error> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let slot = self
            .answers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(api_version.to_owned())
            .or_default()
            .clone();
        let mut answer = slot.lock().await;
        let find = |answer: &Option<Answer>, fresh: Duration| {
            let (asked, served) = answer.as_ref().filter(|(asked, _)| asked.elapsed() < fresh)?;
            let found = served
                .versioned_resources(version)
                .into_iter()
                .find(|(resource, _)| resource.kind == kind);
            Some(found.ok_or(*asked))
        };
        match find(&answer, DISCOVERY_FRESH) {
            Some(Ok(found)) => return Ok(found),
            Some(Err(asked)) if asked.elapsed() < DISCOVERY_MISS_FRESH => return Err(missing(api_version, kind)),
            _ => {}
        }
        let served = kube::discovery::pinned_group(&self.client, &GroupVersion::gv(group, version)).await?;
        *answer = Some((Instant::now(), served));
        match find(&answer, DISCOVERY_FRESH) {
            Some(Ok(found)) => Ok(found),
            _ => Err(missing(api_version, kind)),
        }
    }
}

fn missing(api_version: &str, kind: &str) -> kube::Error {
    kube::Error::Discovery(kube::error::DiscoveryError::MissingKind(format!(
        "{api_version} {kind}"
    )))
}

pub async fn connect(kubeconfig: Option<&Path>, qps: f64, burst: u32) -> anyhow::Result<Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path).with_context(|| format!("reading kubeconfig {}", path.display()))?;
            Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?
        }
        None => Config::infer()
            .await
            .context("no kubeconfig and not running in a cluster")?,
    };
    let builder = ClientBuilder::try_from(config).context("building the Kubernetes client")?;
    Ok(if qps > 0.0 {
        builder.with_layer(&RateLimitLayer::new(qps, burst)).build()
    } else {
        builder.build()
    })
}

/// A token bucket in front of the client: `qps` tokens per second, at most `burst` saved up. kube's client
/// puts a buffer in front of this layer, so waiting in `poll_ready` holds requests back in order, watches
/// included (a watch counts once, when it is opened).
#[derive(Clone, Copy, Debug)]
pub struct RateLimitLayer {
    qps: f64,
    burst: f64,
}

impl RateLimitLayer {
    pub fn new(qps: f64, burst: u32) -> Self {
        RateLimitLayer {
            qps,
            burst: f64::from(burst.max(1)),
        }
    }
}

impl<S> tower::Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;
    fn layer(&self, inner: S) -> RateLimited<S> {
        RateLimited {
            inner,
            limit: *self,
            tokens: self.burst,
            refilled: Instant::now(),
            waiting: None,
        }
    }
}

pub struct RateLimited<S> {
    inner: S,
    limit: RateLimitLayer,
    tokens: f64,
    refilled: Instant,
    waiting: Option<Pin<Box<Sleep>>>,
}

impl<S> RateLimited<S> {
    fn refill(&mut self) {
        let now = Instant::now();
        let earned = now.duration_since(self.refilled).as_secs_f64() * self.limit.qps;
        self.tokens = (self.tokens + earned).min(self.limit.burst);
        self.refilled = now;
    }
}

impl<S, R> tower::Service<R> for RateLimited<S>
where
    S: tower::Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        loop {
            if let Some(waiting) = self.waiting.as_mut() {
                if waiting.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.waiting = None;
            }
            self.refill();
            if self.tokens >= 1.0 {
                return self.inner.poll_ready(cx);
            }
            let wait = Duration::from_secs_f64((1.0 - self.tokens) / self.limit.qps);
            self.waiting = Some(Box::pin(tokio::time::sleep(wait)));
        }
    }

    fn call(&mut self, request: R) -> S::Future {
        self.tokens -= 1.0;
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use tower::{Layer, Service, ServiceExt};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn requests_beyond_the_burst_wait_for_the_sustained_rate() {
        let echo = tower::service_fn(|n: u32| async move { Ok::<u32, Infallible>(n) });
        let mut limited = RateLimitLayer::new(10.0, 5).layer(echo);
        let started = Instant::now();
        for n in 0..25 {
            limited.ready().await.expect("ready").call(n).await.expect("echo");
        }
        // 5 at once from the bucket, the other 20 at 10 per second.
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(1_990) && took <= Duration::from_millis(2_010),
            "{took:?}"
        );
    }
}
