//! Least privilege (docs/security.md) on the SASL/SCRAM broker of `scripts/kafka sasl`, where a
//! principal without an ACL is denied: every role works with exactly its documented ACL set
//! (dkg-testkit's `Role::acls`), fails with an authorization error when any one of them is missing,
//! and a sampler that may not write the control topic (or use its transactional id) publishes
//! nothing. Secrets given to the sampler never show in `--help`, its log or its HTTP endpoints.
//!
//! One broker for the whole file; every test has its own topics and users, and all users and ACLs
//! of a test are applied in one batch (one JVM).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use common::wait_for;
use common::{Sampler, read_keyed_with};
use dkg_partitioner::kafka::control::control_topic_spec;
use dkg_partitioner::kafka::topic::TopicSpec;
use dkg_partitioner::{DkgConsumer, DkgProducer};
use dkg_testkit::broker::unique_topic;
use dkg_testkit::sasl::{
    Acl, Grants, Names, Operation, Resource, Role, SaslBroker, User, sasl_broker,
};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer as _};

/// How long a role gets to show that it works, or that it fails.
const DEADLINE: Duration = Duration::from_secs(60);
/// Client start-up limit in the failure cases (a denied read surfaces as a timeout at worst).
const STARTUP: Duration = Duration::from_secs(15);

fn names(prefix: &str) -> Names {
    let topic = unique_topic(prefix);
    Names {
        control_topic: format!("{topic}.assignments"),
        sketches_topic: format!("{topic}.sketches"),
        handoff_topic: format!("{topic}.handoff"),
        group: format!("dkg-sampler.{topic}"),
        transactional_id: format!("dkg-sampler.{topic}"),
        topic,
    }
}

/// The consumer role's names: its own application group.
fn consumer_names(n: &Names) -> Names {
    Names {
        group: format!("app.{}", n.topic),
        ..n.clone()
    }
}

/// The data topic and, as the admin, the protocol topics (least privilege: no client creates them).
async fn create_topics(broker: &SaslBroker, n: &Names) {
    broker
        .create_topic(&TopicSpec::new(&n.topic, 3).replication(1))
        .await;
    broker
        .create_topic(&control_topic_spec(&n.control_topic, 1))
        .await;
    broker
        .create_topic(&control_topic_spec(&n.handoff_topic, 1))
        .await;
    broker
        .create_topic(&TopicSpec::compacted(&n.sketches_topic, 17 * 1024 * 1024).replication(1))
        .await;
}

/// `count` skewed keyed records into the data topic as the admin.
async fn seed(broker: &SaslBroker, topic: &str, count: usize) {
    let producer: FutureProducer = broker.config(broker.admin()).create().unwrap();
    // All enqueued, then every delivery awaited: one round trip per batch, not per record.
    let deliveries: Vec<_> = (0..count)
        .map(|i| {
            let key = format!("k{}", if i % 2 == 0 { 0 } else { i % 50 });
            producer
                .send_result(FutureRecord::to(topic).key(&key).payload("v"))
                .map_err(|(e, _)| e)
                .expect("the admin enqueues")
        })
        .collect();
    for delivery in deliveries {
        delivery
            .await
            .expect("the producer is alive")
            .map_err(|(e, _)| e)
            .expect("the admin produces");
    }
}

/// The sampler's connection settings other than the bootstrap: the password in a private
/// properties file (`--kafka-config-file`), the rest as `DKG_KAFKA_CONFIG` lines.
struct SamplerConfig {
    file: PathBuf,
    env: String,
}

impl SamplerConfig {
    fn new(broker: &SaslBroker, user: &User) -> Self {
        let file = std::env::temp_dir().join(format!("{}.properties", user.name));
        let mut secret = String::from("# the sampler's secret settings\n");
        let mut env = Vec::new();
        for (k, v) in broker.settings(user) {
            match k {
                "sasl.password" => secret.push_str(&format!("{k}={v}\n")),
                "bootstrap.servers" => {}
                _ => env.push(format!("{k}={v}")),
            }
        }
        std::fs::write(&file, secret).unwrap();
        Self {
            file,
            env: env.join("\n"),
        }
    }

    fn env(&self) -> [(&str, &str); 2] {
        [
            ("DKG_KAFKA_CONFIG", self.env.as_str()),
            ("DKG_KAFKA_CONFIG_FILE", self.file.to_str().unwrap()),
        ]
    }
}

impl Drop for SamplerConfig {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.file);
    }
}

fn start_sampler(
    broker: &SaslBroker,
    name: &str,
    n: &Names,
    user: &User,
    extra: &[&str],
) -> (Sampler, SamplerConfig) {
    let config = SamplerConfig::new(broker, user);
    let mut args = vec![
        "--control-topic",
        &n.control_topic,
        "--sketches-topic",
        &n.sketches_topic,
        "--group-id",
        &n.group,
        "--interval-secs",
        "1",
        "--auto-offset-reset",
        "earliest",
        "--min-samples",
        "100",
    ];
    args.extend_from_slice(extra);
    let sampler = Sampler::start_on(broker.bootstrap(), name, &n.topic, &args, &config.env());
    (sampler, config)
}

/// Every record of the control topic for `n.topic`, read uncommitted (so even an aborted
/// publication would show), as the admin.
fn control_records(broker: &SaslBroker, n: &Names) -> usize {
    read_keyed_with(
        broker.config(broker.admin()),
        &n.control_topic,
        false,
        |k| k == n.topic.as_bytes(),
    )
    .len()
}

/// Build a producer as `user`, send one record; the first error, as text.
async fn exercise_producer(
    broker: &SaslBroker,
    n: &Names,
    user: &User,
    ordering: bool,
) -> Result<DkgProducer, String> {
    let producer = DkgProducer::builder(broker.config(user))
        .control_topic(&n.control_topic)
        .topics([n.topic.as_str()])
        .ordering(ordering)
        .handoff_topic(&n.handoff_topic)
        .startup_timeout(STARTUP)
        .build()
        .await
        .map_err(|e| format!("build: {e}"))?;
    producer
        .send(FutureRecord::to(&n.topic).key("k0").payload("p"), STARTUP)
        .await
        .map_err(|(e, _)| {
            // A fatal error (the idempotent producer could not get its id) says why here only.
            let fatal = producer.inner().client().fatal_error();
            format!("send: {e}; fatal: {fatal:?}")
        })?;
    Ok(producer)
}

/// Build a consumer as `user`, receive `want` records, commit, close; the first error, as text.
async fn exercise_consumer(
    broker: &SaslBroker,
    n: &Names,
    user: &User,
    want: usize,
) -> Result<usize, String> {
    let mut config = broker.config(user);
    config.set("auto.offset.reset", "earliest");
    let mut consumer = DkgConsumer::builder(config)
        .topic(&n.topic)
        .group(&n.group)
        .control_topic(&n.control_topic)
        .handoff_topic(&n.handoff_topic)
        .startup_timeout(STARTUP)
        .build()
        .await
        .map_err(|e| format!("build: {e}"))?;
    let mut got = 0;
    let deadline = tokio::time::Instant::now() + STARTUP * 2;
    while got < want {
        match tokio::time::timeout_at(deadline, consumer.recv()).await {
            Ok(Ok(_)) => got += 1,
            Ok(Err(e)) => return Err(format!("recv: {e}")),
            Err(_) => return Err(format!("received {got} of {want} records")),
        }
    }
    consumer
        .commit()
        .await
        .map_err(|e| format!("commit: {e}"))?;
    consumer.close().await.map_err(|e| format!("close: {e}"))?;
    Ok(got)
}

fn authorization_error(text: &str) -> bool {
    text.to_ascii_lowercase().contains("authoriz")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_role_works_with_exactly_its_acl_set_and_secrets_stay_hidden() {
    let broker = sasl_broker();
    let n = names("lp-roles");
    let cn = consumer_names(&n);
    create_topics(broker, &n).await;
    let [sampler, producer, ordering, consumer] =
        ["lp-sampler", "lp-producer", "lp-ordering", "lp-consumer"].map(|u| broker.new_user(u));
    Grants::default()
        .user(&sampler)
        .allow(&sampler, &Role::Sampler.acls(&n))
        .user(&producer)
        .allow(&producer, &Role::Producer.acls(&n))
        .user(&ordering)
        .allow(&ordering, &Role::OrderingProducer.acls(&n))
        .user(&consumer)
        .allow(&consumer, &Role::Consumer.acls(&cn))
        .apply(broker);

    // A producer with its set, before any assignment: Kafka's placement, records land.
    let dkg = exercise_producer(broker, &n, &producer, false)
        .await
        .expect("the producer works");
    seed(broker, &n.topic, 2_000).await;

    // The sampler with its set learns and publishes; with the version 2 records too (the
    // `@generation` record, the control topic's end offset: no ACL beyond the set, docs/security.md).
    let v2 = ["--control-format", "v2"];
    let (s, _config) = start_sampler(broker, "lp-sampler", &n, &sampler, &v2);
    let published = tokio::task::block_in_place(|| {
        wait_for("the sampler's assignment", DEADLINE, || s.assignment())
    });
    assert_eq!(published.topic(), n.topic);
    assert!(published.generation().is_some(), "a version 2 document");
    assert!(control_records(broker, &n) >= 1, "on the control topic");

    // The producer adopts it.
    let start = Instant::now();
    while dkg.router().assignment(&n.topic).map(|a| a.epoch()) != Some(published.epoch()) {
        assert!(
            start.elapsed() < DEADLINE,
            "the producer did not adopt epoch {}",
            published.epoch()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    dkg.send(
        FutureRecord::to(&n.topic).key("k0").payload("after"),
        DEADLINE,
    )
    .await
    .map_err(|(e, _)| e)
    .expect("the producer sends under the assignment");

    // A producer with ordering, and a consumer, each with its set.
    exercise_producer(broker, &n, &ordering, true)
        .await
        .expect("the ordering producer works");
    let got = exercise_consumer(broker, &cn, &consumer, 100)
        .await
        .expect("the consumer works");
    assert_eq!(got, 100);

    // Nothing shows the password: not the log (which lists the settings), not the endpoints.
    let log = s.log();
    assert!(
        !authorization_error(&log),
        "the full set leaves nothing denied:\n{log}"
    );
    assert!(
        log.contains("sasl.password=<redacted>"),
        "the settings are logged, redacted:\n{log}"
    );
    assert!(
        !log.contains(&sampler.password),
        "the password is in the log:\n{log}"
    );
    for path in ["/assignment", "/healthz", "/metrics"] {
        let (_, body) = s.get(path).expect(path);
        assert!(
            !body.contains(&sampler.password),
            "the password is in {path}"
        );
    }
}

#[test]
fn help_never_shows_secret_settings_from_the_environment() {
    let secret = "hunter2-help-secret";
    for sub in ["run", "inspect", "loadgen", "consume", "demo"] {
        // The lab's tools share the sampler's Kafka flags (dkg_sampler::cli).
        let bin = if ["run", "inspect"].contains(&sub) {
            env!("CARGO_BIN_EXE_dkg-sampler").into()
        } else {
            dkg_testkit::process::workspace_bin("dkg-lab")
        };
        let out = Command::new(bin)
            .args([sub, "--help"])
            .env(
                "DKG_KAFKA_CONFIG",
                format!("sasl.password={secret}\nsasl.jaas.config=x password=\"{secret}\""),
            )
            .env("DKG_KAFKA_CONFIG_FILE", format!("/tmp/{secret}.properties"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{sub} --help failed");
        assert!(
            text.contains("--kafka-config-file"),
            "{sub} takes the file:\n{text}"
        );
        assert!(
            !text.contains(secret),
            "{sub} --help shows the secret:\n{text}"
        );
    }
    // A malformed line of the file is named by its number, never shown.
    let file = std::env::temp_dir().join(format!("{}.properties", unique_topic("lp-bad-file")));
    std::fs::write(
        &file,
        format!("security.protocol=SASL_PLAINTEXT\nsasl.password {secret}\n"),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_dkg-sampler"))
        .args([
            "inspect",
            "--bootstrap-servers",
            "127.0.0.1:1",
            "--topic",
            "t",
        ])
        .arg("--kafka-config-file")
        .arg(&file)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&file);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a bad line is an error");
    assert!(stderr.contains("line 2: no '='"), "{stderr}");
    assert!(
        !stderr.contains(secret),
        "the error shows the secret: {stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sampler_without_the_write_acl_cannot_publish() {
    let broker = sasl_broker();
    let cases: Vec<(&str, Names, User)> = ["control", "txn"]
        .into_iter()
        .map(|case| {
            (
                case,
                names(&format!("lp-nowrite-{case}")),
                broker.new_user("lp-nowrite"),
            )
        })
        .collect();
    let mut grants = Grants::default();
    for (case, n, user) in &cases {
        create_topics(broker, n).await;
        seed(broker, &n.topic, 500).await;
        let dropped = match *case {
            "control" => Acl {
                resource: Resource::Topic,
                name: n.control_topic.clone(),
                operation: Operation::Write,
            },
            _ => Acl {
                resource: Resource::TransactionalId,
                name: n.transactional_id.clone(),
                operation: Operation::Write,
            },
        };
        let acls: Vec<Acl> = Role::Sampler
            .acls(n)
            .into_iter()
            .filter(|a| *a != dropped)
            .collect();
        assert_eq!(
            acls.len() + 1,
            Role::Sampler.acls(n).len(),
            "{case}: one ACL dropped"
        );
        grants = grants.user(user).allow(user, &acls);
    }
    grants.apply(broker);
    tokio::task::block_in_place(|| {
        let mut samplers: Vec<_> = cases
            .iter()
            .map(|(case, n, user)| {
                (
                    case,
                    n,
                    start_sampler(broker, &format!("lp-nowrite-{case}"), n, user, &["--once"]),
                )
            })
            .collect();
        for (case, n, (s, _)) in &mut samplers {
            let status = s.wait_exit(DEADLINE);
            let log = s.log();
            assert!(
                !status.success(),
                "{case}: --once must fail without the write ACL:\n{log}"
            );
            let error = log
                .lines()
                .filter(|l| l.contains("ERROR") || l.starts_with("error:"))
                .collect::<Vec<_>>()
                .join("\n");
            assert!(
                authorization_error(&error),
                "{case}: the error names the authorization failure:\n{log}"
            );
            assert_eq!(
                control_records(broker, n),
                0,
                "{case}: nothing on the control topic"
            );
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acl_of_every_role_is_needed() {
    let broker = sasl_broker();
    // One case per (role, dropped ACL), each with its own topics and user.
    let mut cases: Vec<(Role, Acl, Names, User)> = Vec::new();
    for role in Role::ALL {
        let template = names("lp-drop");
        for (i, acl) in role.acls(&template).into_iter().enumerate() {
            // In a library client a reader group's denied Describe is only a logged warning (the
            // readers never join or commit); the sampler's log below shows it for the sampler.
            if role != Role::Sampler && acl.operation == Operation::Describe {
                continue;
            }
            // A consumer writes the handoff topic only while an epoch switch is under way (its
            // progress announcements); this table runs none.
            if role == Role::Consumer && acl.operation == Operation::Write {
                continue;
            }
            let n = names(&format!("lp-drop-{i}"));
            let n = if role == Role::Consumer {
                consumer_names(&n)
            } else {
                n
            };
            // The same ACL of this case's names.
            let dropped = role.acls(&n).swap_remove(i);
            assert_eq!(
                (dropped.resource, dropped.operation),
                (acl.resource, acl.operation)
            );
            cases.push((role, dropped, n, broker.new_user("lp-drop")));
        }
    }
    let mut grants = Grants::default();
    for (role, dropped, n, user) in &cases {
        let acls: Vec<Acl> = role.acls(n).into_iter().filter(|a| a != dropped).collect();
        grants = grants.user(user).allow(user, &acls);
    }
    // Topics of all cases at once, while the grants are applied.
    let topics: Vec<_> = cases
        .iter()
        .map(|(role, _, n, _)| {
            let (role, n) = (*role, n.clone());
            tokio::spawn(async move {
                create_topics(broker, &n).await;
                if matches!(role, Role::Sampler | Role::Consumer) {
                    seed(broker, &n.topic, 300).await;
                }
                if role == Role::Consumer {
                    // Something to read: an empty topic is read to its end without a fetch.
                    seed(broker, &n.handoff_topic, 1).await;
                }
            })
        })
        .collect();
    tokio::task::spawn_blocking(move || grants.apply(broker))
        .await
        .expect("the grants");
    for task in topics {
        task.await.expect("the topics of a case");
    }

    // The samplers run side by side; each must log an authorization failure.
    let samplers: Vec<_> = cases
        .iter()
        .filter(|c| c.0 == Role::Sampler)
        .map(|(_, dropped, n, user)| (dropped, start_sampler(broker, "lp-drop", n, user, &[])))
        .collect();
    let mut failures = Vec::new();
    // The library clients side by side too, each in a task of its own.
    let clients: Vec<_> = cases
        .iter()
        .filter(|c| c.0 != Role::Sampler)
        .map(|(role, dropped, n, user)| {
            let (role, n, user) = (*role, n.clone(), user.clone());
            let task = tokio::spawn(async move {
                match role {
                    Role::Producer => exercise_producer(broker, &n, &user, false).await.map(|_| 0),
                    Role::OrderingProducer => {
                        exercise_producer(broker, &n, &user, true).await.map(|_| 0)
                    }
                    _ => exercise_consumer(broker, &n, &user, 100).await,
                }
            });
            (role, dropped, task)
        })
        .collect();
    for (role, dropped, task) in clients {
        let result = task.await.expect("the client task");
        match result {
            Err(e) if authorization_error(&e) => {}
            other => failures.push(format!("{role:?} without {dropped:?}: {other:?}")),
        }
    }
    tokio::task::block_in_place(|| {
        let start = Instant::now();
        for (dropped, (s, _)) in &samplers {
            while !authorization_error(&s.log()) && start.elapsed() < DEADLINE {
                std::thread::sleep(Duration::from_millis(200));
            }
            if !authorization_error(&s.log()) {
                failures.push(format!(
                    "sampler without {dropped:?} logged no authorization error:\n{}",
                    s.log()
                ));
            }
        }
    });
    assert!(
        failures.is_empty(),
        "roles that did not fail:\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_documented_acl_commands_are_the_tested_sets() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/security.md"))
        .expect("docs/security.md");
    let n = Names {
        topic: "orders".into(),
        control_topic: "_dkg.assignments".into(),
        sketches_topic: "_dkg.sketches".into(),
        handoff_topic: "_dkg.handoff".into(),
        group: "dkg-sampler.orders".into(),
        transactional_id: "dkg-sampler.orders".into(),
    };
    let app = Names {
        group: "orders-app".into(),
        ..n.clone()
    };
    for (role, names, user) in [
        (Role::Sampler, &n, "dkg-sampler"),
        (Role::Producer, &n, "orders-producer"),
        (Role::OrderingProducer, &n, "orders-producer"),
        (Role::Consumer, &app, "orders-consumer"),
    ] {
        for command in role.kafka_acls_commands(names, user) {
            assert!(
                doc.contains(&command),
                "docs/security.md lacks the {role:?} ACL:\n{command}"
            );
        }
    }
}
