//! `/metrics` over HTTP for the lab's subcommands that export a Prometheus registry (`dkg-lab loadgen`, `consume`).
//! The library only registers metrics in a caller's registry; serving them is the binary's job.
//! (`run` has its own server in `sidecar::http`, with its sampler-specific endpoints.)

use std::net::SocketAddr;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// `registry` in Prometheus' text format, with the Content-Type Prometheus 3 requires.
pub fn metrics_response(registry: &prometheus::Registry) -> Response {
    let mut body = String::new();
    match prometheus::TextEncoder::new().encode_utf8(&registry.gather(), &mut body) {
        Ok(()) => (
            [(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            body,
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// Serve `registry` at `http://addr/metrics`, plus the routes of `extra`, for the rest of the process.
/// Binds now, so a taken port fails at start; returns the bound address.
pub async fn serve_metrics(
    addr: SocketAddr,
    registry: prometheus::Registry,
    extra: Router,
) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr().unwrap_or(addr);
    let app = Router::new()
        .route(
            "/metrics",
            get(move || {
                let registry = registry.clone();
                async move { metrics_response(&registry) }
            }),
        )
        .merge(extra);
    tracing::info!("serving http://{local}/metrics");
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!("metrics server failed: {e}");
        }
    });
    Ok(local)
}
