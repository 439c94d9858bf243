//! The router's rdkafka adapters: [`PartitionCountSource`] for the clients, the librdkafka
//! [`DkgPartitioner`] and the producer context that installs it.

use super::*;

/// Something that can tell a topic's current partition count (a blocking metadata request).
///
/// Implemented for the producers (so the count the router uses comes from the same client, and
/// the same metadata response, that librdkafka validates explicit partitions against) and for the
/// consumers.
pub trait PartitionCountSource: Send + Sync + 'static {
    /// `Ok(None)` if the topic does not exist.
    fn partition_count(&self, topic: &str, timeout: Duration) -> KafkaResult<Option<u32>>;
}

pub(super) fn count_from_client<C: ClientContext>(
    client: &Client<C>,
    topic: &str,
    timeout: Duration,
) -> KafkaResult<Option<u32>> {
    let metadata = client.fetch_metadata(Some(topic), timeout)?;
    let Some(t) = metadata.topics().iter().find(|t| t.name() == topic) else {
        return Ok(None);
    };
    if !t.partitions().is_empty() {
        return Ok(Some(
            u32::try_from(t.partitions().len()).unwrap_or(u32::MAX),
        ));
    }
    match t.error() {
        Some(RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) | None => Ok(None),
        Some(e) => Err(KafkaError::MetadataFetch(e.into())),
    }
}

impl<C, R> PartitionCountSource for FutureProducer<C, R>
where
    C: ClientContext + 'static,
    R: AsyncRuntime,
{
    fn partition_count(&self, topic: &str, timeout: Duration) -> KafkaResult<Option<u32>> {
        count_from_client(self.client(), topic, timeout)
    }
}

impl<C, Part> PartitionCountSource for BaseProducer<C, Part>
where
    C: ProducerContext<Part> + 'static,
    Part: Partitioner + Send + Sync + 'static,
{
    fn partition_count(&self, topic: &str, timeout: Duration) -> KafkaResult<Option<u32>> {
        count_from_client(self.client(), topic, timeout)
    }
}

impl<C, Part> PartitionCountSource for ThreadedProducer<C, Part>
where
    C: ProducerContext<Part> + 'static,
    Part: Partitioner + Send + Sync + 'static,
{
    fn partition_count(&self, topic: &str, timeout: Duration) -> KafkaResult<Option<u32>> {
        count_from_client(self.client(), topic, timeout)
    }
}

impl<C: ConsumerContext + 'static> PartitionCountSource for BaseConsumer<C> {
    fn partition_count(&self, topic: &str, timeout: Duration) -> KafkaResult<Option<u32>> {
        count_from_client(self.client(), topic, timeout)
    }
}

impl<C: ConsumerContext + 'static> PartitionCountSource for StreamConsumer<C> {
    fn partition_count(&self, topic: &str, timeout: Duration) -> KafkaResult<Option<u32>> {
        count_from_client(self.client(), topic, timeout)
    }
}

impl<T: PartitionCountSource + ?Sized> PartitionCountSource for Arc<T> {
    fn partition_count(&self, topic: &str, timeout: Duration) -> KafkaResult<Option<u32>> {
        (**self).partition_count(topic, timeout)
    }
}

/// DKG as librdkafka's custom partitioner (`ProducerContext::get_custom_partitioner`).
///
/// librdkafka calls it from its own threads with the partition count from its metadata; it routes
/// like [`DkgRouter::route_with_count`]. It cannot stamp the [`EPOCH_HEADER`] (a partitioner does
/// not see the record), so consumers relying on epochs need [`DkgRouter::route`] instead. librdkafka
/// may call it more than once per record, so `dkg_producer_*records_total` may over-count on this
/// path. Keyless records (only seen with `sticky.partitioning.linger.ms=0`) go round-robin.
#[derive(Clone, Debug)]
pub struct DkgPartitioner {
    pub(super) router: DkgRouter,
}

impl Partitioner for DkgPartitioner {
    fn partition(
        &self,
        topic_name: &str,
        key: Option<&[u8]>,
        partition_cnt: i32,
        _is_partition_available: impl Fn(i32) -> bool,
    ) -> i32 {
        if partition_cnt <= 0 {
            return 0;
        }
        match key {
            Some(key) => self
                .router
                .route_with_count(topic_name, key, partition_cnt)
                .partition
                .unwrap_or(0),
            None => {
                let n = self.router.shared.keyless.fetch_add(1, Ordering::Relaxed);
                (n % partition_cnt.unsigned_abs()) as i32
            }
        }
    }
}

/// A [`ProducerContext`] whose custom partitioner is a [`DkgPartitioner`]; delivery reports are
/// ignored (use your own context for them and return the partitioner from
/// `get_custom_partitioner`).
#[derive(Clone, Debug)]
pub struct DkgProducerContext {
    pub(super) partitioner: DkgPartitioner,
}

impl ClientContext for DkgProducerContext {}

impl ProducerContext<DkgPartitioner> for DkgProducerContext {
    type DeliveryOpaque = ();

    fn delivery(&self, _: &DeliveryResult<'_>, _: Self::DeliveryOpaque) {}

    fn get_custom_partitioner(&self) -> Option<&DkgPartitioner> {
        Some(&self.partitioner)
    }
}
