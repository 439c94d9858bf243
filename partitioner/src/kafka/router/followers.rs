//! The router's background tasks: follow the control topic, refresh the partition counts of the
//! topics in use.

use super::*;

pub(super) fn known_partitions(shared: &Shared, topic: &str) -> Option<u32> {
    Some(shared.topic(topic).view.load().count).filter(|&c| c != 0)
}

pub(super) async fn follow_control_topic(shared: Arc<Shared>, mut reader: ControlTopicReader) {
    loop {
        let record = reader.next_record().await;
        shared.apply(&record.update, true);
    }
}

pub(super) async fn follow_partition_counts(
    shared: Arc<Shared>,
    source: Arc<dyn PartitionCountSource>,
    mut requests: mpsc::UnboundedReceiver<Arc<str>>,
    every: Duration,
    timeout: Duration,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let topics: Vec<Arc<str>> = tokio::select! {
            _ = tick.tick() => shared
                .topics
                .load()
                .values()
                .filter(|s| s.in_use.load(Ordering::Acquire))
                .map(|s| Arc::clone(&s.name))
                .collect(),
            request = requests.recv() => {
                let Some(first) = request else { return };
                let mut batch = vec![first];
                while let Ok(more) = requests.try_recv() {
                    batch.push(more);
                }
                batch
            }
        };
        if !topics.is_empty() {
            refresh_counts(&shared, &source, topics, timeout).await;
        }
    }
}

/// Fetch and install the partition counts of `topics` (blocking requests on the blocking pool).
pub(super) async fn refresh_counts(
    shared: &Arc<Shared>,
    source: &Arc<dyn PartitionCountSource>,
    topics: Vec<Arc<str>>,
    timeout: Duration,
) {
    let src = Arc::clone(source);
    let fetched = tokio::task::spawn_blocking(move || {
        topics
            .into_iter()
            .map(|t| {
                let count = src.partition_count(&t, timeout);
                (t, count)
            })
            .collect::<Vec<_>>()
    })
    .await;
    let Ok(fetched) = fetched else { return };
    for (topic, count) in fetched {
        let state = shared.topic(&topic);
        match count {
            Ok(Some(n)) => state.set_partition_count(n, &shared.metrics),
            Ok(None) => {
                debug!(topic = %topic, "topic does not exist (yet): librdkafka's partitioner");
                state.set_partition_count(0, &shared.metrics);
            }
            // Keep the last known count: a broker outage must not flip routing.
            Err(e) => debug!(topic = %topic, error = %e, "partition count refresh failed"),
        }
    }
}
