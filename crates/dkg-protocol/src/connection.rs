//! Which settings of a user's client configuration the dkg side clients inherit.
//!
//! A wrapped producer (or consumer) reads the control topic, and an ordering one the handoff topic,
//! with clients of its own built from the user's configuration. Those clients get the
//! connection-level settings only (bootstrap servers, security, SASL and SSL, sockets, reconnect and
//! retry back-offs, the client's rack and DNS lookup, logging): producer- or consumer-specific ones
//! (`acks`, `linger.ms`, `group.id`, ...) would be rejected or warned about by the other kind of
//! client. The names are librdkafka's (its `CONFIGURATION.md`); the Rust glue and the Python package
//! (through its extension) both call [`is_connection_setting`], so the list exists once. The Java
//! plug-in's list is the Java client's own names (`ControlFollower.connectionSettings`).

/// Settings kept by their exact name.
const EXACT: &[&str] = &[
    "bootstrap.servers",
    "metadata.broker.list",
    "security.protocol",
    "client.rack",
    "client.dns.lookup",
    "log_level",
    "log.connection.close",
    "topic.metadata.refresh.interval.ms",
];

/// Settings kept by a prefix of their name (families of librdkafka settings).
const PREFIXES: &[&str] = &[
    "ssl.",
    "ssl_",
    "sasl.",
    "socket.",
    "broker.",
    "api.version",
    "reconnect.backoff",
    "retry.backoff",
    "enable.ssl",
    "enable.sasl",
    "https.",
];

/// Whether the librdkafka setting `key` is connection-level: a dkg side client (the control or
/// handoff topic's reader or writer) built from the user's configuration keeps it. `client.id` is
/// not: each side client sets its own, derived from the user's.
#[must_use]
pub fn is_connection_setting(key: &str) -> bool {
    EXACT.contains(&key) || PREFIXES.iter().any(|p| key.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::is_connection_setting;

    #[test]
    fn keeps_connection_settings_and_drops_client_specific_ones() {
        for (key, kept) in [
            ("bootstrap.servers", true),
            ("security.protocol", true),
            ("sasl.mechanism", true),
            ("sasl.password", true),
            ("ssl.ca.location", true),
            ("ssl_engine_callback_data", true),
            ("socket.timeout.ms", true),
            ("reconnect.backoff.max.ms", true),
            ("enable.ssl.certificate.verification", true),
            ("https.ca.location", true),
            ("client.rack", true),
            ("client.id", false),
            ("acks", false),
            ("linger.ms", false),
            ("group.id", false),
            ("enable.idempotence", false),
            ("partitioner", false),
            ("bootstrap.servers.extra", false),
        ] {
            assert_eq!(is_connection_setting(key), kept, "{key}");
        }
    }
}
