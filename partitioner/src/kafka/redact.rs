//! Client settings shown without their secrets: one rule for every `Debug` impl and log line
//! of the library and the sampler (rdkafka's own `Debug` hides only a few password keys, and
//! `ClientConfig::config_map` masks `sasl.password` alone).

use std::fmt;

use rdkafka::config::ClientConfig;

/// Placeholder shown instead of a secret value.
pub const REDACTED: &str = "<redacted>";

/// Settings whose values are shown: known librdkafka settings that never hold a secret
/// (addresses, names, sizes, timeouts, switches, file *locations*). Every other key's value is
/// redacted, so a misspelt or unknown key (`sasl.pasword`, Java's `ssl.truststore.password`) is
/// covered too: an allowlist, not a list of secret words (issue 31, finding 3).
const SHOWN_KEYS: &[&str] = &[
    "acks",
    "allow.auto.create.topics",
    "api.version.request",
    "auto.commit.interval.ms",
    "auto.offset.reset",
    "batch.num.messages",
    "batch.size",
    "bootstrap.servers",
    "broker.address.family",
    "client.dns.lookup",
    "client.id",
    "client.rack",
    "compression.codec",
    "compression.type",
    "connections.max.idle.ms",
    "debug",
    "delivery.timeout.ms",
    "enable.auto.commit",
    "enable.auto.offset.store",
    "enable.idempotence",
    "enable.partition.eof",
    "enable.ssl.certificate.verification",
    "fetch.max.bytes",
    "fetch.min.bytes",
    "fetch.wait.max.ms",
    "group.id",
    "group.instance.id",
    "group.protocol",
    "group.remote.assignor",
    "heartbeat.interval.ms",
    "isolation.level",
    "linger.ms",
    "log_level",
    "max.in.flight.requests.per.connection",
    "max.partition.fetch.bytes",
    "max.poll.interval.ms",
    "message.max.bytes",
    "message.timeout.ms",
    "metadata.broker.list",
    "metadata.max.age.ms",
    "partition.assignment.strategy",
    "queue.buffering.max.kbytes",
    "queue.buffering.max.messages",
    "queue.buffering.max.ms",
    "queued.max.messages.kbytes",
    "queued.min.messages",
    "receive.message.max.bytes",
    "reconnect.backoff.max.ms",
    "reconnect.backoff.ms",
    "request.timeout.ms",
    "retries",
    "retry.backoff.max.ms",
    "retry.backoff.ms",
    "sasl.kerberos.service.name",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "security.protocol",
    "session.timeout.ms",
    "socket.connection.setup.timeout.ms",
    "socket.keepalive.enable",
    "socket.timeout.ms",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.endpoint.identification.algorithm",
    "statistics.interval.ms",
    "topic.metadata.refresh.interval.ms",
    "transaction.timeout.ms",
    "transactional.id",
];

/// Whether a client setting's value must never be shown: every key not on the allowlist of known
/// non-secret settings (case-insensitive). Passwords, secrets, tokens, JAAS lines, private keys,
/// keystores and OAUTHBEARER configs are never on it; unknown and misspelt keys are not either.
pub fn is_secret_key(key: &str) -> bool {
    let k = key.trim().to_ascii_lowercase();
    SHOWN_KEYS.binary_search(&k.as_str()).is_err()
}

/// The values of `settings` that must never be shown ([`is_secret_key`]), longest first, for
/// [`scrub`]. Values shorter than [`MIN_SCRUBBED_LEN`] bytes are left out: replacing every `1` or
/// `ok` in a log line would garble it without protecting anything.
pub fn secret_values<'a>(settings: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<String> {
    let mut out: Vec<String> = settings
        .into_iter()
        .filter(|(k, v)| is_secret_key(k) && v.trim().len() >= MIN_SCRUBBED_LEN)
        .map(|(_, v)| v.trim().to_owned())
        .collect();
    out.sort_by_key(|v| std::cmp::Reverse(v.len()));
    out.dedup();
    out
}

/// Shortest setting value [`secret_values`] scrubs.
pub const MIN_SCRUBBED_LEN: usize = 3;

/// `text` with every occurrence of each of `secrets` replaced by [`REDACTED`]: for texts the
/// process does not compose itself (librdkafka's errors echo a rejected property's key and value).
pub fn scrub(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_owned();
    for s in secrets {
        if !s.is_empty() && out.contains(s.as_str()) {
            out = out.replace(s.as_str(), REDACTED);
        }
    }
    out
}

/// `value`, or [`REDACTED`] if `key` looks secret.
pub fn shown_value<'a>(key: &str, value: &'a str) -> &'a str {
    if is_secret_key(key) { REDACTED } else { value }
}

/// A [`ClientConfig`] for `Debug` output with every secret-looking value redacted (rdkafka's own
/// `Debug` hides only a few password keys).
pub struct RedactedConfig<'a>(pub &'a ClientConfig);

impl fmt::Debug for RedactedConfig<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let map = self.0.config_map();
        f.debug_map()
            .entries(map.iter().map(|(k, v)| (k, shown_value(k, v))))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allowlist_is_sorted_lowercase_and_searchable() {
        assert!(SHOWN_KEYS.windows(2).all(|w| w[0] < w[1]));
        assert!(SHOWN_KEYS.iter().all(|k| *k == k.to_ascii_lowercase()));
        assert!(!is_secret_key("Bootstrap.Servers"));
    }

    #[test]
    fn unknown_and_misspelt_keys_are_secret() {
        for key in [
            "sasl.pasword",
            "ssl.truststore.password",
            "basic.auth.user.info",
            "bootstrap.server",
            "x",
        ] {
            assert!(is_secret_key(key), "{key}");
        }
    }

    #[test]
    fn scrub_replaces_every_secret_value_longest_first() {
        let secrets = secret_values([
            ("sasl.pasword", "hunter3"),
            ("ssl.truststore.password", "hunter3-long"),
            ("linger.ms", "hunter9"),
            ("sasl.password", "ab"),
        ]);
        assert_eq!(
            secrets,
            vec!["hunter3-long".to_owned(), "hunter3".to_owned()]
        );
        let text =
            r#"No such configuration property: "ssl.truststore.password" = hunter3-long; hunter3"#;
        assert_eq!(
            scrub(text, &secrets),
            r#"No such configuration property: "ssl.truststore.password" = <redacted>; <redacted>"#
        );
    }
}
