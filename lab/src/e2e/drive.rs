//! The benchmark's driver: topics, the DKG assignment, the two producers and groups, the steps.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use dkg_kafka::DeliveryFuture;
use dkg_kafka::DkgProducer;
use dkg_kafka::kafka::topic;
use dkg_kafka::kafka::topic::TopicSpec;
use dkg_kafka::kafka::{control, producer_config};
use dkg_kafka_core::dkg::{DkgConfig, Sketch};
use dkg_kafka_core::hash::kafka_partition;
use dkg_kafka_core::imbalance;
use rdkafka::admin::AdminClient;
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};
use tokio::sync::watch;

use super::group::{Group, GroupSpec};
use super::report::{AT_70PCT_HASH, BenchResult, Latency, SideResult, Spread, Step};
use super::{Args, Arrivals};
use crate::demo::delete_topics;
use crate::loadgen::{Sender, Tally};
use dkg_sampler::workload::ZipfKeys;

/// Lag samples per second within a step.
const SAMPLE_EVERY: Duration = Duration::from_millis(250);
/// Longest wait, after a step's last send, for every record of the step to be acknowledged.
const MAX_ACK_TAIL: Duration = Duration::from_secs(2);
/// Most records awaiting their delivery report.
const MAX_IN_FLIGHT: usize = 100_000;

/// One side of the benchmark: a topic, its producer, its workload and its group.
struct Side {
    name: &'static str,
    sender: Sender,
    topic: String,
    keys: ZipfKeys,
    group: Group,
    /// Records sent so far.
    sent: u64,
    /// The same per partition (the partition the record was sent to).
    sent_by_partition: Vec<u64>,
    /// Records acknowledged per partition (and failed ones).
    tally: Tally,
    /// Records of the hottest key (rank 0) sent.
    top_key: u64,
    steps: Vec<Step>,
}

pub async fn bench(args: &Args, run_id: u128) -> anyhow::Result<BenchResult> {
    let mut connection = ClientConfig::new();
    connection.set("bootstrap.servers", &args.bootstrap_servers);
    args.kafka.apply(&mut connection)?;
    let k = args.partitions;
    let hash_topic = format!("{}-hash-{run_id}", args.topic_prefix);
    let dkg_topic = format!("{}-dkg-{run_id}", args.topic_prefix);
    for t in [&hash_topic, &dkg_topic] {
        topic::create_and_wait(
            &connection,
            &TopicSpec::new(t, k).replication(1),
            Duration::from_secs(30),
        )
        .await
        .with_context(|| format!("creating {t} (is the broker up? scripts/kafka start)"))?;
    }
    let keys = || {
        ZipfKeys::new(args.keys, args.zipf, args.seed).with_context(|| {
            format!(
                "no Zipf law over {} keys with exponent {}",
                args.keys, args.zipf
            )
        })
    };
    let (epoch, predicted_imbalance) =
        publish_learned(args, &connection, &dkg_topic, keys()?).await?;
    let dkg_producer = DkgProducer::builder(connection.clone())
        .control_topic(&args.control_topic)
        .topics([dkg_topic.as_str()])
        .build()
        .await
        .context("building the DkgProducer")?;
    wait_for_assignment(&dkg_producer, &dkg_topic, epoch).await?;
    let hash_producer: FutureProducer = producer_config(&connection)
        .create()
        .context("creating the hash side's producer")?;

    let (stop_tx, stop) = watch::channel(false);
    let spec = |topic: String, dkg: bool| GroupSpec {
        connection: connection.clone(),
        topic,
        dkg_control_topic: dkg.then(|| args.control_topic.clone()),
        members: k,
        capacity_rps: args.member_capacity_rps,
    };
    let hash_group = Group::start(&spec(hash_topic.clone(), false), &stop).await?;
    let dkg_group = Group::start(&spec(dkg_topic.clone(), true), &stop).await?;
    let mut hash = Side::new(
        "hash",
        Sender::Plain(hash_producer),
        hash_topic,
        keys()?,
        hash_group,
        k,
    );
    let mut dkg = Side::new(
        "dkg",
        Sender::Dkg(dkg_producer),
        dkg_topic,
        keys()?,
        dkg_group,
        k,
    );
    let joining = Instant::now();
    wait_members(&[&hash, &dkg]).await?;
    tracing::info!(
        secs = joining.elapsed().as_secs_f64(),
        "both groups have one partition per member"
    );

    let outcome = measure(args, &mut hash, &mut dkg).await;
    let _ = stop_tx.send(true);
    let (h, d) = (hash.group_join().await, dkg.group_join().await);
    if !args.keep_topics {
        let admin: AdminClient<DefaultClientContext> =
            connection.create().context("creating the admin client")?;
        if let Err(e) = delete_topics(&admin, &[&hash.topic, &dkg.topic]).await {
            tracing::warn!("could not delete the twin topics: {e:#}");
        }
    }
    let ([hash_bracket, dkg_bracket], b_rate, c_rate) = outcome?;
    let (capacity_hash, capacity_dkg) = (hash_bracket.0, dkg_bracket.0);
    h?;
    d?;

    #[allow(clippy::cast_precision_loss)]
    let top_key_share = hash.top_key as f64 / hash.sent.max(1) as f64;
    let key_grouping_bound = (f64::from(k) * top_key_share).max(1.0) - 1.0;
    let hash_result = hash.result(hash_bracket);
    let mut dkg_result = dkg.result(dkg_bracket);
    dkg_result.assignment_epoch = Some(epoch);
    dkg_result.predicted_imbalance = Some(predicted_imbalance);
    let predicted_limit = (1.0 + hash_result.imbalance) / (1.0 + key_grouping_bound);
    let ratio = capacity_dkg / capacity_hash;
    // DKG over hash, round by round, of one latency figure of the (b) rounds.
    let b_ratios = |f: fn(&Latency) -> u32| {
        let ratios: Vec<f64> = hash_result
            .phases(AT_70PCT_HASH)
            .zip(dkg_result.phases(AT_70PCT_HASH))
            .map(|(h, d)| f64::from(f(&d.latency_ms)) / f64::from(f(&h.latency_ms).max(1)))
            .collect();
        Spread::of(&ratios)
    };
    let at_70pct_hash_p99_ratio = b_ratios(|l| l.p99);
    let at_70pct_hash_worst_partition_p99_ratio = b_ratios(|l| l.worst_partition_p99);
    Ok(BenchResult {
        at_70pct_hash_p99_ratio,
        at_70pct_hash_worst_partition_p99_ratio,
        zipf: args.zipf,
        partitions: k,
        keys: args.keys,
        member_capacity_rps: args.member_capacity_rps,
        arrivals: args.arrivals,
        step_secs: args.step_secs,
        lag_slope_max_rps: args.lag_slope_max_ratio * args.member_capacity_rps,
        overload_secs: args.overload_secs,
        load_average: std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
            .to_owned(),
        ratio,
        top_key_share,
        key_grouping_bound,
        predicted_limit,
        ratio_over_limit: ratio / predicted_limit,
        at_70pct_hash_rps: b_rate,
        at_70pct_dkg_rps: c_rate,
        hash: hash_result,
        dkg: dkg_result,
    })
}

/// Capacities by interleaved bisection, then the latency runs (b) and (c). Returns each side's final
/// bracket (highest sustained rate = the capacity, lowest unsustained one) and the rates of (b) and
/// (c).
async fn measure(
    args: &Args,
    hash: &mut Side,
    dkg: &mut Side,
) -> anyhow::Result<([(f64, f64); 2], f64, f64)> {
    let c = args.member_capacity_rps;
    let total = c * f64::from(args.partitions);
    let step = Duration::from_secs(args.step_secs);
    // (sustained, unsustained) per side.
    let mut bounds = [(c, total * 1.05); 2];
    for _ in 0..args.bisect_steps {
        for (side, b) in [&mut *hash, &mut *dkg].into_iter().zip(&mut bounds) {
            let rate = (b.0 + b.1) / 2.0;
            let s = side.step(args, "capacity", rate, step).await?;
            if s.sustained {
                b.0 = rate;
            } else {
                b.1 = rate;
            }
        }
    }
    let [(cap_hash, _), (cap_dkg, _)] = bounds;
    let b_rate = 0.7 * cap_hash;
    let latency = Duration::from_secs(args.latency_secs);
    for _ in 0..args.latency_rounds {
        hash.step(args, AT_70PCT_HASH, b_rate, latency).await?;
        dkg.step(args, AT_70PCT_HASH, b_rate, latency).await?;
    }
    // DKG first: the hash group's backlog of (c) is never drained.
    let c_rate = 0.7 * cap_dkg;
    let overload = Duration::from_secs(args.overload_secs);
    dkg.step(args, "at_70pct_dkg", c_rate, overload).await?;
    hash.step(args, "at_70pct_dkg", c_rate, overload).await?;
    Ok((bounds, b_rate, c_rate))
}

/// Learn the DKG assignment from a prefix of the stream and publish it (epoch 1 of a fresh topic) with
/// the library's publish code. Returns its epoch and predicted imbalance.
async fn publish_learned(
    args: &Args,
    connection: &ClientConfig,
    topic: &str,
    mut keys: ZipfKeys,
) -> anyhow::Result<(u64, f64)> {
    let mut sketch = Sketch::new(&DkgConfig::default(), args.partitions)?;
    let mut key = String::with_capacity(12);
    for _ in 0..args.learn_records {
        key.clear();
        let _ = write!(key, "{}", keys.next_id());
        sketch.observe(key.as_bytes());
    }
    let epoch = 1;
    let build = sketch.build(topic, epoch, dkg_sampler::sidecar::now_ms(), None)?;
    let admin: AdminClient<DefaultClientContext> =
        connection.create().context("creating the admin client")?;
    control::ensure_control_topic(&admin, &args.control_topic, -1).await?;
    let publisher: FutureProducer = control::publisher_config(connection)
        .create()
        .context("creating the assignment publisher")?;
    control::publish_assignment(
        &publisher,
        &args.control_topic,
        &build.assignment,
        Duration::from_secs(30),
    )
    .await
    .context("publishing the learned assignment")?;
    Ok((epoch, build.predicted_imbalance))
}

async fn wait_for_assignment(
    producer: &DkgProducer,
    topic: &str,
    epoch: u64,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while producer
        .router()
        .assignment(topic)
        .is_none_or(|a| a.epoch() != epoch)
    {
        ensure!(
            Instant::now() < deadline,
            "the DkgProducer did not adopt epoch {epoch} of {topic} within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// Wait until every member of both groups owns exactly one partition.
async fn wait_members(sides: &[&Side]) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !sides.iter().all(|s| s.group.progress.one_partition_each()) {
        ensure!(
            Instant::now() < deadline,
            "the groups did not settle to one partition per member within 120 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// Least-squares slope of `(t, y)` points (units of y per unit of t); 0 with fewer than two points.
pub fn slope(points: &[(f64, f64)]) -> f64 {
    #[allow(clippy::cast_precision_loss)]
    let n = points.len() as f64;
    if points.len() < 2 {
        return 0.0;
    }
    let (mx, my) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x / n, b + y / n));
    let (num, den) = points.iter().fold((0.0, 0.0), |(num, den), (x, y)| {
        (num + (x - mx) * (y - my), den + (x - mx) * (x - mx))
    });
    if den > 0.0 { num / den } else { 0.0 }
}

/// Whether a step was sustained, from each partition's lag samples (`(seconds into the step, lag)`)
/// and its lag at the end.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Verdict {
    pub sustained: bool,
    /// The largest per-partition lag slope over the step's tail (records/s).
    pub max_slope_rps: f64,
}

/// Sustained when every partition's member kept up: the least-squares slope of its lag over the
/// samples from `from` seconds on is at most `max_slope` records/s, or its lag at the end is at most
/// what that slope would have accumulated over the step (it caught up: a transient stall of the
/// shared machine inside the window, where the lag rises and drains, is no overload; a real
/// overload fails both, its backlog growing by the excess every second).
///
/// Per member, not over the group's total lag: a group's capacity is the highest rate at which no
/// member falls behind. The total's slope is the sum of the members' excesses, so with a group
/// threshold one overloaded member may run `max_slope` over its capacity while members loaded
/// evenly share `max_slope` among them all: it flattered the group whose bottleneck is one member
/// (hash) against the group whose members all run near capacity at once (DKG), and the measured
/// ratio did not compare with the predicted limit, a ratio of the largest partition shares.
pub fn sustained(
    samples: &[Vec<(f64, f64)>],
    lags_end: &[u64],
    from: f64,
    max_slope: f64,
    length: Duration,
) -> Verdict {
    let mut verdict = Verdict {
        sustained: true,
        max_slope_rps: 0.0,
    };
    for (p, points) in samples.iter().enumerate() {
        let tail: Vec<(f64, f64)> = points.iter().copied().filter(|(t, _)| *t >= from).collect();
        let s = slope(&tail);
        verdict.max_slope_rps = verdict.max_slope_rps.max(s);
        // A partition without its end lag counts as behind (never happens: one entry each).
        #[allow(clippy::cast_precision_loss)]
        let lag_end = lags_end.get(p).map_or(f64::INFINITY, |&l| l as f64);
        // Fewer than two samples make no slope: the end lag alone decides.
        let growing = tail.len() < 2 || s > max_slope;
        if growing && lag_end > max_slope * length.as_secs_f64() {
            verdict.sustained = false;
        }
    }
    verdict
}

impl Side {
    fn new(
        name: &'static str,
        sender: Sender,
        topic: String,
        keys: ZipfKeys,
        group: Group,
        k: u32,
    ) -> Self {
        Self {
            name,
            sender,
            topic,
            keys,
            group,
            sent: 0,
            sent_by_partition: vec![0; k as usize],
            tally: Tally::new(k),
            top_key: 0,
            steps: Vec::new(),
        }
    }

    async fn group_join(&mut self) -> anyhow::Result<()> {
        let group = std::mem::replace(&mut self.group, Group::empty());
        group
            .join()
            .await
            .with_context(|| format!("the {} group", self.name))
    }

    fn processed(&self) -> u64 {
        self.group.progress.processed.load(Ordering::Relaxed)
    }

    /// Per partition: records sent to it and not processed yet.
    fn partition_lags(&self) -> impl Iterator<Item = u64> + '_ {
        let processed = &self.group.progress.processed_by_partition;
        self.sent_by_partition.iter().enumerate().map(|(p, &sent)| {
            sent.saturating_sub(processed.get(p).map_or(0, |c| c.load(Ordering::Relaxed)))
        })
    }

    /// Wait until the group processed everything sent.
    async fn drain(&self, args: &Args) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(args.drain_timeout_secs);
        while self.processed() < self.sent {
            ensure!(
                Instant::now() < deadline,
                "the {} group did not drain its backlog of {} records within {} s",
                self.name,
                self.sent - self.processed(),
                args.drain_timeout_secs
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// Offer `rate` records/s for `length` after the backlog drained; the step's measurements.
    async fn step(
        &mut self,
        args: &Args,
        phase: &'static str,
        rate: f64,
        length: Duration,
    ) -> anyhow::Result<Step> {
        self.drain(args).await?;
        drop(self.group.progress.take_latencies());
        let payload = vec![b'x'; args.value_bytes];
        let mut in_flight: VecDeque<DeliveryFuture> = VecDeque::new();
        let mut samples: Vec<(f64, f64)> = Vec::new();
        let mut partition_samples: Vec<Vec<(f64, f64)>> =
            vec![Vec::new(); self.sent_by_partition.len()];
        let mut key = String::with_capacity(12);
        let mut arrivals = Arrival::new(args.arrivals, rate, args.seed)?;
        let start = Instant::now();
        let mut next_sample = start;
        let mut sent = 0_u64;
        let mut due = arrivals.next_due();
        loop {
            if due >= length {
                break;
            }
            let now = Instant::now();
            if now >= next_sample {
                next_sample += SAMPLE_EVERY;
                #[allow(clippy::cast_precision_loss)]
                let lag = self.sent.saturating_sub(self.processed()) as f64;
                let t = (now - start).as_secs_f64();
                samples.push((t, lag));
                for (p, lag) in self.partition_lags().enumerate() {
                    #[allow(clippy::cast_precision_loss)]
                    partition_samples[p].push((t, lag as f64));
                }
            }
            let elapsed = now - start;
            if due > elapsed + Duration::from_millis(1) {
                tokio::time::sleep((due - elapsed).min(SAMPLE_EVERY)).await;
                continue;
            }
            let rank = self.keys.next_rank();
            if rank == 0 {
                self.top_key += 1;
            }
            key.clear();
            let _ = write!(key, "{}", self.keys.ids()[rank as usize]);
            let record: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(&self.topic)
                .key(key.as_bytes())
                .payload(&payload);
            // Where the record goes, for the per-partition lag, set on the record so the count is
            // exact: DKG's routing done here (the send then passes the record through as routed),
            // Kafka's placement (murmur2, as librdkafka's murmur2_random and Java's default) for the
            // hash side and for a DKG record left unplaced (its topic's partition count not known:
            // the producer's own fallback is the same function).
            let mut record = match &self.sender {
                Sender::Dkg(p) => p.route_record(record),
                Sender::Plain(_) => record,
            };
            let partition = record
                .partition
                .and_then(|p| u32::try_from(p).ok())
                .unwrap_or_else(|| {
                    #[allow(clippy::cast_possible_truncation)]
                    kafka_partition(key.as_bytes(), self.sent_by_partition.len() as u32)
                });
            record.partition = i32::try_from(partition).ok();
            let tally = &mut self.tally;
            self.sender
                .send_queued(record, &mut in_flight, async |f| tally.settle(f).await)
                .await
                .with_context(|| format!("producing to {}", self.topic))?;
            sent += 1;
            self.sent += 1;
            due = arrivals.next_due();
            if let Some(c) = self.sent_by_partition.get_mut(partition as usize) {
                *c += 1;
            }
            while in_flight.len() >= MAX_IN_FLIGHT {
                if let Some(f) = in_flight.pop_front() {
                    self.tally.settle(f).await;
                }
            }
            if sent.is_multiple_of(1024) {
                tokio::task::yield_now().await;
            }
        }
        let sent_for = start.elapsed();
        self.sender
            .flush(Duration::from_secs(60))
            .context("flushing the producer")?;
        for f in in_flight.drain(..) {
            self.tally.settle(f).await;
        }
        if let Some(first) = &self.tally.first_error {
            bail!(
                "{} records to {} were not delivered; first error: {first}",
                self.tally.failed,
                self.topic
            );
        }
        // Every record acknowledged where the driver counted it (the per-partition lag is exact).
        ensure!(
            self.tally.per_partition == self.sent_by_partition,
            "{}: records acknowledged per partition {:?} differ from those sent {:?}",
            self.topic,
            self.tally.per_partition,
            self.sent_by_partition
        );
        let ack_tail = start.elapsed() - sent_for;
        #[allow(clippy::cast_precision_loss)]
        let achieved = sent as f64 / sent_for.as_secs_f64();
        let from = length.as_secs_f64() / 3.0;
        let tail: Vec<(f64, f64)> = samples
            .iter()
            .copied()
            .filter(|(t, _)| *t >= from)
            .collect();
        let lag_slope = slope(&tail);
        let max_slope = args.lag_slope_max_ratio * args.member_capacity_rps;
        let lag_end = self.sent.saturating_sub(self.processed());
        let lags_end: Vec<u64> = self.partition_lags().collect();
        let verdict = sustained(&partition_samples, &lags_end, from, max_slope, length);
        let step = Step {
            phase,
            offered_rps: rate,
            achieved_rps: achieved,
            ack_tail_ms: u64::try_from(ack_tail.as_millis()).unwrap_or(u64::MAX),
            lag_slope_rps: lag_slope,
            max_partition_lag_slope_rps: verdict.max_slope_rps,
            sustained: verdict.sustained,
            lag_end,
            latency_ms: Latency::of_samples(&self.group.progress.take_latencies()),
        };
        tracing::info!(
            side = self.name,
            phase,
            offered = rate,
            achieved,
            lag_slope,
            max_partition_lag_slope = verdict.max_slope_rps,
            sustained = step.sustained,
            p99_ms = step.latency_ms.p99,
            "step"
        );
        ensure!(
            args.no_pace_check
                || (achieved >= args.min_delivered_ratio * rate && ack_tail <= MAX_ACK_TAIL),
            "the {} producer sent {achieved:.0} records/s of the {rate:.0} offered (--min-delivered-ratio {}), the last \
             acknowledged {} ms after the last send (at most {} ms allowed): the broker or the machine, not the \
             group, limited this step",
            self.name,
            args.min_delivered_ratio,
            ack_tail.as_millis(),
            MAX_ACK_TAIL.as_millis()
        );
        self.steps.push(step.clone());
        Ok(step)
    }

    fn result(&self, (capacity_rps, unsustained_rps): (f64, f64)) -> SideResult {
        #[allow(clippy::cast_precision_loss)]
        let loads: Vec<f64> = self.tally.per_partition.iter().map(|&c| c as f64).collect();
        let total: u64 = self.tally.per_partition.iter().sum();
        #[allow(clippy::cast_precision_loss)]
        let max_share = self.tally.per_partition.iter().copied().max().unwrap_or(0) as f64
            / total.max(1) as f64;
        SideResult {
            topic: self.topic.clone(),
            capacity_rps,
            unsustained_rps,
            per_partition: self.tally.per_partition.clone(),
            imbalance: imbalance(&loads),
            max_share,
            assignment_epoch: None,
            predicted_imbalance: None,
            receive_errors: self.group.progress.errors.load(Ordering::Relaxed),
            steps: self.steps.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{slope, sustained};

    /// A step of 12 s sampled every 0.25 s: each partition's lag as a function of the time, and
    /// its lag at the end (t = 12).
    fn lags(curves: &[fn(f64) -> f64]) -> (Vec<Vec<(f64, f64)>>, Vec<u64>) {
        let samples = curves
            .iter()
            .map(|lag| {
                (0..48)
                    .map(|i| {
                        let t = f64::from(i) * 0.25;
                        (t, lag(t))
                    })
                    .collect()
            })
            .collect();
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let ends = curves.iter().map(|lag| lag(12.0).max(0.0) as u64).collect();
        (samples, ends)
    }

    #[test]
    fn sustained_means_no_member_falls_behind() {
        // (case, each partition's lag over time, sustained); threshold 100/s, judged from t = 4 s
        // on, a step of 12 s (so an end lag up to 1,200 counts as caught up).
        type Case<'a> = (&'a str, &'a [fn(f64) -> f64], bool);
        let flat: fn(f64) -> f64 = |_| 10.0;
        let grow20: fn(f64) -> f64 = |t| 20.0 * t;
        let cases: &[Case<'_>] = &[
            ("all flat", &[flat; 12], true),
            (
                "one member 150/s over its capacity: behind",
                &[|t| 150.0 * t, flat, flat],
                false,
            ),
            // Twelve members 20/s over each: the group's total grows 240/s, which a group
            // threshold would call an overload; no member is behind.
            ("twelve members 20/s over each", &[grow20; 12], true),
            // The lag rose through the tail (slope ~240/s over it) and was back to 50 when the
            // step ended: a stall of the machine, not an overload.
            (
                "a stall late in the tail that drained by the end",
                &[
                    |t| {
                        if t >= 11.9 {
                            50.0
                        } else {
                            500.0 * (t - 8.0).max(0.0)
                        }
                    },
                    flat,
                ],
                true,
            ),
            (
                "a backlog from before the tail that no longer grows",
                &[|t| 5000.0 + 50.0 * t, flat],
                true,
            ),
            (
                "a jump before the tail, flat after it",
                &[|t| if t < 3.0 { 1000.0 * t } else { 3000.0 }, flat],
                true,
            ),
            (
                "a member that fell behind late in the step",
                &[flat, |t| 300.0 * (t - 6.0).max(0.0)],
                false,
            ),
        ];
        for (case, curves, want) in cases {
            let (samples, ends) = lags(curves);
            let v = sustained(&samples, &ends, 4.0, 100.0, Duration::from_secs(12));
            assert_eq!(v.sustained, *want, "{case}: {v:?} (end lags {ends:?})");
        }
        // The reported slope is the fastest partition's.
        let (samples, ends) = lags(&[|t| 30.0 * t, |t| 70.0 * t, flat]);
        let v = sustained(&samples, &ends, 4.0, 100.0, Duration::from_secs(12));
        assert!((v.max_slope_rps - 70.0).abs() < 1e-6, "{v:?}");
        // Without samples in the tail only the end lag decides.
        let none: Vec<Vec<(f64, f64)>> = vec![Vec::new(); 2];
        let short = Duration::from_secs(12);
        assert!(sustained(&none, &[0, 1200], 4.0, 100.0, short).sustained);
        assert!(!sustained(&none, &[0, 1201], 4.0, 100.0, short).sustained);
    }

    #[test]
    fn slope_is_the_least_squares_fit() {
        let line: Vec<(f64, f64)> = (0..20)
            .map(|i| (f64::from(i) * 0.25, 100.0 + 40.0 * f64::from(i) * 0.25))
            .collect();
        assert!((slope(&line) - 40.0).abs() < 1e-9);
        // Noise around a flat lag fits a slope near 0.
        let flat: Vec<(f64, f64)> = (0..20)
            .map(|i| (f64::from(i), if i % 2 == 0 { 10.0 } else { 30.0 }))
            .collect();
        assert!(slope(&flat).abs() < 1.1);
        assert_eq!(slope(&[(1.0, 5.0)]), 0.0);
        assert_eq!(slope(&[(1.0, 5.0), (1.0, 9.0)]), 0.0);
    }
}

/// The due times of one step's records, from its start (`--arrivals`).
struct Arrival {
    kind: Arrivals,
    rate: f64,
    /// Records drawn so far (paced) / the last due time in seconds (Poisson).
    n: u64,
    at_secs: f64,
    gaps: rand_distr::Exp<f64>,
    rng: rand_chacha::ChaCha8Rng,
}

impl Arrival {
    /// The arrivals of a step at `rate` records/s. Poisson gaps come from a generator seeded by
    /// `seed` and the rate, so both groups' steps at one rate see the same sequence.
    fn new(kind: Arrivals, rate: f64, seed: u64) -> anyhow::Result<Self> {
        use rand::SeedableRng;
        ensure!(
            rate.is_finite() && rate > 0.0,
            "an offered rate must be positive, got {rate}"
        );
        Ok(Self {
            kind,
            rate,
            n: 0,
            at_secs: 0.0,
            gaps: rand_distr::Exp::new(rate)
                .map_err(|e| anyhow::anyhow!("arrivals at {rate} records/s: {e}"))?,
            rng: rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ rate.to_bits()),
        })
    }

    /// When the next record is due.
    fn next_due(&mut self) -> Duration {
        use rand::Rng as _;
        let secs = match self.kind {
            Arrivals::Paced => {
                #[allow(clippy::cast_precision_loss)]
                let t = self.n as f64 / self.rate;
                self.n += 1;
                t
            }
            Arrivals::Poisson => {
                self.at_secs += self.rng.sample(self.gaps);
                self.at_secs
            }
        };
        Duration::from_secs_f64(secs)
    }
}

#[cfg(test)]
mod arrival_tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn both_arrival_processes_offer_the_rate_and_poisson_repeats_per_seed() {
        let rate = 5_000.0;
        let n = 50_000;
        for kind in [Arrivals::Paced, Arrivals::Poisson] {
            let mut a = Arrival::new(kind, rate, 7).unwrap();
            let dues: Vec<Duration> = (0..n).map(|_| a.next_due()).collect();
            assert!(
                dues.windows(2).all(|w| w[0] <= w[1]),
                "{kind:?}: due times never go back"
            );
            #[allow(clippy::cast_precision_loss)]
            let offered = n as f64 / dues[n - 1].as_secs_f64();
            assert!(
                (offered / rate - 1.0).abs() < 0.02,
                "{kind:?}: {offered} records/s"
            );
        }
        let draw = |seed| {
            let mut a = Arrival::new(Arrivals::Poisson, rate, seed).unwrap();
            (0..100).map(|_| a.next_due()).collect::<Vec<_>>()
        };
        assert_eq!(draw(3), draw(3), "one sequence per seed and rate");
        assert_ne!(draw(3), draw(4));
        // Poisson gaps vary (coefficient of variation 1), paced ones do not.
        let gaps: Vec<f64> = draw(3)
            .windows(2)
            .map(|w| (w[1] - w[0]).as_secs_f64())
            .collect();
        let mean = gaps.iter().sum::<f64>() / 99.0;
        let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / 99.0).sqrt();
        assert!(sd / mean > 0.6, "coefficient of variation {}", sd / mean);
        assert!(Arrival::new(Arrivals::Poisson, 0.0, 1).is_err());
    }
}
