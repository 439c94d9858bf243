//! The serde snapshot of a [`SpaceSaving`] summary: `{"capacity":c,"total":N,"counters":[[key,count,error],..]}`
//! (heaviest first, keys base64 in human-readable formats), and its validation on the way in.

use super::*;

/// Key bytes on the wire: base64 in human-readable formats, raw bytes otherwise.
struct KeyRef<'a>(&'a [u8]);

impl Serialize for KeyRef<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            s.serialize_str(&BASE64.encode(self.0))
        } else {
            s.serialize_bytes(self.0)
        }
    }
}

struct KeyBuf(Vec<u8>);

impl<'de> Deserialize<'de> for KeyBuf {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = KeyBuf;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a base64 string or a byte string")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<KeyBuf, E> {
                BASE64
                    .decode(v)
                    .map(KeyBuf)
                    .map_err(|e| E::custom(format_args!("key is not valid base64: {e}")))
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> std::result::Result<KeyBuf, E> {
                Ok(KeyBuf(v.to_vec()))
            }
            fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> std::result::Result<KeyBuf, E> {
                Ok(KeyBuf(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<KeyBuf, A::Error> {
                let mut v = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
                while let Some(b) = seq.next_element::<u8>()? {
                    v.push(b);
                }
                Ok(KeyBuf(v))
            }
        }
        if d.is_human_readable() {
            d.deserialize_str(KeyVisitor)
        } else {
            d.deserialize_bytes(KeyVisitor)
        }
    }
}

#[derive(Serialize)]
struct SnapshotRef<'a> {
    capacity: u64,
    total: u64,
    counters: Vec<(KeyRef<'a>, u64, u64)>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Snapshot {
    capacity: u64,
    total: u64,
    counters: Vec<(KeyBuf, u64, u64)>,
}

impl Serialize for SpaceSaving {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        SnapshotRef {
            capacity: self.capacity as u64,
            total: self.total,
            counters: self
                .top(self.len())
                .into_iter()
                .map(|c| (KeyRef(c.key), c.count, c.error))
                .collect(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for SpaceSaving {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let snap = Snapshot::deserialize(d)?;
        SpaceSaving::from_snapshot(snap).map_err(de::Error::custom)
    }
}

impl SpaceSaving {
    fn from_snapshot(snap: Snapshot) -> std::result::Result<Self, String> {
        if snap.capacity == 0 || snap.capacity > MAX_CAPACITY as u64 {
            return Err(format!(
                "summary capacity {} out of range 1..={MAX_CAPACITY}",
                snap.capacity
            ));
        }
        let capacity = snap.capacity as usize;
        if snap.counters.len() > capacity {
            return Err(format!(
                "summary has {} counters, more than its capacity {capacity}",
                snap.counters.len()
            ));
        }
        let mut summary = SpaceSaving::new(capacity);
        let mut entries = Vec::with_capacity(snap.counters.len());
        for (KeyBuf(key), count, error) in snap.counters {
            if count == 0 {
                return Err(format!(
                    "counter for key {} has count 0",
                    BASE64.encode(&key)
                ));
            }
            if error > count {
                return Err(format!(
                    "counter for key {} has error {error} above its count {count}",
                    BASE64.encode(&key)
                ));
            }
            entries.push((key, count, error));
        }
        entries.sort_unstable_by(|x, y| x.0.cmp(&y.0));
        if let Some(w) = entries.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(format!(
                "summary lists key {} twice",
                BASE64.encode(&w[0].0)
            ));
        }
        summary.rebuild(entries);
        summary.total = snap.total;
        Ok(summary)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_round_trip_and_validation() {
        let mut s = SpaceSaving::new(3);
        for k in [&b"\x00\xffbin"[..], b"a", b"a", b"b", b"c", b"c", b"c"] {
            s.insert(k);
        }
        let json = serde_json::to_string(&s).unwrap();
        let back: SpaceSaving = serde_json::from_str(&json).unwrap();
        back.check_invariants();
        assert_eq!(back.total(), s.total());
        assert_eq!(back.top(10), s.top(10));
        assert_eq!(serde_json::to_string(&back).unwrap(), json);

        for (bad, what) in [
            (r#"{"capacity":0,"total":0,"counters":[]}"#, "capacity"),
            (
                r#"{"capacity":1,"total":2,"counters":[["YQ==",1,0],["Yg==",1,0]]}"#,
                "more than",
            ),
            (
                r#"{"capacity":2,"total":2,"counters":[["YQ==",1,2]]}"#,
                "error",
            ),
            (
                r#"{"capacity":2,"total":2,"counters":[["YQ==",1,0],["YQ==",1,0]]}"#,
                "twice",
            ),
            (
                r#"{"capacity":2,"total":2,"counters":[["!!",1,0]]}"#,
                "base64",
            ),
            (
                r#"{"capacity":2,"total":2,"counters":[["YQ==",0,0]]}"#,
                "count 0",
            ),
            (
                r#"{"capacity":2,"total":2,"counters":[],"x":1}"#,
                "unknown field",
            ),
        ] {
            let err = serde_json::from_str::<SpaceSaving>(bad)
                .unwrap_err()
                .to_string();
            assert!(err.contains(what), "{bad}: {err}");
        }
    }
}
