//! The SASL/SCRAM broker of `scripts/kafka sasl` (docs/operations.md "Local Kafka", `docs/security.md`): its
//! client listener is SASL_PLAINTEXT with SCRAM-SHA-512, the StandardAuthorizer enforces ACLs and a
//! principal without one is denied (`allow.everyone.if.no.acl.found=false`).
//!
//! [`sasl_broker`] starts it on first use in a test binary if it is not running (`scripts/kafka sasl
//! start` is idempotent); `DKG_TEST_SASL_BOOTSTRAP`, when set, must name that same broker. No broker
//! after the start FAILS the test; nothing skips. Users and ACLs are applied as the broker's super
//! user through `scripts/kafka sasl grant` (one JVM for a whole batch; rust-rdkafka has no ACL API).
//!
//! [`Role`] holds the documented ACL set of every dkg role, derived from what each client does (see
//! `docs/security.md`, which a test checks against [`Role::kafka_acls_commands`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dkg_partitioner::kafka::topic;
use dkg_partitioner::kafka::topic::{Ensured, TopicSpec};
use rdkafka::ClientConfig;

use crate::broker::check_client;
use crate::cluster::{kafka_script, start_managed};

/// The SCRAM mechanism of the broker's client listener.
pub const MECHANISM: &str = "SCRAM-SHA-512";

/// The SASL test broker: its bootstrap and its admin (super user) credentials.
#[derive(Debug)]
pub struct SaslBroker {
    bootstrap: String,
    admin: User,
}

/// A SCRAM user (name and password).
#[derive(Clone, PartialEq, Eq)]
pub struct User {
    /// The user name; the principal is `User:<name>`.
    pub name: String,
    /// The password (never printed by this type's `Debug`).
    pub password: String,
}

impl std::fmt::Debug for User {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("User")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// The broker, started (`scripts/kafka sasl start`) on first use in this test binary if it does not
/// answer; panics if it cannot be had or if `DKG_TEST_SASL_BOOTSTRAP` names another broker.
pub fn sasl_broker() -> &'static SaslBroker {
    static BROKER: OnceLock<SaslBroker> = OnceLock::new();
    BROKER.get_or_init(|| {
        let managed = start_managed(
            "sasl",
            "DKG_TEST_SASL_BOOTSTRAP",
            "the tests need its admin credentials. Set DKG_KAFKA_SASL_PORT / DKG_KAFKA_SASL_DATA to \
             that broker's",
        );
        let properties = kafka_script("sasl", &["admin-config"], "");
        let admin = User {
            name: "admin".to_owned(),
            password: admin_password(&properties),
        };
        let broker = SaslBroker {
            bootstrap: managed,
            admin,
        };
        if let Err(e) = check_client(broker.config(&broker.admin), Duration::from_secs(30)) {
            panic!(
                "the SASL broker at {} does not answer the admin's metadata request ({e})",
                broker.bootstrap
            );
        }
        broker
    })
}

/// The admin's password from the JAAS line of `scripts/kafka sasl admin-config`'s file.
fn admin_password(properties: &str) -> String {
    let text = std::fs::read_to_string(properties)
        .unwrap_or_else(|e| panic!("reading the SASL admin's properties {properties}: {e}"));
    text.lines()
        .find_map(|l| l.strip_prefix("sasl.jaas.config="))
        .and_then(|jaas| jaas.split("password=\"").nth(1))
        .and_then(|rest| rest.split('"').next())
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("no admin password in {properties}"))
}

impl SaslBroker {
    /// The bootstrap address of the SASL listener.
    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    /// The admin (super user: every ACL check passes).
    pub fn admin(&self) -> &User {
        &self.admin
    }

    /// Client settings for `user`: bootstrap, SASL_PLAINTEXT, SCRAM-SHA-512, name and password.
    pub fn config(&self, user: &User) -> ClientConfig {
        let mut c = ClientConfig::new();
        for (k, v) in self.settings(user) {
            c.set(k, v);
        }
        c
    }

    /// [`SaslBroker::config`] as `key=value` pairs (for a properties file or `--kafka-config`).
    pub fn settings(&self, user: &User) -> Vec<(&'static str, String)> {
        vec![
            ("bootstrap.servers", self.bootstrap.clone()),
            ("security.protocol", "SASL_PLAINTEXT".to_owned()),
            ("sasl.mechanism", MECHANISM.to_owned()),
            ("sasl.username", user.name.clone()),
            ("sasl.password", user.password.clone()),
        ]
    }

    /// A fresh user name (`<prefix>-<pid>-<n>`) with a random password; created by [`Grants::apply`].
    pub fn new_user(&self, prefix: &str) -> User {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        // Not a secret of any strength: unique per run, so a test can grep for it.
        let password = format!(
            "pw{:x}{n}x{}",
            nanos ^ u128::from(std::process::id()),
            nanos % 9973
        );
        User {
            name: format!("{prefix}-{}-{n}", std::process::id()),
            password,
        }
    }

    /// Creates `spec`'s topic as the admin and waits until every partition has a leader; panics on
    /// failure, "already exists" included (test topics are unique).
    pub async fn create_topic(&self, spec: &TopicSpec) {
        let admin = self.config(&self.admin);
        match topic::create_and_wait(&admin, spec, Duration::from_secs(60)).await {
            Ok(Ensured::Created) => {}
            Ok(Ensured::Existing) => panic!("topic {} already exists", spec.name),
            Err(e) => panic!("creating topic {} on the SASL broker: {e}", spec.name),
        }
    }
}

/// A batch of users and ACLs, applied in one `scripts/kafka sasl grant` run.
#[derive(Debug, Default)]
pub struct Grants {
    lines: String,
}

impl Grants {
    /// Create (or update) `user`.
    pub fn user(mut self, user: &User) -> Self {
        let _ = writeln!(self.lines, "user {} {}", user.name, user.password);
        self
    }

    /// Allow `user` every ACL of `acls`.
    pub fn allow(mut self, user: &User, acls: &[Acl]) -> Self {
        for acl in acls {
            let _ = writeln!(
                self.lines,
                "allow User:{} {}",
                user.name,
                acl.grant_fields()
            );
        }
        self
    }

    /// Apply the batch as the broker's admin; returns once the broker reports every change.
    pub fn apply(self, broker: &SaslBroker) {
        // Through the broker this process checked (DKG_KAFKA_SASL_* select it in the script).
        let _ = broker;
        kafka_script("sasl", &["grant"], &self.lines);
    }
}

/// A resource an ACL is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Resource {
    /// A topic.
    Topic,
    /// A consumer group.
    Group,
    /// A transactional id.
    TransactionalId,
}

/// An operation an ACL allows (Kafka's `AclOperation`). READ and WRITE imply DESCRIBE.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    /// Fetch, list offsets, join a group, commit.
    Read,
    /// Produce; on a transactional id, use it.
    Write,
    /// Read a topic's configuration (DescribeConfigs).
    DescribeConfigs,
    /// On a group: find its coordinator. The control, handoff and sketch readers need it on their
    /// fixed group names ([`READER_GROUPS`]): they never join or commit, but librdkafka looks the
    /// coordinator up, and a denial is logged (GroupAuthorizationFailed) over and over.
    Describe,
}

/// The `group.id`s of the compacted-topic readers (control, handoff, sketches): never joined.
pub const READER_GROUPS: [&str; 3] = [
    "dkg-control-reader",
    "dkg-handoff-reader",
    "dkg-sampler-sketch-reader",
];

/// One ALLOW ACL (host `*`, literal resource name) for the principal it is granted to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Acl {
    /// What it is on.
    pub resource: Resource,
    /// The resource's literal name.
    pub name: String,
    /// What it allows.
    pub operation: Operation,
}

impl Acl {
    fn new(resource: Resource, name: &str, operation: Operation) -> Self {
        Self {
            resource,
            name: name.to_owned(),
            operation,
        }
    }

    /// `RESOURCE_TYPE LITERAL NAME OPERATION` for `scripts/kafka sasl grant`.
    fn grant_fields(&self) -> String {
        let (resource, op) = self.java_names();
        format!("{resource} LITERAL {} {op}", self.name)
    }

    fn java_names(&self) -> (&'static str, &'static str) {
        let resource = match self.resource {
            Resource::Topic => "TOPIC",
            Resource::Group => "GROUP",
            Resource::TransactionalId => "TRANSACTIONAL_ID",
        };
        let op = match self.operation {
            Operation::Read => "READ",
            Operation::Write => "WRITE",
            Operation::DescribeConfigs => "DESCRIBE_CONFIGS",
            Operation::Describe => "DESCRIBE",
        };
        (resource, op)
    }
}

/// The names a role's ACLs are on.
#[derive(Clone, Debug)]
pub struct Names {
    /// The data topic.
    pub topic: String,
    /// The control topic.
    pub control_topic: String,
    /// The sampler group's sketches topic.
    pub sketches_topic: String,
    /// The handoff topic (ordering).
    pub handoff_topic: String,
    /// The consumer group of the role (the sampler's `dkg-sampler.<topic>`, an application's own).
    pub group: String,
    /// The sampler's transactional id (`dkg-sampler.<topic>`).
    pub transactional_id: String,
}

/// The roles of a dkg deployment, each with its least-privilege ACL set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// `dkg-sampler run`: consumes the data topic in its group, follows and publishes to the control
    /// topic transactionally, exchanges windows on the sketches topic.
    Sampler,
    /// A `DkgProducer` (or `DkgRouter`): follows the control topic, writes the data topic.
    Producer,
    /// A `DkgProducer` with `.ordering(true)`: also writes leases to the handoff topic.
    OrderingProducer,
    /// A `DkgConsumer`: consumes the data topic in its group, follows the control and handoff
    /// topics, writes its progress to the handoff topic.
    Consumer,
}

impl Role {
    /// Every role.
    pub const ALL: [Role; 4] = [
        Role::Sampler,
        Role::Producer,
        Role::OrderingProducer,
        Role::Consumer,
    ];

    /// The role's ACL set for `n`, assuming the protocol topics exist (created by an admin; with
    /// `Create` on them the clients would create them instead).
    pub fn acls(self, n: &Names) -> Vec<Acl> {
        use Operation::{Describe, DescribeConfigs, Read, Write};
        use Resource::{Group, Topic, TransactionalId};
        let [control_reader, handoff_reader, sketch_reader] = READER_GROUPS;
        let mut acls = match self {
            Role::Sampler => vec![
                Acl::new(Topic, &n.topic, Read),
                Acl::new(Group, &n.group, Read),
                Acl::new(Topic, &n.control_topic, Read),
                Acl::new(Topic, &n.control_topic, Write),
                Acl::new(Topic, &n.control_topic, DescribeConfigs),
                Acl::new(TransactionalId, &n.transactional_id, Write),
                Acl::new(Topic, &n.sketches_topic, Read),
                Acl::new(Topic, &n.sketches_topic, Write),
                Acl::new(Topic, &n.sketches_topic, DescribeConfigs),
                Acl::new(Group, control_reader, Describe),
                Acl::new(Group, sketch_reader, Describe),
            ],
            Role::Producer | Role::OrderingProducer => vec![
                Acl::new(Topic, &n.topic, Write),
                Acl::new(Topic, &n.control_topic, Read),
                Acl::new(Topic, &n.control_topic, DescribeConfigs),
                Acl::new(Group, control_reader, Describe),
            ],
            Role::Consumer => vec![
                Acl::new(Topic, &n.topic, Read),
                Acl::new(Group, &n.group, Read),
                Acl::new(Topic, &n.control_topic, Read),
                Acl::new(Topic, &n.handoff_topic, Read),
                Acl::new(Topic, &n.handoff_topic, Write),
                Acl::new(Topic, &n.handoff_topic, DescribeConfigs),
                Acl::new(Group, control_reader, Describe),
                Acl::new(Group, handoff_reader, Describe),
            ],
        };
        if self == Role::OrderingProducer {
            acls.push(Acl::new(Topic, &n.handoff_topic, Write));
            acls.push(Acl::new(Topic, &n.handoff_topic, DescribeConfigs));
        }
        acls
    }

    /// The role's ACLs as `kafka-acls` commands, one per resource, for principal `User:<user>`
    /// (what `docs/security.md` shows with its example names).
    pub fn kafka_acls_commands(self, n: &Names, user: &str) -> Vec<String> {
        let mut by_resource: BTreeMap<(Resource, String), Vec<Operation>> = BTreeMap::new();
        for acl in self.acls(n) {
            by_resource
                .entry((acl.resource, acl.name))
                .or_default()
                .push(acl.operation);
        }
        by_resource
            .into_iter()
            .map(|((resource, name), ops)| {
                let ops: String = ops
                    .iter()
                    .map(|op| match op {
                        Operation::Read => " --operation Read",
                        Operation::Write => " --operation Write",
                        Operation::DescribeConfigs => " --operation DescribeConfigs",
                        Operation::Describe => " --operation Describe",
                    })
                    .collect();
                let flag = match resource {
                    Resource::Topic => "--topic",
                    Resource::Group => "--group",
                    Resource::TransactionalId => "--transactional-id",
                };
                format!("kafka-acls $ADMIN --add --allow-principal User:{user}{ops} {flag} {name}")
            })
            .collect()
    }
}
