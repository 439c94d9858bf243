//! The consumer side of ordering-safe migration, without Kafka: the protocol's specification and
//! the state machine that implements it ([`core`], with [`hold`], [`history`], [`progress`] and the
//! fast path's [`lane`]). The Kafka glue's `DkgConsumer` moves records between rdkafka and [`core`];
//! the producer side's pure part is [`crate::barrier`]. Times enter as arguments (`now`, a
//! [`Monotonic`] reading, and `now_ms`, the wall clock): nothing here reads a clock.
//!
//! # The problem
//!
//! Key grouping promises one key, one partition: one consumer holds a key's state and sees its
//! records in order. When epoch `E` moves key `K` from partition `P` to `Q`, `K`'s older records
//! still wait in `P` while its new ones arrive in `Q`; the consumer of `Q` could process them
//! first, and two consumers could hold `K`'s state at once. The DKG paper (Rivetti et al., DEBS
//! 2015) computes its mapping once and never faces this; a deployment that re-learns must. The
//! protocol below is a per-producer barrier (marker) scheme in the spirit of Chandy and Lamport's
//! snapshots, with the group's progress published on a compacted topic.
//!
//! # Protocol
//!
//! **Producers** (`DkgProducerBuilder::ordering`):
//! records carry `dkg-epoch`. Each producer instance registers a `Lease` on the handoff topic
//! ([`crate::handoff`]) and renews it every third of its duration. When it adopts epoch
//! `E` it keeps routing without pause, waits in the background for every send routed under an
//! older epoch to be enqueued (an atomic in-flight gate, no lock on the send path), then writes a
//! **barrier** record to every partition (null key, headers `dkg-barrier: E`,
//! `dkg-producer: <id>`). With idempotence each barrier lands after all of the producer's
//! older-epoch records of that partition. Then it writes `assignment/<topic>/<E>` (history) and
//! records the barrier offsets in its lease. A producer in **marker mode** (lease under
//! `lease2/`, `docs/spec.md` 9.2.1) writes no barrier: once every record it routed under an epoch
//! below `E` is acknowledged it writes a `Marker` (`marker/<topic>/<producer>`) with, per
//! partition, 1 + the largest such offset ([`crate::marker`] tracks them).
//!
//! **Consumers** (the state machine in [`core`], driven by the Kafka glue's `DkgConsumer`), per owned partition `P`:
//!
//! - A barrier of producer `y` for `E` at offset `b` is *passed* once no record below `b` with an
//!   epoch below `E` is unprocessed; `passed[P][y]` is the highest passed epoch. It is a barrier
//!   of every lower epoch too: while the lowest epoch of an unprocessed record below `b` is
//!   `e < E`, `passed[P][y]` is at least `e`.
//! - A marker of `y` for `E` is `y`'s barrier of `E` just below its end `o` on `P`, fetched once
//!   every offset below `o` is fetched and processed or tracked (the committed offset counts;
//!   the record the application holds does not).
//! - `P` has *drained* `E` when every producer awaited for `E` has `passed[P][y] >= E`. A producer
//!   is awaited while its lease is live, unless it started at or after `E` or closed before `E`
//!   (`Lease::awaited_for`).
//! - A drained value becomes usable only once **committed**: the partition's offset (the lowest
//!   unprocessed offset) is committed synchronously with the passed map as commit metadata, then
//!   the value is announced on the handoff topic (`progress/<group>/<topic>/<P>`). The member's
//!   `ConsumerHooks::on_epoch` runs before that commit.
//! - A record of key `K` stamped with epoch `E` arriving on `Q` is **held** if `K` may have
//!   unprocessed records elsewhere: some epoch `e` with `S <= e < E` placed `K` on `P != Q` (`S` =
//!   the lowest drained value over all partitions, so everything below `S` is processed
//!   everywhere; an epoch whose assignment is unknown counts as "anywhere"). It is **released**
//!   when every such `P` has drained `E`, and after every earlier held record of `K` with an epoch
//!   at most `E` (those may be its own producer's; one with a higher epoch cannot be, a producer's
//!   epochs never decrease). An unstamped record on `Q` passes at once unless `K` has held
//!   records of epochs at most `H`, the highest drained value `Q` has had (committed by a
//!   previous owner, or reached here); then it queues behind them (it may be its producer's next
//!   record of a moved key: a producer stops stamping a key only once the group settled the epoch
//!   it last stamped it in, so those records are of epochs at most `H`), counted as a record of
//!   `H` (its epoch is at least `H`). `K`'s held records of higher epochs
//!   are other producers', ahead of its own: it does not wait for them. Keyless records pass at once; barrier records never reach
//!   the application (a barrier record: null key, null value, well-formed `dkg-barrier` and
//!   `dkg-producer`; see "Untrusted input" for the rest).
//!
//! **Why no deadlock.** Passing a barrier of epoch `E` waits only for records of epochs *below*
//! `E`, and passes `e` as soon as nothing below it of an epoch below `e` is unprocessed (a producer
//! that skipped epochs has one barrier for all of them). A held record of epoch `E` never blocks the barrier of its own epoch on its own
//! partition; it waits for partitions to drain `E` and for held records of epochs at most `E`,
//! which wait only for records of epochs below `E`, which wait for epochs further below: the
//! chain ends. (Committed offsets are not used as progress for exactly this reason: a held record
//! keeps its partition's offset low, and two partitions swapping keys would wait on each other.)
//! A deterministic simulation in the tests (`core.rs`) checks order, exclusivity, no loss and no
//! stall over thousands of random interleavings of producers, members, commits and crashes.
//!
//! # The guarantee
//!
//! Definitions: a record is **processed** when the application asks for the next record
//! (`DkgConsumer::recv`, `DkgConsumer::recv_borrowed`), or calls `DkgConsumer::commit` or
//! `DkgConsumer::close`, after receiving it. A producer is **ordering** when built with
//! `ordering(true)` and the topic declared with
//! `topics`. A switch to epoch `E` has **drained** when
//! every partition has drained `E` (typically well under a second after the producers adopt it).
//!
//! Which records carry their epoch matters. With
//! `EpochHeader::All` every record does and the guarantees below
//! hold unconditionally. With the default `EpochHeader::Moved` an ordering producer stamps the
//! keys an epoch switch moved only inside the switch's **stamp window** ([`crate::window`],
//! `docs/spec.md` 9.2.2): until every group following the topic has settled the switch (read
//! from the groups' progress records), at most a bound (60 s by default). The guarantees then hold
//! for every group that announced progress before a switch and settles it within the bound,
//! also with epochs in quick succession (the simulation adopts epochs without waiting for drains);
//! a group slower than the bound keeps them only if each switch drains before the producers adopt
//! the following epoch, and may otherwise see a producer's unstamped records of a recently moved
//! key before its older ones.
//!
//! - **Order.** For every key and every ordering producer that stays alive (or closes cleanly),
//!   the application sees the producer's records of the key in send order, across any number of
//!   epoch switches, rebalances and consumer crashes (after a crash, in order from some earlier
//!   record on: see at-least-once).
//! - **Exclusivity across a switch.** A moved key's records of the new epoch are processed only
//!   after every record of it from earlier epochs (of every awaited producer) was processed and
//!   committed on its old partition: no two members process a moved key at once. This holds
//!   across consumer crashes: a new owner skips records the previous owner processed below its
//!   passed barriers (the committed metadata says which), so it never re-processes old records
//!   of a key another member already processes.
//! - **No loss, at-least-once.** Nothing is lost by the wrapper: held records keep the committed
//!   offset below them, so a crash or revocation re-delivers them. The commit metadata also lists
//!   which records between the committed offset and the fetch position were still unprocessed, so
//!   a new owner skips the others: a clean revocation or close re-delivers nothing that was
//!   processed. A crash re-delivers the records processed since the last commit (as with plain
//!   Kafka), in partition order. (If a partition has so many unprocessed records that their list
//!   does not fit the metadata limit, the list is left out and a revocation may re-deliver too.)
//! - **Consumer crash.** Dropping a `DkgConsumer` without `close` behaves
//!   like a crash that the group notices at once: nothing more is committed, no hook runs. The
//!   group rebalances; new owners resume from the committed offsets with the committed passed
//!   maps. A crash between a progress commit and its announcement is harmless (the commit is
//!   what the next owner reads; the announcement only lets others proceed).
//! - **Producer crash.** A producer that dies stops being awaited when its lease expires
//!   (default 10 s): moved keys are held at most that long because of it. Its records written
//!   shortly before death may then be processed out of order relative to its records of the new
//!   epoch, if its old partition's consumer lags by more than the lease.
//!
//! Not covered: records routed before an ordering producer's lease is visible (topics not
//! declared at build are registered on first use, within milliseconds); records placed by
//! producers without ordering; a retraction (tombstone) back to Kafka's default placement (records
//! then carry no epoch); **a change of the topic's partition count**: producers then place
//! records by Kafka's hash over the new count (until an assignment for it is published), which
//! moves keys with no barrier and no stamp, so a moved key's records on its new partition may be
//! processed before its older ones, by another member (producers count each change in
//! `dkg_producer_partition_count_changes_total`; the switch to the later matching assignment is
//! an ordinary epoch switch again); with `EpochHeader::Moved`, the lagging-group case above.
//! Clocks must agree to well within a lease duration (bounded by `max_lease`, see "Untrusted
//! input").
//!

//! # Untrusted input
//!
//! The protocol's waits are bounded by its own inputs, never by what a single record claims:
//!
//! - **Unknown epochs.** A record stamped with an epoch `E` above every epoch the member knows
//!   (a producer following another control topic, a recreated control topic, a bogus
//!   `dkg-epoch` header) can never be released by a drain: no partition drains past the newest
//!   known epoch. It waits like any stamped record while `E` may still be on its way (a producer
//!   can adopt `E` a moment before this member's control reader reads it), but at most
//!   [`core::CoreConfig::unknown_epoch_wait`] from its arrival (the caller's [`Monotonic`]
//!   clock; the glue's default is 10 s). If `E` is still unknown then, the record is released
//!   (after the earlier held records of its key, as always), counted
//!   ([`core::Anomalies::unknown_epoch_records`]). Records of its key of a known epoch, and
//!   unstamped ones, do not queue behind it: an unstamped record queued behind held records
//!   counts as of their highest epoch capped at the newest known one (so it still blocks the
//!   barriers above it), and a record of a lower epoch is never its producer's successor.
//!   Reaching the end of the control topic is not used as proof: an epoch published just after
//!   would be missed. If `E` becomes known within the bound the normal rules apply. Other keys
//!   of the partition never wait for such a record; its partition's commits stay below it only
//!   for the bound.
//! - **Lease expiry.** A lease read when this member's wall clock says `t` counts as expiring at
//!   `min(expires_at_ms, t + max_lease)` ([`core::CoreConfig::max_lease`], default 4 x the
//!   producers' default lease, 120 s); each renewal re-reads it. A producer whose clock runs far
//!   ahead, or a bad lease record, is therefore waited for at most `max_lease` after its last
//!   renewal; a clamp is counted ([`core::Anomalies::clamped_leases`]). Producers' lease durations
//!   must stay below `max_lease`, or they count as dead between renewals.
//! - **Barrier headers on data.** Only a record with a null key, a null value and well-formed
//!   `dkg-barrier` and `dkg-producer` headers is a barrier (every ordering producer writes exactly
//!   that). A record that carries `dkg-barrier` otherwise (no valid producer, a key or a value) is
//!   the application's data: it is delivered like any record (held or not by the rules above, by
//!   its `dkg-epoch`) and counted, never consumed and committed past.
//!
//! # Split keys
//!
//! A heavy key too heavy for one partition may be **split**: an assignment (format version 2,
//! `docs/spec.md` section 11.2) spreads its records over several partitions, its *parts*, by a
//! per-producer deterministic round robin. Rules ([`split`] holds the consumer's part):
//!
//! - **Producers stamp nothing on split records**, in every `EpochHeader` mode (they are the
//!   heaviest records, and a Java `Partitioner` cannot add a header). A record of a key that is
//!   whole in the producer's current epoch but was split in the previous one always counts as
//!   **moved** (it is stamped under `EpochHeader::Moved`, as any moved key's).
//! - **Which records are split.** The consumer knows from the assignment history which keys are
//!   split in which epoch and over which parts. A stamped record's epoch is its header. An
//!   unstamped record on partition `Q`, fetched when `Q` has drained `D`, is of epoch `D` or
//!   `D + 1`: at least `D` (every awaited producer's barrier of `D` lies below it) and at most
//!   `D + 1` under the condition that each switch drains before producers adopt the next epoch
//!   (the condition `EpochHeader::Moved` already needs; for split keys it is needed in every
//!   mode, since their records carry no epoch). The record is **split** when a split of its key
//!   in one of those epochs has a part on `Q` (the newest such epoch gives the number of parts);
//!   when the two epochs disagree, split wins: a whole record taken for split only costs a
//!   partial aggregate, the opposite would break the application's per-key state.
//! - **Never held once split.** A split record waits only for its key's **whole** homes of the
//!   epochs not yet settled everywhere (`S..e`, `e` its split epoch): once the group has settled
//!   `e` nothing is waited for, and the fast path takes split records like any other.
//! - **Whole -> split**: a split record of epoch `e` on a new part waits until the key's old
//!   partition (its whole homes in `S..e`) has drained `e`, like a moved key's record. If the
//!   record may as well be of epoch `D = e - 1` and that epoch placed its key on `Q` too, it
//!   counts as a record of `D` (so `Q` does not drain `e` past it) while waiting for the drain of
//!   `e`; what waits for `Q` to drain `e` is of epoch `e` or later, so no cycle forms.
//! - **Split -> whole**: a whole record of epoch `E` (stamped: it moved) waits until every part of
//!   every split epoch in `S..E`, and every whole home there, has drained `E`.
//! - **Between two splits** of the same key (split -> split with other parts) nothing waits:
//!   order is not kept among a split key's records anyway.
//! - **Labels and hooks.** The label ([`core::Core::split_label`], the fast path's
//!   `Lanes::split_label`) is decided when the record arrives. `DkgConsumer` shows it as
//!   `DkgMessage::split_parts` and runs `ConsumerHooks::on_split_change` once per key and
//!   transition when it learns an epoch that splits a key, splits it differently, or makes it
//!   whole again (and at start for the keys split in the first epoch it learns).
//! - **Where the consumer cannot tell**: an unstamped record on a partition where no epoch in
//!   `D..=D + 1` it knows places its key (an explicit partition, a producer outside DKG, or an
//!   epoch this member has not read yet) is treated as today: delivered at once, labelled whole.
//!   A record re-delivered after a crash is labelled by the partition's state then.
//!
//! **The guarantee for split keys.** Every whole record of a key keeps the guarantees above
//! against every other record of the key, split or whole: the split records of epoch `e` are
//! processed after the key's whole records of earlier epochs, and its whole records after a split
//! epoch after every split record of it from its producers. **Across a split key's parts, order
//! is not guaranteed**, and no single member sees all of its records: split records of a key may
//! be processed in any order relative to each other, concurrently by several members. The
//! standard pattern is a partial aggregate per partition, merged downstream
//! (`partitioner/examples/split_aggregates.rs`).
//!

/// A reading of the caller's monotonic clock: the time since an origin of its choosing (the glue
/// uses its process start). Hold times and stall timeouts are differences of two readings; nothing
/// in this crate reads a clock, the tests start from [`Duration::ZERO`](std::time::Duration::ZERO).
pub type Monotonic = std::time::Duration;

pub mod core;
pub mod history;
pub mod hold;
pub mod lane;
pub mod progress;
pub mod split;
