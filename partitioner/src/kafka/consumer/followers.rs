//! The background tasks of a [`DkgConsumer`]: follow the control and handoff topics and send
//! what concerns the consumer's topic to its loop ([`BgEvent`]), applied to the core by [`apply`].

use super::*;

/// What the background readers send.
#[derive(Debug)]
pub(super) enum BgEvent {
    Control(ControlUpdate),
    Handoff(HandoffEntry),
}

pub(super) fn apply(
    core: &mut Core<DkgMessage>,
    ev: BgEvent,
    now: Monotonic,
    history_keys: &mut BTreeSet<u64>,
) {
    match ev {
        BgEvent::Control(ControlUpdate::Adopted(a)) => {
            if *a.topic() == *core.topic() {
                info!(
                    topic = a.topic(),
                    epoch = a.epoch(),
                    "consumer saw a new assignment"
                );
                core.on_assignment(a, now);
            }
        }
        BgEvent::Control(ControlUpdate::Retracted { topic }) => {
            if *topic == *core.topic() {
                warn!(topic = %topic, "assignment retracted: records return to Kafka's default \
                    placement without epochs; ordering across the retraction is not guaranteed");
            }
        }
        BgEvent::Control(_) => {}
        BgEvent::Handoff(HandoffEntry::Lease(l)) => core.on_lease(l, now),
        BgEvent::Handoff(HandoffEntry::History(a)) => {
            if *a.topic() == *core.topic() {
                history_keys.insert(a.epoch());
            }
            core.on_assignment(a, now);
        }
        BgEvent::Handoff(HandoffEntry::Progress(p)) => core.on_progress(&p, now),
        BgEvent::Handoff(HandoffEntry::Marker(m)) => core.on_marker(m, now),
        BgEvent::Handoff(HandoffEntry::MarkerRejected { topic, reason }) => {
            if *topic == *core.topic() {
                warn!(topic = %topic, %reason, "skipped a marker record of the handoff topic");
                core.on_marker_rejected(reason);
            }
        }
        BgEvent::Handoff(HandoffEntry::Removed(key)) => match key {
            HandoffKey::Lease { topic, producer } if *topic == *core.topic() => {
                core.on_lease_removed(&producer, now);
            }
            HandoffKey::Assignment { topic, epoch } if *topic == *core.topic() => {
                history_keys.remove(&epoch);
            }
            _ => {}
        },
    }
}

pub(super) async fn follow_control(
    mut reader: ControlTopicReader,
    topic: Arc<str>,
    tx: mpsc::UnboundedSender<BgEvent>,
) {
    loop {
        let record = reader.next_record().await;
        let ours = match &record.update {
            ControlUpdate::Adopted(a) => *a.topic() == *topic,
            ControlUpdate::Retracted { topic: t } => **t == *topic,
            _ => false,
        };
        if ours && tx.send(BgEvent::Control(record.update)).is_err() {
            return;
        }
    }
}

pub(super) async fn follow_handoff(
    mut reader: HandoffReader,
    topic: Arc<str>,
    tx: mpsc::UnboundedSender<BgEvent>,
) {
    loop {
        let record = reader.next_record().await;
        match record.entry {
            Ok(entry) => {
                if *entry.topic() == *topic && tx.send(BgEvent::Handoff(entry)).is_err() {
                    return;
                }
            }
            Err(why) => debug!(offset = record.offset, error = %why, "skipped a handoff record"),
        }
    }
}
