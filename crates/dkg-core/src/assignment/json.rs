//! The JSON document (`docs/spec.md` 4): decoding in the normative order with its reject reasons,
//! encoding (version 1, or 2 with a split key, a generation or the compact table), the compact table.

use super::*;

impl Assignment {
    /// [`Assignment::from_json`] after the version pre-read; `v2`: the document is version 2.
    pub(super) fn decode(bytes: &[u8], v2: bool) -> Result<Self> {
        let Obj(doc): Obj<DocIn<'_>> = serde_json::from_slice(bytes)?;
        if !v2 && (doc.kind.is_some() || doc.generation.is_some()) {
            return Err(malformed(
                "unknown member `kind` or `generation` (version 1)".to_owned(),
            ));
        }
        let table = match (doc.table, doc.table_b64, doc.table_width) {
            (Some(table), None, None) => {
                if table.len() != doc.buckets as usize {
                    return Err(Error::TableLength {
                        expected: doc.buckets.into(),
                        actual: table.len() as u64,
                    });
                }
                table
            }
            (None, Some(b64), Some(width)) if v2 => {
                decode_compact_table(&b64, width, doc.buckets, doc.partitions)?
            }
            (_, b64, width) if !v2 => {
                let member = if b64.is_some() {
                    "table_b64"
                } else {
                    "table_width"
                };
                let member = if width.is_some() || b64.is_some() {
                    member
                } else {
                    "table"
                };
                return Err(malformed(format!(
                    "missing or unknown member `{member}` (version 1 has `table` only)"
                )));
            }
            (Some(_), Some(_), _) => {
                return Err(malformed(
                    "both `table` and `table_b64` (exactly one is allowed)".to_owned(),
                ));
            }
            (None, None, _) => return Err(malformed("missing member `table`".to_owned())),
            (_, b64, _) => {
                let (with, without) = if b64.is_some() {
                    ("table_b64", "table_width")
                } else {
                    ("table_width", "table_b64")
                };
                return Err(malformed(format!("`{with}` without `{without}`")));
            }
        };
        let mut heavy = Vec::with_capacity(doc.heavy.len());
        let mut empty_splits = Vec::new();
        for (index, Obj(h)) in doc.heavy.into_iter().enumerate() {
            let (partition, split) = match (h.partition, h.split) {
                (Some(p), None) => (p, Vec::new()),
                (None, Some(split)) if v2 => {
                    let split: Vec<SplitPart> = split.into_iter().map(|Obj(s)| s).collect();
                    if split.is_empty() {
                        empty_splits.push(index);
                    }
                    (split.first().map_or(0, |s| s.partition), split)
                }
                (_, Some(_)) if !v2 => {
                    return Err(malformed(format!(
                        "heavy entry #{index}: unknown member `split` (version 1 documents cannot \
                         split a key)"
                    )));
                }
                (Some(_), Some(_)) => {
                    return Err(malformed(format!(
                        "heavy entry #{index}: both `partition` and `split` (exactly one is allowed)"
                    )));
                }
                (None, _) => {
                    let want = if v2 {
                        "`partition` or `split`"
                    } else {
                        "`partition`"
                    };
                    return Err(malformed(format!(
                        "heavy entry #{index}: missing member {want}"
                    )));
                }
            };
            let key = B64
                .decode(h.key_b64.as_bytes())
                .map_err(|e| Error::InvalidKeyEncoding {
                    index,
                    reason: e.to_string(),
                })?;
            heavy.push(HeavyKey {
                key,
                partition,
                weight: h.weight,
                split,
            });
        }
        let parts = AssignmentParts {
            topic: doc.topic.into_owned(),
            partitions: doc.partitions,
            epoch: doc.epoch,
            bucket_hash: doc.bucket_hash.0,
            table,
            heavy,
            params: doc.params.0,
            created_at_ms: doc.created_at_ms,
            predicted_load: doc.predicted_load,
        };
        // The generation id before the document's own invariants (`docs/spec.md` 6.4: after the
        // key encoding of step 6, before the topic of step 7), as Java and Go check it: a document
        // with a bad id and an out-of-range table entry is `invalid`, not `out_of_range`.
        if let Some(g) = &doc.generation {
            validate_generation(g)?;
        }
        let mut a = Self::validated(parts, &empty_splits)?;
        a.generation = doc.generation;
        Ok(a)
    }

    /// The format version [`Assignment::to_json`] writes: 2 if the document has a split key
    /// (a version 2 feature, `docs/spec.md` 4.6), else 1, byte for byte the version 1 encoding.
    #[must_use]
    pub fn format_version(&self) -> u64 {
        self.version_written(false)
    }

    /// The version of the encoding with (`compact`) or without the compact table.
    fn version_written(&self, compact: bool) -> u64 {
        if self.has_split_keys() || (compact && self.large_table) || self.generation.is_some() {
            MAX_FORMAT_VERSION
        } else {
            FORMAT_VERSION
        }
    }

    /// Encode as compact JSON (the control-topic payload), with a JSON `table`: version 1 unless
    /// a key is split, so readers of version 1 keep reading every document without split keys.
    #[must_use]
    pub fn to_json(&self) -> Vec<u8> {
        // Only strings, integers and finite floats (checked in `new`): serde_json cannot fail here.
        serde_json::to_vec(&self.doc_out(false)).expect("an assignment always serializes")
    }

    /// [`Assignment::to_json`] for a fleet that reads version 2 (`docs/spec.md` 11.1: the
    /// publisher's version 2 features are opt-in): the table as `table_b64` when its JSON text
    /// would exceed [`COMPACT_TABLE_ABOVE_BYTES`] (the document is then version 2), else the same
    /// bytes as `to_json`.
    #[must_use]
    pub fn to_json_compact(&self) -> Vec<u8> {
        serde_json::to_vec(&self.doc_out(true)).expect("an assignment always serializes")
    }

    /// Encode as indented JSON (for people: `dkg-sampler inspect`, docs).
    #[must_use]
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(&self.doc_out(false)).expect("an assignment always serializes")
    }

    /// The document to encode; `compact`: a large table as `table_b64`.
    fn doc_out(&self, compact: bool) -> DocOut<'_> {
        let p = &self.parts;
        let compact = compact && self.large_table;
        DocOut {
            format: FORMAT_NAME,
            version: self.version_written(compact),
            topic: &p.topic,
            partitions: p.partitions,
            epoch: p.epoch,
            generation: self.generation.as_deref(),
            bucket_hash: p.bucket_hash,
            buckets: self.buckets(),
            table: (!compact).then_some(p.table.as_slice()),
            table_b64: compact.then(|| encode_compact_table(&p.table, p.partitions)),
            table_width: compact.then(|| compact_table_width(p.partitions)),
            heavy: HeavyOut(&p.heavy),
            params: &p.params,
            created_at_ms: p.created_at_ms,
            predicted_load: &p.predicted_load,
        }
    }
}

/// Length of `table` as JSON text (`[0,1,2]`: brackets, commas, decimal digits).
pub(super) fn json_table_bytes(table: &[u32]) -> usize {
    let digits = |p: u32| p.checked_ilog10().map_or(1, |d| d as usize + 1);
    2 + table.len().saturating_sub(1) + table.iter().map(|&p| digits(p)).sum::<usize>()
}

/// The `table_width` of a compact table: the fewest bytes (1, 2 or 4) that hold `partitions - 1`.
pub(super) fn compact_table_width(partitions: u32) -> u32 {
    match partitions.saturating_sub(1) {
        0..=0xff => 1,
        0x100..=0xffff => 2,
        _ => 4,
    }
}

/// `table_b64`: each entry little-endian in `compact_table_width(partitions)` bytes, base64.
fn encode_compact_table(table: &[u32], partitions: u32) -> String {
    let width = compact_table_width(partitions) as usize;
    let bytes: Vec<u8> = table
        .iter()
        .flat_map(|p| p.to_le_bytes().into_iter().take(width))
        .collect();
    B64.encode(bytes)
}

/// The entries of a compact table (`docs/spec.md` 4.6), `invalid` unless `width` is the one
/// writers must use for `partitions`, `b64` canonical base64 and `buckets * width` bytes long.
/// Entries are range-checked later, with the JSON table's (`out_of_range`).
fn decode_compact_table(b64: &str, width: u32, buckets: u32, partitions: u32) -> Result<Vec<u32>> {
    let want = compact_table_width(partitions);
    if width != want {
        return Err(invalid(format!(
            "table_width {width}: {partitions} partitions take table_width {want}"
        )));
    }
    let bytes = B64
        .decode(b64.as_bytes())
        .map_err(|e| invalid(format!("table_b64 is not canonical base64: {e}")))?;
    let width = width as usize;
    if bytes.len() != buckets as usize * width {
        return Err(invalid(format!(
            "table_b64 holds {} bytes, {buckets} buckets of width {width} take {}",
            bytes.len(),
            buckets as usize * width
        )));
    }
    Ok(bytes
        .chunks_exact(width)
        .map(|entry| {
            let mut le = [0_u8; 4];
            le[..width].copy_from_slice(entry);
            u32::from_le_bytes(le)
        })
        .collect())
}

/// Read before the full document; other fields are skipped.
#[derive(Deserialize)]
pub(super) struct Header<'a> {
    #[serde(borrow)]
    pub(super) format: Cow<'a, str>,
    pub(super) version: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DocIn<'a> {
    // Checked via `Header`; listed here so `deny_unknown_fields` knows them.
    #[serde(borrow, rename = "format")]
    _format: Cow<'a, str>,
    #[serde(rename = "version")]
    _version: u64,
    // `kind` is checked by the peek (`assignment` here); version 2 only, as `generation`.
    #[serde(default, deserialize_with = "present")]
    kind: Option<String>,
    #[serde(borrow)]
    topic: Cow<'a, str>,
    partitions: u32,
    epoch: u64,
    #[serde(default, deserialize_with = "present")]
    generation: Option<String>,
    bucket_hash: Obj<BucketHash>,
    buckets: u32,
    // Exactly one of `table` and `table_b64` (with `table_width`); checked in `decode`.
    #[serde(default, deserialize_with = "present")]
    table: Option<Vec<u32>>,
    #[serde(default, deserialize_with = "present")]
    table_b64: Option<String>,
    #[serde(default, deserialize_with = "present")]
    table_width: Option<u32>,
    #[serde(borrow)]
    heavy: Vec<Obj<HeavyIn<'a>>>,
    params: Obj<Params>,
    created_at_ms: u64,
    predicted_load: Vec<f64>,
}

/// Decodes `T` from a JSON object only. Serde's derived impls also accept an array (fields by
/// position); the document has one canonical shape, so the decoder refuses that.
pub(super) struct Obj<T>(pub(super) T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ObjVisitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjVisitor<T> {
            type Value = T;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(ObjVisitor(PhantomData)).map(Obj)
    }
}

/// Heavy key as read: base64 decoded by hand for a typed error.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HeavyIn<'a> {
    #[serde(borrow)]
    key_b64: Cow<'a, str>,
    // Exactly one of the two (checked in `decode`); `null` is no value for either (spec 4.3).
    #[serde(default, deserialize_with = "present")]
    partition: Option<u32>,
    #[serde(default, deserialize_with = "present")]
    split: Option<Vec<Obj<SplitPart>>>,
    weight: u64,
}

/// An optional member that, when present, must hold a `T` (serde's `Option` would take `null`).
pub(super) fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// The heavy list as written: a whole key as `{"key_b64","partition","weight"}` (version 1), a
/// split key as `{"key_b64","split","weight"}`.
struct HeavyOut<'a>(&'a [HeavyKey]);

impl Serialize for HeavyOut<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeSeq, SerializeStruct};
        struct Entry<'a>(&'a HeavyKey);
        impl Serialize for Entry<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let hk = self.0;
                let mut entry = s.serialize_struct("HeavyKey", 3)?;
                entry.serialize_field("key_b64", &B64.encode(&hk.key))?;
                if hk.is_split() {
                    entry.serialize_field("split", &hk.split)?;
                } else {
                    entry.serialize_field("partition", &hk.partition)?;
                }
                entry.serialize_field("weight", &hk.weight)?;
                entry.end()
            }
        }
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for hk in self.0 {
            seq.serialize_element(&Entry(hk))?;
        }
        seq.end()
    }
}

#[derive(Serialize)]
struct DocOut<'a> {
    format: &'static str,
    version: u64,
    topic: &'a str,
    partitions: u32,
    epoch: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    generation: Option<&'a str>,
    bucket_hash: BucketHash,
    buckets: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    table: Option<&'a [u32]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    table_b64: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    table_width: Option<u32>,
    heavy: HeavyOut<'a>,
    params: &'a Params,
    created_at_ms: u64,
    predicted_load: &'a [f64],
}

/// `Vec<u8>` as a standard, padded base64 string.
pub(super) mod key_b64 {
    use std::borrow::Cow;

    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer, de::Error as _};

    use super::B64;

    pub(in crate::assignment) fn serialize<S: Serializer>(
        key: &[u8],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_str(&B64.encode(key))
    }

    pub(in crate::assignment) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<u8>, D::Error> {
        let text = Cow::<'de, str>::deserialize(d)?;
        B64.decode(text.as_bytes()).map_err(D::Error::custom)
    }
}
