//! The one-line change: a plain rdkafka `FutureProducer` becomes a `DkgProducer`.
//!
//! ```text
//! scripts/kafka start
//! cargo run -p dkg-kafka --example one_line_change -- 127.0.0.1:9092 orders
//! ```
//!
//! Everything else (records, `send`, `flush`) is unchanged. Until `dkg-sampler` publishes an
//! assignment for the topic, records land exactly where the Java producer would put them; afterwards
//! keyed records follow the assignment (an ordering producer, `.ordering(true)`, also stamps the
//! records of keys an epoch moved with `dkg-epoch`).

use std::time::Duration;

use dkg_kafka::DkgProducer;
use dkg_kafka::kafka::topic;
use dkg_kafka::kafka::topic::TopicSpec;
use rdkafka::admin::AdminClient;
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureRecord, Producer};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let bootstrap = args.next().unwrap_or_else(|| "127.0.0.1:9092".to_owned());
    let topic = args.next().unwrap_or_else(|| "orders".to_owned());

    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", &bootstrap);
    create_topic_if_missing(&config, &topic).await?;

    // Before:
    //     let producer: FutureProducer = config.create()?;
    // After:
    let producer = DkgProducer::builder(config).build().await?;

    for i in 0..10_u32 {
        let key = format!("customer-{}", i % 3);
        let payload = format!("order {i}");
        let record = FutureRecord::to(&topic).key(&key).payload(&payload);
        match producer.send(record, Duration::from_secs(5)).await {
            Ok(delivery) => println!(
                "{key} -> partition {} offset {}",
                delivery.partition, delivery.offset
            ),
            Err((e, _)) => eprintln!("{key}: delivery failed: {e}"),
        }
    }
    producer.flush(Duration::from_secs(10))?;
    match producer.router().assignment(&topic) {
        Some(a) => println!("routed by assignment epoch {}", a.epoch()),
        None => println!("no assignment for {topic}: Kafka's default placement"),
    }
    Ok(())
}

/// Setup for the demo only (the repository's broker does not auto-create topics): 6 partitions.
async fn create_topic_if_missing(
    config: &ClientConfig,
    topic: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    let admin: AdminClient<DefaultClientContext> = config.create()?;
    topic::create_topic(&admin, &TopicSpec::new(topic, 6), Duration::from_secs(30)).await?;
    Ok(())
}
