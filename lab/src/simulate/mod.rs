//! `dkg-lab simulate`: what DKG would do for a key distribution, against Kafka's hash partitioner,
//! the full-knowledge optimum and the key-grouping lower bound.
//!
//! Method (the DKG paper's evaluation, see shared paper notes): for each stream, DKG learns on the first
//! `--learn-fraction` of the records (SpaceSaving + bucket counters, [`dkg_core::dkg::Sketch`]),
//! builds one assignment, and the load imbalance `lambda = max_i L_i / (m / k) - 1` is measured over the
//! WHOLE stream with that assignment, learning prefix included. A live producer cannot do that: it
//! routes the prefix by Kafka's hash until the first assignment is published; over a long-running topic
//! the prefix is negligible.
//!
//! Streams: Zipf over `--n` keys (ranks randomly permuted to ids, keys are the ids' decimal strings),
//! `--m` i.i.d. records per seed; or real traces (`--trace`, one key per line). For every (stream, k)
//! each algorithm of [`Algorithm`] is evaluated; results are averaged over seeds (mean and worst).
//!
//! Record sizes (`--value-bytes`, [`sizes`]): each key gets one value size drawn independently of its
//! rank; every algorithm's record AND byte imbalance is then reported, and `--weight bytes` makes the
//! learning algorithms (DKG's sketch, LPT, pkg's choice) balance bytes instead of records, as
//! `dkg-sampler run --weight bytes` does.
//!
//! Streams are independent of k, so a job is one (alpha, seed) stream evaluated for every k (a trace is
//! split per k instead); jobs run on `--threads` scoped threads.

mod algorithms;
pub(crate) mod plot;
mod report;
mod sizes;
mod stream;

use std::collections::BTreeMap;
use std::io::Write;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{Context, bail, ensure};
use dkg_core::dkg::{default_mu, default_theta};

pub use algorithms::{Algorithm, DkgOverrides, ThetaRule};
use algorithms::{Outcome, Prepared, bound, dkg_config};
use report::{Cell, Row};
pub use sizes::ValueBytes;
use stream::Stream;
use stream::ZipfSpec;

use dkg_sampler::sidecar::window::Weight;

/// Arguments of `dkg-lab simulate`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
    dkg-lab simulate                                  # the full default grid, as a table\n  \
    dkg-lab simulate --alpha 1.0 --k 10,50 --json     # JSON lines\n  \
    dkg-lab simulate --plot docs/simulate.png         # table + chart\n  \
    dkg-lab simulate --trace keys.txt --k 8,32        # a real key trace")]
pub struct Args {
    /// Zipf exponents alpha to simulate (comma-separated; p_i ~ 1/i^alpha, 0 = uniform). Not
    /// applicable with --trace.
    #[arg(
        long,
        env = "DKG_SIM_ALPHA",
        value_delimiter = ',',
        value_parser = parse_alpha,
        allow_negative_numbers = true,
        default_values_t = [0.5, 0.8, 1.0, 1.2, 1.5, 2.0],
        conflicts_with = "trace"
    )]
    pub alpha: Vec<f64>,

    /// Partition counts k (comma-separated).
    #[arg(
        long,
        env = "DKG_SIM_K",
        value_delimiter = ',',
        value_parser = parse_partitions,
        allow_negative_numbers = true,
        default_values_t = [5, 10, 20, 50, 100]
    )]
    pub k: Vec<u32>,

    /// Distinct keys (key universe) of each Zipf stream.
    #[arg(long, env = "DKG_SIM_N", default_value_t = 10_000, value_parser = parse_keys, conflicts_with = "trace")]
    pub n: u32,

    /// Records per Zipf stream (a trace always uses all its lines).
    #[arg(long, env = "DKG_SIM_M", default_value_t = 1_000_000, value_parser = parse_records, conflicts_with = "trace")]
    pub m: usize,

    /// Independent Zipf streams per cell (key permutation and draws differ); results are the mean and
    /// the worst over them. A trace is evaluated once.
    #[arg(long, env = "DKG_SIM_SEEDS", default_value_t = NonZeroUsize::MIN.saturating_add(2), conflicts_with = "trace")]
    pub seeds: NonZeroUsize,

    /// RNG seed of the first stream; stream j uses rng-seed + j (ChaCha8, reproducible).
    #[arg(long, env = "DKG_SIM_RNG_SEED", default_value_t = 1)]
    pub rng_seed: u64,

    /// Heavy-hitter threshold theta for the `dkg` algorithm: a share of the learned records (`0.05`)
    /// or a rule scaling with the partition count (`0.5/k`). Default: the project's `default_theta(k)`.
    #[arg(long, env = "DKG_SIM_THETA", allow_negative_numbers = true)]
    pub theta: Option<ThetaRule>,

    /// Buckets per partition mu for the `dkg` algorithm (buckets = ceil(mu * k)). Default: the
    /// project's `default_mu(k)` (64, lower above about 1,600 partitions).
    #[arg(long, env = "DKG_SIM_MU", value_parser = parse_mu, allow_negative_numbers = true)]
    pub mu: Option<f64>,

    /// Share of each stream (its first records) that DKG and lpt-learn learn on, in (0, 1].
    #[arg(long, env = "DKG_SIM_LEARN_FRACTION", default_value_t = 0.1, value_parser = parse_fraction, allow_negative_numbers = true)]
    pub learn_fraction: f64,

    /// Key trace file: one key per line, the key being the line's bytes without `\n` / `\r\n`.
    /// Repeatable; replaces the Zipf streams.
    #[arg(long, env = "DKG_SIM_TRACE", value_name = "FILE")]
    pub trace: Vec<PathBuf>,

    /// Algorithms to evaluate (comma-separated), in output column order.
    #[arg(
        long,
        env = "DKG_SIM_ALGORITHMS",
        value_delimiter = ',',
        default_values_t = Algorithm::ALL
    )]
    pub algorithms: Vec<Algorithm>,

    /// Give every key one value size drawn from this distribution, independently of the key's rank (so
    /// the keys heavy in bytes are not the keys heavy in records): `fixed:N` or `lognormal:MU,SIGMA`
    /// (median e^MU bytes). Adds each algorithm's byte imbalance to the output (`<algorithm>:bytes`
    /// columns). Seeded like the streams.
    #[arg(long, env = "DKG_SIM_VALUE_BYTES", value_name = "SPEC")]
    pub value_bytes: Option<ValueBytes>,

    /// What the learning algorithms balance: `records` or `bytes` (key + value sizes, needs
    /// --value-bytes), like `dkg-sampler run --weight`.
    #[arg(long, env = "DKG_SIM_WEIGHT", value_enum, default_value_t = Weight::Records)]
    pub weight: Weight,

    /// Print one JSON object per (source, alpha, k, algorithm) instead of the table.
    #[arg(long, env = "DKG_SIM_JSON")]
    pub json: bool,

    /// Also draw lambda against alpha (one panel per k) into this PNG file. Zipf streams only.
    #[arg(
        long,
        env = "DKG_SIM_PLOT",
        value_name = "FILE.png",
        conflicts_with = "trace"
    )]
    pub plot: Option<PathBuf>,

    /// Worker threads (default: the available cores).
    #[arg(long, env = "DKG_SIM_THREADS")]
    pub threads: Option<NonZeroUsize>,
}

fn parse_alpha(s: &str) -> Result<f64, String> {
    let a: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number"))?;
    if (0.0..=100.0).contains(&a) {
        Ok(a)
    } else {
        Err(format!("alpha must be in [0, 100], got {a}"))
    }
}

fn parse_partitions(s: &str) -> Result<u32, String> {
    let k: u32 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a partition count"))?;
    if (1..=100_000).contains(&k) {
        Ok(k)
    } else {
        Err(format!("k must be between 1 and 100000, got {k}"))
    }
}

fn parse_keys(s: &str) -> Result<u32, String> {
    let n: u32 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a key count"))?;
    if (1..=100_000_000).contains(&n) {
        Ok(n)
    } else {
        Err(format!("n must be between 1 and 10^8, got {n}"))
    }
}

fn parse_records(s: &str) -> Result<usize, String> {
    let m: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a record count"))?;
    if (1..=1_000_000_000).contains(&m) {
        Ok(m)
    } else {
        Err(format!("m must be between 1 and 10^9, got {m}"))
    }
}

fn parse_mu(s: &str) -> Result<f64, String> {
    let mu: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number"))?;
    if mu.is_finite() && mu > 0.0 {
        Ok(mu)
    } else {
        Err(format!("mu must be a positive number, got {mu}"))
    }
}

fn parse_fraction(s: &str) -> Result<f64, String> {
    let f: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number"))?;
    if f.is_finite() && f > 0.0 && f <= 1.0 {
        Ok(f)
    } else {
        Err(format!("the learn fraction must be in (0, 1], got {f}"))
    }
}

/// Keeps the first occurrence of each value.
fn dedup<T: PartialEq + Copy>(xs: &[T]) -> Vec<T> {
    let mut out: Vec<T> = Vec::with_capacity(xs.len());
    for &x in xs {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

/// A stream source: one Zipf exponent, or one loaded trace.
#[derive(Debug)]
enum Source {
    Zipf { alpha: f64 },
    Trace { label: String, stream: Stream },
}

/// A unit of work for one thread.
#[derive(Clone, Copy, Debug)]
enum Job {
    /// Generate Zipf source `source` with seed index `seed`, evaluate every k.
    Zipf { source: usize, seed: usize },
    /// Evaluate trace source `source` for k index `k`.
    Trace { source: usize, k: usize },
}

/// One algorithm's result on one (source, k, seed).
#[derive(Debug)]
struct Measurement {
    source: usize,
    k: usize,
    seed: usize,
    algorithm: Algorithm,
    outcome: Outcome,
    bound: f64,
}

/// The validated plan of a run.
#[derive(Debug)]
struct Plan {
    sources: Vec<Source>,
    ks: Vec<u32>,
    algorithms: Vec<Algorithm>,
    overrides: DkgOverrides,
    n: u32,
    m: usize,
    seeds: usize,
    rng_seed: u64,
    learn_fraction: f64,
    value_bytes: Option<ValueBytes>,
    weight: Weight,
}

impl Plan {
    fn jobs(&self) -> Vec<Job> {
        let mut jobs = Vec::new();
        for (source, s) in self.sources.iter().enumerate() {
            match s {
                Source::Zipf { .. } => {
                    jobs.extend((0..self.seeds).map(|seed| Job::Zipf { source, seed }))
                }
                Source::Trace { .. } => {
                    jobs.extend((0..self.ks.len()).map(|k| Job::Trace { source, k }))
                }
            }
        }
        jobs
    }

    /// The RNG seed of stream `seed` (its key draws and its value sizes).
    fn stream_seed(&self, seed: usize) -> u64 {
        self.rng_seed.wrapping_add(seed as u64)
    }

    fn evaluate(
        &self,
        stream: &Stream,
        source: usize,
        seed: usize,
        k_indices: impl Iterator<Item = usize>,
    ) -> anyhow::Result<Vec<Measurement>> {
        let mut prepared = Prepared::new(stream, self.learn_fraction);
        if let Some(spec) = self.value_bytes {
            let value_bytes = spec.draw(stream.distinct(), self.stream_seed(seed));
            prepared = prepared.with_sizes(&value_bytes, self.weight);
        }
        let weighted = prepared.weighted();
        let mut out = Vec::new();
        for k_index in k_indices {
            let k = self.ks[k_index];
            let bound = bound(&weighted, k);
            for &algorithm in &self.algorithms {
                let outcome = prepared.evaluate(algorithm, k, &self.overrides)?;
                out.push(Measurement {
                    source,
                    k: k_index,
                    seed,
                    algorithm,
                    outcome,
                    bound,
                });
            }
        }
        Ok(out)
    }

    fn run_job(&self, job: Job) -> anyhow::Result<Vec<Measurement>> {
        match job {
            Job::Zipf { source, seed } => {
                let Source::Zipf { alpha } = self.sources[source] else {
                    bail!("internal error: Zipf job on a trace source");
                };
                let spec = ZipfSpec {
                    n: self.n,
                    alpha,
                    m: self.m,
                    seed: self.stream_seed(seed),
                };
                let stream = stream::generate(&spec)
                    .with_context(|| format!("cannot build a Zipf distribution for {spec:?}"))?;
                self.evaluate(&stream, source, seed, 0..self.ks.len())
            }
            Job::Trace { source, k } => {
                let Source::Trace { stream, .. } = &self.sources[source] else {
                    bail!("internal error: trace job on a Zipf source");
                };
                self.evaluate(stream, source, 0, std::iter::once(k))
            }
        }
    }

    /// Runs every job on `threads` threads; the first error stops the others.
    fn run(&self, threads: usize) -> anyhow::Result<Vec<Measurement>> {
        let jobs = self.jobs();
        let next = AtomicUsize::new(0);
        let failed = AtomicBool::new(false);
        let results = Mutex::new(Vec::new());
        let errors = Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for _ in 0..threads.min(jobs.len()).max(1) {
                scope.spawn(|| {
                    while !failed.load(Ordering::Relaxed) {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&job) = jobs.get(i) else { break };
                        let started = Instant::now();
                        match self.run_job(job) {
                            Ok(measurements) => {
                                tracing::debug!(?job, elapsed = ?started.elapsed(), "job done");
                                if let Ok(mut r) = results.lock() {
                                    r.extend(measurements);
                                }
                            }
                            Err(e) => {
                                failed.store(true, Ordering::Relaxed);
                                if let Ok(mut errs) = errors.lock() {
                                    errs.push(e);
                                }
                            }
                        }
                    }
                });
            }
        });
        let errors = errors
            .into_inner()
            .map_err(|_| anyhow::anyhow!("a worker panicked"))?;
        if let Some(e) = errors.into_iter().next() {
            return Err(e);
        }
        results
            .into_inner()
            .map_err(|_| anyhow::anyhow!("a worker panicked"))
    }

    /// Groups measurements into rows: by source, k, then algorithm, in plan order.
    fn rows(&self, measurements: Vec<Measurement>) -> Vec<Row> {
        let order = |a: Algorithm| {
            self.algorithms
                .iter()
                .position(|&x| x == a)
                .unwrap_or(usize::MAX)
        };
        let mut groups: BTreeMap<(usize, usize, usize), Vec<Measurement>> = BTreeMap::new();
        for m in measurements {
            groups
                .entry((m.source, m.k, order(m.algorithm)))
                .or_default()
                .push(m);
        }
        groups
            .into_values()
            .filter_map(|mut ms| {
                ms.sort_by_key(|m| m.seed);
                let first = ms.first()?;
                let (source, k) = (&self.sources[first.source], self.ks[first.k]);
                let algorithm = first.algorithm;
                let cell = match source {
                    Source::Zipf { alpha } => Cell {
                        source: "zipf".to_string(),
                        alpha: Some(*alpha),
                        k,
                        n: self.n as usize,
                        m: self.m,
                    },
                    Source::Trace { label, stream } => Cell {
                        source: label.clone(),
                        alpha: None,
                        k,
                        n: stream.distinct(),
                        m: stream.len(),
                    },
                };
                let config = dkg_config(algorithm, k, &self.overrides);
                Some(Row {
                    cell,
                    algorithm,
                    theta: config.as_ref().map(|c| c.theta_for(k)),
                    mu: config.as_ref().map(|c| c.mu_for(k)),
                    learn_fraction: self.learn_fraction,
                    bounds: ms.iter().map(|m| m.bound).collect(),
                    outcomes: ms.iter().map(|m| m.outcome).collect(),
                    weight: self.value_bytes.map(|_| self.weight.as_str()),
                })
            })
            .collect()
    }

    /// A few lines describing the run (table header, plot legend).
    fn describe(&self) -> String {
        // `name(k): k=5: .., k=10: ..` for a default rule, the override as given otherwise.
        let per_k = |name: &str, rule: fn(u32) -> f64| {
            let values: Vec<String> = self
                .ks
                .iter()
                .map(|&k| format!("k={k}: {}", rule(k)))
                .collect();
            format!("{name}(k): {}", values.join(", "))
        };
        let mu = match self.overrides.mu {
            Some(mu) => format!("mu {mu}"),
            None => per_k("mu default_mu", default_mu),
        };
        let theta = match self.overrides.theta {
            Some(rule) => format!("theta {rule}"),
            None => per_k("theta default_theta", default_theta),
        };
        let zipf = self
            .sources
            .iter()
            .any(|s| matches!(s, Source::Zipf { .. }));
        let shape = if zipf {
            format!(
                "Zipf streams: n={} keys, m={} records, {} seeds",
                self.n, self.m, self.seeds
            )
        } else {
            format!("{} trace(s), evaluated once", self.sources.len())
        };
        let mut text = format!(
            "{shape}\nlearn on the first {:.1}% of each stream, lambda over all of it\ndkg: {mu}\ndkg: {theta}",
            self.learn_fraction * 100.0
        );
        if let Some(spec) = self.value_bytes {
            text.push_str(&format!(
                "\nvalue sizes per key: {spec} bytes (independent of rank); balancing {}; \
                 <algorithm>:bytes = the byte imbalance",
                self.weight.as_str()
            ));
        }
        text
    }
}

/// Runs `simulate`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let algorithms = dedup(&args.algorithms);
    let ks = dedup(&args.k);
    let alphas = dedup(&args.alpha);
    ensure!(!algorithms.is_empty(), "--algorithms is empty");
    ensure!(!ks.is_empty(), "--k is empty");
    ensure!(
        args.weight == Weight::Records || args.value_bytes.is_some(),
        "--weight bytes needs record sizes: give --value-bytes (e.g. lognormal:6,1.5)"
    );

    let sources: Vec<Source> = if args.trace.is_empty() {
        ensure!(!alphas.is_empty(), "--alpha is empty");
        alphas
            .into_iter()
            .map(|alpha| Source::Zipf { alpha })
            .collect()
    } else {
        args.trace
            .iter()
            .map(|path| {
                let stream = Stream::from_trace_file(path)?;
                tracing::info!(
                    trace = %path.display(),
                    records = stream.len(),
                    distinct_keys = stream.distinct(),
                    "loaded trace"
                );
                Ok(Source::Trace {
                    label: path.display().to_string(),
                    stream,
                })
            })
            .collect::<anyhow::Result<_>>()?
    };
    let seeds = if args.trace.is_empty() {
        args.seeds.get()
    } else {
        1
    };
    let plan = Plan {
        sources,
        ks,
        algorithms,
        overrides: DkgOverrides {
            theta: args.theta,
            mu: args.mu,
        },
        n: args.n,
        m: args.m,
        seeds,
        rng_seed: args.rng_seed,
        learn_fraction: args.learn_fraction,
        value_bytes: args.value_bytes,
        weight: args.weight,
    };
    let threads = args
        .threads
        .or_else(|| std::thread::available_parallelism().ok())
        .map_or(1, NonZeroUsize::get);

    let started = Instant::now();
    tracing::info!(
        jobs = plan.jobs().len(),
        threads,
        "simulating: {}",
        plan.describe().replace('\n', "; ")
    );
    let measurements = plan.run(threads)?;
    let rows = plan.rows(measurements);
    tracing::info!(
        elapsed_secs = started.elapsed().as_secs_f64(),
        "simulation done"
    );

    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if args.json {
        report::write_json(&mut out, &rows)?;
    } else {
        for line in plan.describe().lines() {
            writeln!(out, "# {line}")?;
        }
        writeln!(
            out,
            "# lambda = max partition load / mean - 1, percent: mean (worst) over seeds"
        )?;
        report::write_table(&mut out, &rows, &plan.algorithms)?;
        report::write_legend(&mut out, &rows, &plan.algorithms)?;
    }
    out.flush()?;

    if let Some(path) = &args.plot {
        plot::draw(path, &rows, &plan.algorithms, &plan.describe())
            .with_context(|| format!("cannot write the plot {}", path.display()))?;
        tracing::info!(plot = %path.display(), "plot written");
    }
    Ok(())
}
