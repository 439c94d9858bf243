//! The publisher's role for one interval ([`Driver::take_publisher`]): the transactional id, the
//! catch-up read of the control topic it needs, and with `--control-format v2` the control topic's
//! generation (`docs/spec.md` 6.4), written when none is in force or the topic was recreated.

use super::*;

impl Driver<'_> {
    /// Hold the transactional id before choosing an epoch (see publish.rs): once after taking it, read
    /// the control topic to its end; afterwards no one else can commit, and the live view suffices.
    /// With `--control-format v2` also after the control topic shrank under the view (recreated),
    /// and a generation record is written when none is in force ([`Driver::establish_generation`]).
    /// Returns whether this instance may publish, with the control topic's state; `None` ends the
    /// interval (the catch-up failed).
    pub(super) async fn take_publisher(&mut self, generation: u64) -> Option<(bool, ControlState)> {
        let was_active = self.io.publisher.state() == PublisherState::Active;
        let may_publish = match self.io.publisher.activate(generation).await {
            Ok(ok) => ok,
            Err(e) => {
                tracing::warn!("cannot become the publisher this interval: {e}");
                false
            }
        };
        if may_publish && !was_active {
            self.caught_up = false;
        }
        let v2 = self.io.publisher.format() == ControlFormat::V2;
        if may_publish && v2 && self.caught_up {
            // Two signs, as either can miss: the end below what was read (before anything is
            // written into the new log), or the live reader already reading the new log from its
            // start (after this sampler's own publish landed in it, so its end need not be lower).
            if self.io.control.state().rewound || self.control_topic_shrank().await {
                tracing::warn!(
                    control_topic = %self.s.args.cluster.control_topic,
                    "the control topic ends before the records this sampler read: it was recreated; \
                     reading it again"
                );
                self.caught_up = false;
            } else if self.io.control.state().generation.is_none() {
                // Only a fresh read to the end may conclude that none is in force: a second
                // generation record would reset every reader.
                self.caught_up = false;
            }
        }
        let control = if may_publish && !self.caught_up {
            match self.io.control.catch_up().await {
                Ok(c) => {
                    self.caught_up = true;
                    c
                }
                Err(e) => {
                    tracing::warn!("{e}; not publishing this interval");
                    return None;
                }
            }
        } else {
            self.io.control.state()
        };
        if may_publish && v2 && control.generation.is_none() {
            return self
                .establish_generation(generation)
                .await
                .map(|c| (may_publish, c));
        }
        Some((may_publish, control))
    }

    /// `--control-format v2` and no generation in force: write a new generation record, then read
    /// the control topic to its end again and use the generation in force, the last record's (two
    /// racing publishers: the later one wins, `docs/spec.md` 6.4). `None` ends the interval.
    async fn establish_generation(&mut self, ownership: u64) -> Option<ControlState> {
        let id = new_generation_id();
        let control_topic = &self.s.args.cluster.control_topic;
        if let Err(e) = self.io.publisher.write_generation(&id, ownership).await {
            tracing::warn!(%control_topic, "writing the generation record failed ({e:?}); retrying next interval");
            self.show_publisher_state();
            return None;
        }
        tracing::info!(%control_topic, generation = %id, "wrote the control topic's generation record");
        match self.io.control.catch_up().await {
            Ok(c) if c.generation.is_some() => Some(c),
            Ok(_) => {
                tracing::warn!(%control_topic, "the generation record is not in force yet; retrying next interval");
                None
            }
            Err(e) => {
                tracing::warn!("{e}; not publishing this interval");
                self.caught_up = false;
                None
            }
        }
    }

    /// Whether the control topic now ends before the offset the view read up to: it was deleted
    /// and recreated (or truncated), so the generation and epochs the view holds may be gone. The
    /// client exposes no topic ids; the end offset is the cheap sign. Unknown (the topic is
    /// missing or the broker does not answer): `false`, the next interval asks again.
    async fn control_topic_shrank(&self) -> bool {
        let read_up_to = self.io.control.state().end_offset;
        if read_up_to == 0 {
            return false;
        }
        let admin = Arc::clone(&self.io.admin);
        let control_topic = self.s.args.cluster.control_topic.clone();
        let end = tokio::task::spawn_blocking(move || {
            admin
                .inner()
                .fetch_watermarks(&control_topic, 0, Duration::from_secs(5))
        })
        .await;
        matches!(end, Ok(Ok((_, high))) if high < read_up_to)
    }
}
