//! The control topic's other values (`docs/spec.md` 6.4): retractions and the generation record, and
//! [`ControlDocument`], any control value by its `kind`.

use super::*;

/// A retraction that keeps its epoch (format version 2, `docs/spec.md` 6.4): producers of
/// `topic` return to Kafka's placement, and later documents need an epoch above `epoch`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Retraction {
    /// The data topic.
    pub topic: String,
    /// The retraction's epoch, the topic's epoch floor afterwards.
    pub epoch: u64,
    /// The control-topic generation it was published under, if it names one.
    pub generation: Option<String>,
    /// Creation time, Unix milliseconds (informational).
    pub created_at_ms: u64,
}

/// Any control-topic value of format `dkg.assignment` (`docs/spec.md` 4 and 6.4), by its `kind`.
#[derive(Clone, Debug, PartialEq)]
pub enum ControlDocument {
    /// An assignment (`kind` absent or `assignment`; every version 1 document). Boxed: the
    /// other kinds are small.
    Assignment(Box<Assignment>),
    /// `kind` `retraction` (version 2).
    Retraction(Retraction),
    /// `kind` `generation` (version 2): the control topic's generation id, the value of the
    /// record keyed [`GENERATION_KEY`].
    Generation(String),
}

/// The record key of the control topic's generation record (not a legal topic name).
pub const GENERATION_KEY: &str = "@generation";

impl ControlDocument {
    /// Decode and validate a control-topic value: the checks of [`Assignment::from_json`] in its
    /// order (`docs/spec.md` 4.4), the `kind` read right after the version.
    pub fn from_json(bytes: &[u8]) -> Result<Self> {
        if bytes.len() > MAX_ASSIGNMENT_BYTES {
            return Err(too_large(
                "assignment bytes",
                bytes.len() as u64,
                MAX_ASSIGNMENT_BYTES as u64,
            ));
        }
        // Format and version first, ignoring the rest, so a newer document reports its version
        // rather than whatever shape change came with it. An object only (gap G1, fixed in 2).
        let Obj(header): Obj<Header<'_>> = serde_json::from_slice(bytes)?;
        if header.format != FORMAT_NAME {
            return Err(Error::UnknownFormat {
                found: truncate_for_display(&header.format),
                expected: FORMAT_NAME,
            });
        }
        if !(FORMAT_VERSION..=MAX_FORMAT_VERSION).contains(&header.version) {
            return Err(Error::UnsupportedVersion {
                version: header.version,
                supported: MAX_FORMAT_VERSION,
            });
        }
        let v2 = header.version == 2;
        if v2 {
            let Obj(peek): Obj<KindPeek> = serde_json::from_slice(bytes)?;
            match peek.kind.as_deref() {
                None | Some("assignment") => {}
                Some("retraction") => return decode_retraction(bytes),
                Some("generation") => {
                    let Obj(g): Obj<GenerationIn<'_>> = serde_json::from_slice(bytes)?;
                    validate_generation(&g.generation)?;
                    return Ok(Self::Generation(g.generation.into_owned()));
                }
                Some(other) => {
                    return Err(malformed(format!(
                        "unknown kind {:?} (assignment, retraction or generation)",
                        truncate_for_display(other)
                    )));
                }
            }
        }
        let decoded = Assignment::decode(bytes, v2).map(|a| Self::Assignment(Box::new(a)));
        // Version 2 reports limits inside the document as `invalid` (gap G2): `oversize` is then
        // only the value's size, checked above.
        match decoded {
            Err(Error::TooLarge {
                what,
                actual,
                limit,
            }) if v2 => Err(invalid(format!("{what} is {actual}, limit {limit}"))),
            other => other,
        }
    }
}

/// The `kind` of a version 2 document, read after the version; other members are skipped.
#[derive(Deserialize)]
struct KindPeek {
    #[serde(default, deserialize_with = "present")]
    kind: Option<String>,
}

/// A retraction document (`docs/spec.md` 6.4), exactly these members.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RetractionIn<'a> {
    #[serde(borrow, rename = "format")]
    _format: Cow<'a, str>,
    #[serde(rename = "version")]
    _version: u64,
    #[serde(borrow, rename = "kind")]
    _kind: Cow<'a, str>,
    #[serde(borrow)]
    topic: Cow<'a, str>,
    epoch: u64,
    #[serde(default, deserialize_with = "present")]
    generation: Option<String>,
    created_at_ms: u64,
}

/// The generation record's value (`docs/spec.md` 6.4), exactly these members.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GenerationIn<'a> {
    #[serde(borrow, rename = "format")]
    _format: Cow<'a, str>,
    #[serde(rename = "version")]
    _version: u64,
    #[serde(borrow, rename = "kind")]
    _kind: Cow<'a, str>,
    #[serde(borrow)]
    generation: Cow<'a, str>,
}

#[derive(Serialize)]
struct RetractionOut<'a> {
    format: &'static str,
    version: u64,
    kind: &'static str,
    topic: &'a str,
    epoch: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    generation: Option<&'a str>,
    created_at_ms: u64,
}

#[derive(Serialize)]
struct GenerationOut<'a> {
    format: &'static str,
    version: u64,
    kind: &'static str,
    generation: &'a str,
}

fn decode_retraction(bytes: &[u8]) -> Result<ControlDocument> {
    let Obj(r): Obj<RetractionIn<'_>> = serde_json::from_slice(bytes)?;
    validate_topic(&r.topic)?;
    if let Some(g) = &r.generation {
        validate_generation(g)?;
    }
    check_epoch(r.epoch)?;
    Ok(ControlDocument::Retraction(Retraction {
        topic: r.topic.into_owned(),
        epoch: r.epoch,
        generation: r.generation,
        created_at_ms: r.created_at_ms,
    }))
}

/// `epoch <= MAX_EPOCH` ([`Error::EpochOutOfRange`], reject reason `out_of_range`, otherwise).
pub(super) fn check_epoch(epoch: u64) -> Result<()> {
    if epoch <= MAX_EPOCH {
        Ok(())
    } else {
        Err(Error::EpochOutOfRange {
            epoch,
            max: MAX_EPOCH,
        })
    }
}

/// A generation id: exactly 32 lowercase hex digits (`invalid` otherwise).
pub(super) fn validate_generation(generation: &str) -> Result<()> {
    let hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
    if generation.len() == 32 && generation.bytes().all(hex) {
        Ok(())
    } else {
        Err(invalid(format!(
            "generation {:?} is not 32 lowercase hex digits",
            truncate_for_display(generation)
        )))
    }
}

impl Retraction {
    /// Encode as compact JSON (a version 2 document, `docs/spec.md` 6.4).
    #[must_use]
    pub fn to_json(&self) -> Vec<u8> {
        let out = RetractionOut {
            format: FORMAT_NAME,
            version: MAX_FORMAT_VERSION,
            kind: "retraction",
            topic: &self.topic,
            epoch: self.epoch,
            generation: self.generation.as_deref(),
            created_at_ms: self.created_at_ms,
        };
        serde_json::to_vec(&out).expect("a retraction always serializes")
    }
}

/// The value of the generation record (key [`GENERATION_KEY`]) for `generation`, which must be
/// 32 lowercase hex digits.
pub fn generation_record(generation: &str) -> Result<Vec<u8>> {
    validate_generation(generation)?;
    let out = GenerationOut {
        format: FORMAT_NAME,
        version: MAX_FORMAT_VERSION,
        kind: "generation",
        generation,
    };
    Ok(serde_json::to_vec(&out).expect("a generation record always serializes"))
}
