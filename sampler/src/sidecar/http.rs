//! The sampler's HTTP endpoints (binary only; the library takes a caller's registry):
//! - `GET /metrics`: Prometheus text format of the sampler's registry;
//! - `GET /assignment`: the topic's current assignment JSON (in `--dry-run`: what the sampler would have
//!   published), `404` when there is none;
//! - `GET /healthz`: a JSON status document; `200` while the sampler runs and its intervals tick, `503`
//!   while it waits for the broker or the topic, when no interval completed for three intervals, while
//!   its publisher is fenced by another instance (`"state":"fenced"`), or when the topic's epochs
//!   are exhausted (`"state":"exhausted"`, `docs/spec.md` 6.2). A `warning` (misplaced records,
//!   `misplaced.rs`) leaves the status code alone: the sampler still works.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Serialize;

use super::metrics::SamplerMetrics;
use super::{RunError, now_ms};

/// The status document of `/healthz`.
#[derive(Debug, Clone, Serialize)]
pub struct Health {
    /// starting | waiting | running | fenced | exhausted | stopping (only `running` is 200).
    pub state: &'static str,
    /// Why it waits, or the last problem.
    pub message: Option<String>,
    /// The data topic.
    pub topic: String,
    /// The consumer group.
    pub group_id: String,
    /// This instance's member id.
    pub member_id: String,
    /// leader (owns partition 0: merges and publishes) | member.
    pub role: &'static str,
    /// standby | active | fenced | dry-run.
    pub publisher: &'static str,
    /// The topic's partition count (0 = unknown yet).
    pub partitions: u32,
    /// Partitions this instance consumes.
    pub owned: Vec<u32>,
    /// Instances whose windows the last decision merged (leader only).
    pub members: usize,
    /// Completed intervals.
    pub intervals: u64,
    /// Epoch of the current assignment (0 = none).
    pub epoch: u64,
    /// Assignments published by this instance.
    pub publishes: u64,
    /// Unix millis of the last completed interval.
    pub last_interval_ms: u64,
    /// The configured interval (millis).
    pub interval_ms: u64,
    /// records | bytes (`--weight`): the unit of the sampler's shares and imbalances.
    pub weight: &'static str,
    /// A problem that does not stop the sampler (no effect on the status code): the last interval's
    /// misplaced records above `--misplaced-warn-ratio`, with their likely causes.
    pub warning: Option<String>,
}

/// State shared between the driver and the HTTP handlers.
#[derive(Debug)]
pub struct HttpState {
    /// The metrics.
    pub metrics: SamplerMetrics,
    assignment: Mutex<Option<Arc<Vec<u8>>>>,
    health: Mutex<Health>,
}

impl HttpState {
    /// Initial state.
    pub fn new(metrics: SamplerMetrics, health: Health) -> Self {
        Self {
            metrics,
            assignment: Mutex::new(None),
            health: Mutex::new(health),
        }
    }

    /// Serve `json` (or nothing) at `/assignment`.
    pub fn set_assignment(&self, json: Option<Vec<u8>>) {
        *self
            .assignment
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = json.map(Arc::new);
    }

    /// Update the health document.
    pub fn update_health(&self, f: impl FnOnce(&mut Health)) {
        f(&mut self
            .health
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner));
    }

    /// A copy of the health document.
    pub fn health(&self) -> Health {
        self.health
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// Bind `addr` now (so a taken port fails at start, clearly), serve until `stop` fires.
pub async fn serve(
    addr: SocketAddr,
    state: Arc<HttpState>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> Result<tokio::task::JoinHandle<()>, RunError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| RunError::Setup(format!("cannot listen on {addr} (--metrics-addr): {e}")))?;
    let local = listener.local_addr().unwrap_or(addr);
    tracing::info!("serving http://{local}/metrics, /assignment and /healthz");
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/assignment", get(assignment))
        .route("/healthz", get(healthz))
        .with_state(state);
    Ok(tokio::spawn(async move {
        let shutdown = async move {
            let _ = stop.wait_for(|s| *s).await;
        };
        if let Err(e) = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await
        {
            tracing::error!("http server failed: {e}");
        }
    }))
}

async fn metrics(State(state): State<Arc<HttpState>>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics.render(),
    )
        .into_response()
}

async fn assignment(State(state): State<Arc<HttpState>>) -> Response {
    let json = state
        .assignment
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    match json {
        Some(json) => (
            [(header::CONTENT_TYPE, "application/json")],
            json.as_ref().clone(),
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "no assignment for this topic yet\n").into_response(),
    }
}

async fn healthz(State(state): State<Arc<HttpState>>) -> Response {
    let health = state.health();
    let stuck = health.state == "running"
        && health.last_interval_ms > 0
        && now_ms().saturating_sub(health.last_interval_ms) > 3 * health.interval_ms + 30_000;
    let code = if health.state == "running" && !stuck {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = serde_json::to_vec(&health).unwrap_or_default();
    (code, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}
