//! The Kubernetes client (from a kubeconfig flag, $KUBECONFIG, ~/.kube/config or in-cluster config) with the
//! limits of `--kube-api-qps` / `--kube-api-burst` / `--kube-api-max-in-flight` (the Lease's client without them),
//! and discovery shared by workers.

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

    /// What the apiserver serves for `apiVersion`/`kind` (a rule's kinds may be CRDs registered moments ago): a
    /// group/version it does not serve is its 404 (`kube::Error::Api`), a kind missing from one it serves
    /// `kube::Error::Discovery`.
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

impl KindDiscovery {
    /// Like [`KindDiscovery::kind`], `None` when the apiserver does not serve the kind (yet). The group list
    /// (`/apis`) is read first: asking for a group/version the apiserver does not serve is a 404, which the client
    /// logs as a warning on every attempt (a rule waiting for another tool's CRD asks again and again).
    pub async fn served(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<Option<(ApiResource, ApiCapabilities)>, kube::Error> {
        if let Some((group, version)) = api_version.split_once('/') {
            let groups = self.client.list_api_groups().await?;
            let served = groups
                .groups
                .iter()
                .any(|g| g.name == group && g.versions.iter().any(|v| v.version == version));
            if !served {
                return Ok(None);
            }
        }
        match self.kind(api_version, kind).await {
            Ok(found) => Ok(Some(found)),
            Err(kube::Error::Discovery(_)) => Ok(None),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// `rule` with the kinds the loader left unresolved filled in from what the apiserver serves now (those it
    /// does not serve stay unresolved).
    pub async fn fill_installed_kinds(
        &self,
        rule: &ruleplane_config::Reconciler,
    ) -> Result<ruleplane_config::Reconciler, kube::Error> {
        let mut served = Vec::new();
        for kind in &rule.kinds().unresolved {
            if let Some((resource, caps)) = self.served(&kind.api_version, &kind.kind).await? {
                served.push(installed_kind(&resource, &caps));
            }
        }
        Ok(rule.with_installed_kinds(&served))
    }
}

/// A kind another tool installs as discovery describes it, for [`ruleplane_config::Reconciler::with_installed_kinds`].
pub fn installed_kind(resource: &ApiResource, caps: &ApiCapabilities) -> ruleplane_config::KindInfo {
    ruleplane_config::KindInfo {
        api_version: resource.api_version.clone(),
        kind: resource.kind.clone(),
        plural: resource.plural.clone(),
        namespaced: caps.scope == kube::discovery::Scope::Namespaced,
        origin: ruleplane_config::KindOrigin::Installed {
            source: "the apiserver's discovery".to_owned(),
        },
        status_subresource: caps.subresources.iter().any(|(sub, _)| sub.plural == "status"),
    }
}

fn missing(api_version: &str, kind: &str) -> kube::Error {
    kube::Error::Discovery(kube::error::DiscoveryError::MissingKind(format!(
        "{api_version} {kind}"
    )))
}

/// How the manager's client may load the apiserver: `--kube-api-qps`, `--kube-api-burst`,
/// `--kube-api-max-in-flight`.
#[derive(Clone, Copy, Debug)]
pub struct ClientLimits {
    pub qps: f64,
    pub burst: u32,
    /// Requests in flight at once, watches aside; 0 = no limit.
    pub max_in_flight: usize,
}

impl ClientLimits {
    /// For one-shot commands (`ruleplane diff`): their few requests need no limit.
    pub const NONE: ClientLimits = ClientLimits {
        qps: 0.0,
        burst: 0,
        max_in_flight: 0,
    };
}

pub async fn connect(kubeconfig: Option<&Path>, limits: ClientLimits) -> anyhow::Result<Client> {
    limited_client(config(kubeconfig).await?, limits)
}

/// The connection settings: `kubeconfig`, else $KUBECONFIG, ~/.kube/config, then in-cluster configuration.
pub async fn config(kubeconfig: Option<&Path>) -> anyhow::Result<Config> {
    match kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path).with_context(|| format!("reading kubeconfig {}", path.display()))?;
            Ok(Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?)
        }
        None => Config::infer()
            .await
            .context("no kubeconfig and not running in a cluster"),
    }
}

/// The workers' client, behind the rate and in-flight limits.
pub fn limited_client(config: Config, limits: ClientLimits) -> anyhow::Result<Client> {
    let builder = ClientBuilder::try_from(config).context("building the Kubernetes client")?;
    let in_flight =
        tower::util::option_layer((limits.max_in_flight > 0).then(|| InFlightLimitLayer::new(limits.max_in_flight)));
    let rate = tower::util::option_layer((limits.qps > 0.0).then(|| RateLimitLayer::new(limits.qps, limits.burst)));
    // The rate limit outermost: a request waiting for a token holds no in-flight permit meanwhile.
    Ok(builder.with_layer(&in_flight).with_layer(&rate).build())
}

/// The Leases' client: the same settings, its own connections, none of the workers' limits. A renewal
/// queued behind a burst of worker requests (for a token, a permit, or a pooled connection) could miss the renew
/// deadline although the apiserver answers it in milliseconds.
pub fn lease_client(config: Config) -> anyhow::Result<Client> {
    Client::try_from(config).context("building the Leases' Kubernetes client")
}

/// At most `limit` requests in flight at once, watches aside (a watch holds its request open for minutes). Over
/// HTTP/1.1 a connection carries one request at a time, so this also bounds the connections the client opens:
/// 200 rules reconciling together opened 1,200, each a TLS handshake for the apiserver, all kept open idle after.
/// A permit is held from the request's start to its response's headers (kube reads the body right after).
#[derive(Clone, Debug)]
pub struct InFlightLimitLayer {
    permits: Arc<tokio::sync::Semaphore>,
}

impl InFlightLimitLayer {
    pub fn new(limit: usize) -> Self {
        InFlightLimitLayer {
            permits: Arc::new(tokio::sync::Semaphore::new(limit.max(1))),
        }
    }
}

impl<S> tower::Layer<S> for InFlightLimitLayer {
    type Service = InFlightLimited<S>;
    fn layer(&self, inner: S) -> InFlightLimited<S> {
        InFlightLimited {
            inner,
            permits: tokio_util::sync::PollSemaphore::new(self.permits.clone()),
            permit: None,
        }
    }
}

pub struct InFlightLimited<S> {
    inner: S,
    permits: tokio_util::sync::PollSemaphore,
    /// Taken in `poll_ready` (the request is not known yet), given back at once in `call` for a watch.
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// Whether a request opens a watch (`watch=true` or `watch=1` in its query).
fn is_watch<B>(request: &hyper::http::Request<B>) -> bool {
    request
        .uri()
        .query()
        .is_some_and(|query| query.split('&').any(|pair| pair == "watch=true" || pair == "watch=1"))
}

impl<S, B> tower::Service<hyper::http::Request<B>> for InFlightLimited<S>
where
    S: tower::Service<hyper::http::Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        if self.permit.is_none() {
            // The semaphore is never closed: `None` cannot happen.
            self.permit = std::task::ready!(self.permits.poll_acquire(cx));
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: hyper::http::Request<B>) -> Self::Future {
        let permit = self.permit.take().filter(|_| !is_watch(&request));
        let response = self.inner.call(request);
        Box::pin(async move {
            let answered = response.await;
            drop(permit);
            answered
        })
    }
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

    /// Requests beyond the limit wait for one in flight to be answered; watches neither wait for nor hold a
    /// permit once sent.
    #[tokio::test]
    async fn requests_beyond_the_in_flight_limit_wait_and_watches_hold_no_permit() {
        let in_flight = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let most = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (counting, peak) = (in_flight.clone(), most.clone());
        let slow = tower::service_fn(move |request: hyper::http::Request<()>| {
            let (counting, peak) = (counting.clone(), peak.clone());
            async move {
                if is_watch(&request) {
                    // A watch stays open.
                    std::future::pending::<()>().await;
                } else {
                    let now = counting.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                    peak.fetch_max(now, std::sync::atomic::Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    counting.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                }
                Ok::<_, Infallible>(())
            }
        });
        let limited = tower::buffer::Buffer::new(InFlightLimitLayer::new(3).layer(slow), 64);
        let request = |uri: &str| hyper::http::Request::builder().uri(uri).body(()).expect("request");
        // Three open watches first: were they holding permits, nothing else could go.
        for _ in 0..3 {
            tokio::spawn(
                limited
                    .clone()
                    .oneshot(request("/api/v1/pods?watch=true&resourceVersion=1")),
            );
        }
        tokio::task::yield_now().await;
        let asks = (0..12).map(|_| limited.clone().oneshot(request("/api/v1/pods")));
        let started = Instant::now();
        let answers = tokio::time::timeout(Duration::from_secs(5), futures::future::join_all(asks))
            .await
            .expect("answered while the watches stay open");
        for answer in answers {
            answer.expect("answered");
        }
        assert_eq!(
            most.load(std::sync::atomic::Ordering::SeqCst),
            3,
            "never more than the limit at once"
        );
        assert!(
            started.elapsed() >= Duration::from_millis(75),
            "12 requests, 3 at a time, 20 ms each"
        );
        assert!(is_watch(&request("/apis/apps/v1/deployments?labelSelector=a&watch=1")));
        assert!(!is_watch(&request("/api/v1/pods?fieldSelector=watch%3Dtrue")));
    }

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
