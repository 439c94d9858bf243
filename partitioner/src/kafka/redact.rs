//! Client settings shown without their secrets: one rule for every `Debug` impl and log line
//! of the library and the sampler (rdkafka's own `Debug` hides only a few password keys, and
//! `ClientConfig::config_map` masks `sasl.password` alone).

use std::fmt;

use rdkafka::config::ClientConfig;

/// Placeholder shown instead of a secret value.
pub const REDACTED: &str = "<redacted>";

/// Whether a client setting's value must never be shown: passwords, secrets, tokens, JAAS lines,
/// private keys and keystores, OAUTHBEARER configs (they hold client secrets).
pub fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    ["password", "secret", "token", "jaas", "credential"]
        .iter()
        .any(|w| k.contains(w))
        || [
            "ssl.key.",
            "ssl_key",
            "ssl.keystore.",
            "sasl.oauthbearer.config",
        ]
        .iter()
        .any(|p| k.starts_with(p))
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
