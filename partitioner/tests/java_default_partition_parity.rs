//! Our fallback placement is the Java client's: `dkg_kafka_core::hash::kafka_partition` (and `murmur2`) agree
//! with the Kafka Java client of the pinned version (kafka-clients from Maven Central, cached by
//! `scripts/kafka`) key by key.
//!
//! 1. `tools/java/DefaultPartition.java` asks `BuiltInPartitioner.partitionForKey` (the producer's default path
//!    for keyed records) and `Utils.toPositive(Utils.murmur2(k)) % n` for 100 000 random and text keys and
//!    several partition counts.
//! 2. The same program sends keyed records through a real `KafkaProducer` to the test broker; the partitions
//!    the broker acknowledged, and the records read back from it, are where `kafka_partition` puts each key.
//!
//! Missing java/javac/jars fail the test; it never skips.
#![allow(clippy::unwrap_used)]

mod common;

use std::fmt::Write as _;
use std::io::Write as _;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use dkg_kafka_core::hash::{kafka_partition, murmur2};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const PARTITION_COUNTS: [u32; 5] = [1, 3, 12, 100, 1000];
const KEYS: usize = 100_000;

/// Compiles DefaultPartition.java once per test binary; returns the classpath to run it with.
fn parity_tool() -> String {
    static CP: OnceLock<String> = OnceLock::new();
    CP.get_or_init(|| common::compile_java("tools/java/DefaultPartition.java", None))
        .clone()
}

/// Runs DefaultPartition with `args`, feeding `keys` as hex lines; returns stdout lines.
fn run_java(args: &[&str], keys: &[Vec<u8>]) -> Vec<String> {
    let cp = parity_tool();
    let mut input = String::with_capacity(keys.iter().map(|k| 2 * k.len() + 1).sum());
    for k in keys {
        for b in k {
            write!(input, "{b:02x}").unwrap();
        }
        input.push('\n');
    }
    let java = common::java_bin("java");
    let mut child = Command::new(&java)
        .args([
            "-Xmx512m",
            "-XX:+UseSerialGC",
            "-cp",
            &cp,
            "DefaultPartition",
        ])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {} ({e}): the Java parity test needs Java 17+",
                java.display()
            )
        });
    // Feed stdin from a thread so a full stdout pipe cannot deadlock us.
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap().unwrap();
    assert!(
        out.status.success(),
        "DefaultPartition {args:?} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(lines.len(), keys.len(), "one output line per key");
    lines
}

fn hex(k: &[u8]) -> String {
    k.iter().map(|b| format!("{b:02x}")).collect()
}

/// Edge cases first (every tail length, sign bits, empty), then random bytes of length 0..64 and text keys.
fn keys(seed: u64, n: usize) -> Vec<Vec<u8>> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut keys: Vec<Vec<u8>> = vec![Vec::new()];
    for len in 1..=16 {
        for byte in [0x00u8, 0x7f, 0x80, 0xff, b'a'] {
            keys.push(vec![byte; len]);
        }
    }
    keys.extend(
        [
            "0",
            "key",
            "hot-key",
            "user-42",
            "ключ",
            "键",
            "🔑-emoji",
            "a\u{0}b",
            "orders",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec()),
    );
    let text_prefixes = ["user-", "order:", "sess_", "ключ-", "键", "device/", ""];
    while keys.len() < n {
        if rng.random_bool(0.7) {
            let len = rng.random_range(0..64);
            let mut k = vec![0u8; len];
            rng.fill(&mut k[..]);
            keys.push(k);
        } else {
            let prefix = text_prefixes[rng.random_range(0..text_prefixes.len())];
            let id: u64 = match rng.random_range(0..3) {
                0 => rng.random_range(0..1_000),
                1 => rng.random_range(0..10_000_000),
                _ => rng.random(),
            };
            keys.push(format!("{prefix}{id}").into_bytes());
        }
    }
    keys
}

fn seed() -> u64 {
    std::env::var("DKG_PARITY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random)
}

#[test]
fn kafka_partition_equals_the_java_default_partitioner_for_100k_keys() {
    let seed = seed();
    let keys = keys(seed, KEYS);
    let counts: Vec<String> = PARTITION_COUNTS.iter().map(u32::to_string).collect();
    let args: Vec<&str> = counts.iter().map(String::as_str).collect();
    let lines = run_java(&args, &keys);

    let mut mismatches = Vec::new();
    let mut seen = vec![vec![false; 1000]; PARTITION_COUNTS.len()];
    for (i, (key, line)) in keys.iter().zip(&lines).enumerate() {
        let mut fields = line.split(' ');
        let java_hash: i32 = fields.next().unwrap().parse().unwrap();
        // Java's int and our u32 are the same bits.
        if murmur2(key) as i32 != java_hash {
            mismatches.push(format!(
                "key #{i} {}: murmur2 ours {} java {java_hash}",
                hex(key),
                murmur2(key) as i32
            ));
        }
        for (c, &n) in PARTITION_COUNTS.iter().enumerate() {
            let java: u32 = fields.next().unwrap().parse().unwrap();
            let ours = kafka_partition(key, n);
            if ours != java {
                mismatches.push(format!(
                    "key #{i} {} n={n}: ours {ours} java {java}",
                    hex(key)
                ));
            }
            seen[c][java as usize] = true;
        }
        assert!(fields.next().is_none(), "unexpected extra output: {line}");
    }
    assert!(
        mismatches.is_empty(),
        "{} mismatches with the Java client (seed {seed}, rerun with DKG_PARITY_SEED={seed}); first ones:\n{}",
        mismatches.len(),
        mismatches
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    // The comparison is not vacuous: with 100k keys every partition of every count is hit.
    for (c, &n) in PARTITION_COUNTS.iter().enumerate() {
        let hit = seen[c].iter().filter(|&&b| b).count();
        assert_eq!(
            hit, n as usize,
            "n={n}: only {hit} partitions received keys"
        );
    }
}

#[cfg(feature = "kafka")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_sent_by_the_java_kafka_producer_land_where_kafka_partition_says() {
    use std::collections::HashMap;
    use std::time::{Duration, Instant};

    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::{ClientConfig, Message};

    const PARTITIONS: u32 = 12;
    const RECORDS: usize = 3_000;

    let bootstrap = common::bootstrap();
    let topic = common::unique_topic("java-default-partition");
    common::create_topic(&bootstrap, &topic, PARTITIONS, &[]).await;

    let seed = seed();
    let keys = keys(seed, RECORDS);
    let acks = {
        let (bootstrap, topic, keys) = (bootstrap.clone(), topic.clone(), keys.clone());
        tokio::task::spawn_blocking(move || run_java(&["--produce", &bootstrap, &topic], &keys))
            .await
            .unwrap()
    };

    // What the Java producer chose, as acknowledged by the broker.
    for (i, line) in acks.iter().enumerate() {
        let f: Vec<&str> = line.split(' ').collect();
        assert_eq!(f.len(), 3, "bad ack line {line}");
        assert_eq!(f[0].parse::<usize>().unwrap(), i);
        let partition: u32 = f[1].parse().unwrap();
        assert_eq!(
            partition,
            kafka_partition(&keys[i], PARTITIONS),
            "key #{i} {} (seed {seed})",
            hex(&keys[i])
        );
    }

    // And what is really stored: every record read back, on the partition kafka_partition names.
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", common::unique_topic("java-parity-reader"))
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = rdkafka::TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition_offset(&topic, p as i32, rdkafka::Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&tpl).unwrap();
    let found = tokio::task::spawn_blocking(move || {
        let mut found: HashMap<usize, (Vec<u8>, u32)> = HashMap::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        while found.len() < RECORDS && Instant::now() < deadline {
            if let Some(m) = consumer.poll(Duration::from_millis(500)) {
                let m = m.unwrap();
                let idx: usize = std::str::from_utf8(m.payload().unwrap())
                    .unwrap()
                    .parse()
                    .unwrap();
                let key = m.key().map(<[u8]>::to_vec).unwrap_or_default();
                let prev = found.insert(idx, (key, u32::try_from(m.partition()).unwrap()));
                assert!(prev.is_none(), "record {idx} read twice");
            }
        }
        found
    })
    .await
    .unwrap();
    assert_eq!(
        found.len(),
        RECORDS,
        "all records produced by Java are read back"
    );
    for (idx, (key, partition)) in &found {
        assert_eq!(key, &keys[*idx], "record {idx} has its key");
        assert_eq!(
            *partition,
            kafka_partition(key, PARTITIONS),
            "record {idx} (seed {seed})"
        );
    }
}
