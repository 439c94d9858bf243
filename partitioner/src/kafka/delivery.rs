//! The producer's own delivery path: [`DeliveryContext`] (the producer context every
//! [`DkgProducer`](crate::DkgProducer) runs on) and [`DeliveryFuture`] (what `send_result`
//! returns).
//!
//! Why not rdkafka's `FutureProducer`: an ordering producer (`docs/spec.md` 9.2.1)
//! must see the outcome of *every* record it routed, also of records whose future the application
//! dropped (the common high-throughput pattern), and `FutureProducerContext` discards those
//! reports without telling the user's context. This is the same shape (a `ThreadedProducer`
//! whose delivery opaque carries the record's oneshot), with room for the record's
//! [`EpochLedger`]: the delivery callback counts the report there, then answers the oneshot. For
//! records without a ledger the work per record is `FutureProducer`'s.

use std::error::Error as StdError;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use dkg_kafka_protocol::marker::EpochLedger;
use futures_channel::oneshot;
use rdkafka::ClientContext;
use rdkafka::client::OAuthToken;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::future_producer::{Delivery, OwnedDeliveryResult};
use rdkafka::producer::{DeliveryResult, NoCustomPartitioner, ProducerContext, ThreadedProducer};
use rdkafka::statistics::Statistics;
use rdkafka::types::RDKafkaErrorCode;

/// The client every [`DkgProducer`](crate::DkgProducer) runs on, shared by its ordering
/// task (rdkafka's `FutureProducer` is the same: a `ThreadedProducer` whose delivery opaque carries
/// a oneshot). Here, not in `producer.rs`, so the producer and its ordering task both import it
/// from below.
pub(crate) type Backend<C> = Arc<ThreadedProducer<DeliveryContext<C>>>;

/// The producer context of a [`DkgProducer`](crate::DkgProducer): the user's
/// [`ClientContext`] (logging, statistics, errors, OAuth, all passed through) plus the wrapper's
/// delivery handling.
#[derive(Debug, Clone)]
pub struct DeliveryContext<C: ClientContext + 'static> {
    user: C,
}

impl<C: ClientContext + 'static> DeliveryContext<C> {
    pub(crate) fn new(user: C) -> Self {
        Self { user }
    }

    /// The user's context.
    pub fn user_context(&self) -> &C {
        &self.user
    }
}

impl<C: ClientContext + 'static> ClientContext for DeliveryContext<C> {
    const ENABLE_REFRESH_OAUTH_TOKEN: bool = C::ENABLE_REFRESH_OAUTH_TOKEN;

    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        self.user.log(level, fac, log_message);
    }

    fn stats(&self, statistics: Statistics) {
        self.user.stats(statistics);
    }

    fn stats_raw(&self, statistics: &[u8]) {
        self.user.stats_raw(statistics);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        self.user.error(error, reason);
    }

    fn generate_oauth_token(
        &self,
        oauthbearer_config: Option<&str>,
    ) -> Result<OAuthToken, Box<dyn StdError>> {
        self.user.generate_oauth_token(oauthbearer_config)
    }
}

/// What travels with a record through librdkafka: where to answer, and the ledger of the epoch
/// it was routed under (marker mode only).
#[derive(Debug)]
pub struct Pending {
    tx: oneshot::Sender<OwnedDeliveryResult>,
    ledger: Option<Arc<EpochLedger>>,
}

impl Pending {
    /// A record's opaque and the future its report will complete.
    pub(crate) fn new(ledger: Option<Arc<EpochLedger>>) -> (Box<Self>, DeliveryFuture) {
        let (tx, rx) = oneshot::channel();
        (
            Box::new(Self { tx, ledger }),
            DeliveryFuture {
                inner: Inner::Own(rx),
            },
        )
    }

    /// The client refused the record: it never reaches librdkafka's queue.
    pub(crate) fn withdrawn(&self) {
        if let Some(l) = &self.ledger {
            l.withdrawn();
        }
    }
}

impl<C: ClientContext + 'static> ProducerContext<NoCustomPartitioner> for DeliveryContext<C> {
    type DeliveryOpaque = Box<Pending>;

    fn delivery(&self, result: &DeliveryResult<'_>, pending: Box<Pending>) {
        let owned = match result {
            Ok(message) => {
                if let Some(l) = &pending.ledger {
                    l.acked(message.partition(), message.offset());
                }
                Ok(Delivery {
                    partition: message.partition(),
                    offset: message.offset(),
                    timestamp: message.timestamp(),
                })
            }
            Err((error, message)) => {
                // An idempotent producer's failures include timeouts of records that may be in
                // the log: never counted as absent (spec 9.2.1), except a record purged while
                // still in the client's queue (`purge` without the in-flight flag), which was
                // never sent.
                if let Some(l) = &pending.ledger {
                    match error {
                        KafkaError::MessageProduction(RDKafkaErrorCode::PurgeQueue) => {
                            l.withdrawn();
                        }
                        _ => l.unknown(message.partition()),
                    }
                }
                Err((error.clone(), message.detach()))
            }
        };
        // The application may have dropped the future: nothing to answer then.
        let _ = pending.tx.send(owned);
    }
}

/// The delivery report of a record sent with
/// [`DkgProducer::send_result`](crate::DkgProducer::send_result): the shape of rdkafka's
/// `DeliveryFuture` (same output type), so code awaiting either stays the same. Futures of a plain
/// `FutureProducer` convert with `From`, so one queue can hold both. Dropping it is fine (the
/// high-throughput pattern): the record is still delivered, and an ordering producer still counts
/// its report; only the report itself is discarded.
pub struct DeliveryFuture {
    inner: Inner,
}

impl std::fmt::Debug for DeliveryFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeliveryFuture").finish_non_exhaustive()
    }
}

enum Inner {
    Own(oneshot::Receiver<OwnedDeliveryResult>),
    Rdkafka(rdkafka::producer::DeliveryFuture),
}

impl From<rdkafka::producer::DeliveryFuture> for DeliveryFuture {
    fn from(f: rdkafka::producer::DeliveryFuture) -> Self {
        Self {
            inner: Inner::Rdkafka(f),
        }
    }
}

impl Future for DeliveryFuture {
    type Output = Result<OwnedDeliveryResult, oneshot::Canceled>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.inner {
            Inner::Own(rx) => Pin::new(rx).poll(cx),
            Inner::Rdkafka(f) => Pin::new(f).poll(cx),
        }
    }
}
