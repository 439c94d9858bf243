//! Producing as fast as the client takes records, with a bounded window of deliveries in flight:
//! what the no-loss test and the throughput benches do around every send.

use std::collections::VecDeque;
use std::future::Future;
use std::time::Duration;

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::ToBytes;
use rdkafka::producer::FutureRecord;

/// The result of a producer's non-blocking send: a delivery to await, or the error with the record.
pub type Sent<'a, K, P, F> = Result<F, (KafkaError, FutureRecord<'a, K, P>)>;

/// Send `record` through `send` (a producer's `send_result`), keeping at most `max_in_flight`
/// deliveries in `in_flight`: while the client's queue is full, and once the window is full, the
/// oldest delivery is awaited and its result handed to `settle`. An error other than a full queue
/// is returned (the record is dropped).
pub async fn send_windowed<'a, K, P, F>(
    mut send: impl FnMut(FutureRecord<'a, K, P>) -> Sent<'a, K, P, F>,
    mut record: FutureRecord<'a, K, P>,
    in_flight: &mut VecDeque<F>,
    max_in_flight: usize,
    mut settle: impl FnMut(F::Output),
) -> Result<(), KafkaError>
where
    K: ToBytes + ?Sized,
    P: ToBytes + ?Sized,
    F: Future,
{
    loop {
        match send(record) {
            Ok(f) => {
                in_flight.push_back(f);
                break;
            }
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                record = back;
                match in_flight.pop_front() {
                    Some(f) => settle(f.await),
                    // None of ours in flight: the client's queue drains on its own.
                    None => tokio::time::sleep(Duration::from_millis(1)).await,
                }
            }
            Err((e, _)) => return Err(e),
        }
    }
    if in_flight.len() >= max_in_flight
        && let Some(f) = in_flight.pop_front()
    {
        settle(f.await);
    }
    Ok(())
}
