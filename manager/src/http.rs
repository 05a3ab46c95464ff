//! HTTP endpoints: /metrics on the metrics address, /healthz and /readyz on the health-probe address.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tracing::{debug, warn};

use crate::health::Health;
use crate::metrics::Metrics;

#[derive(Clone)]
pub struct Endpoints {
    pub health: Arc<Health>,
    pub metrics: Arc<Metrics>,
}

/// Binds now (so a taken port fails at startup, not later) and serves in a background task.
pub async fn serve(addr: SocketAddr, endpoints: Endpoints) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let (stream, _) = match listener.accept().await {
                Ok(conn) => conn,
                Err(e) => {
                    warn!(error = %e, "accepting an HTTP connection failed");
                    continue;
                }
            };
            let endpoints = endpoints.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req| {
                    let endpoints = endpoints.clone();
                    async move { Ok::<_, Infallible>(route(&endpoints, &req)) }
                });
                if let Err(e) = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await
                {
                    debug!(error = %e, "HTTP connection ended with an error");
                }
            });
        }
    });
    Ok(local)
}

fn route(endpoints: &Endpoints, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let verbose = req
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "verbose" || p.starts_with("verbose=")));
    match req.uri().path() {
        "/healthz" | "/livez" => text(StatusCode::OK, "ok".to_owned(), "text/plain; charset=utf-8"),
        "/readyz" => {
            let r = endpoints.health.readiness(verbose);
            let code = if r.ready {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            text(code, r.body, "text/plain; charset=utf-8")
        }
        "/metrics" => text(
            StatusCode::OK,
            endpoints.metrics.encode(),
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        ),
        _ => text(
            StatusCode::NOT_FOUND,
            "not found".to_owned(),
            "text/plain; charset=utf-8",
        ),
    }
}

fn text(code: StatusCode, body: String, content_type: &'static str) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = code;
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    resp
}
