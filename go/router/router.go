// Package router follows a dkg control topic with franz-go (pure Go) and places keyed records by
// the current assignment of each data topic (docs/spec.md 5-7). One Router serves every client
// adapter: Partitioner for franz-go here, dkgsarama for IBM/sarama, dkgkafkago for
// segmentio/kafka-go, and PartitionFor for clients without a partitioner hook (confluent-kafka-go).
package router

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	dkg "dkg.dev/dkg-go"
)

// DefaultControlTopic is the control topic's default name (spec 6.1).
const DefaultControlTopic = "_dkg.assignments"

// Config configures a Router. Seeds is required; every other field has a default.
type Config struct {
	// Seeds are the bootstrap servers of the cluster holding the control topic.
	Seeds []string
	// ControlTopic is the control topic (default "_dkg.assignments").
	ControlTopic string
	// StartupTimeout bounds reading the control topic to its end in New (default 30 s).
	StartupTimeout time.Duration
	// MaxValueBytes lowers the control value size limit (default and maximum 8 MiB).
	MaxValueBytes int
	// MetadataRefresh is the partition-count refresh interval of PartitionFor (default 5 s, min 100 ms).
	MetadataRefresh time.Duration
	// Registerer receives the dkg_producer_* metrics (nil: none are registered).
	Registerer prometheus.Registerer
	// Topics are declared up front: they export metrics before their first record.
	Topics []string
	// Logger logs adoptions and rejections (default slog.Default()).
	Logger *slog.Logger
	// ClientOpts are extra franz-go options of the control-topic reader (TLS, SASL, ...).
	ClientOpts []kgo.Opt
}

// Router follows the control topic and places keys. Safe for concurrent use; Place never blocks.
type Router struct {
	cfg      Config
	log      *slog.Logger
	client   *kgo.Client
	admin    *kadm.Client
	topics   sync.Map // string -> *topicState
	rejected [dkg.NumReasons]atomic.Uint64
	// adopted counts adoptions and retractions, for tests and callers waiting for a switch.
	changes   atomic.Uint64
	ctx       context.Context
	cancel    context.CancelFunc
	done      chan struct{}
	kick      chan struct{}
	collector *collector
	// offline is the book of a Router made by NewOffline (fed by Apply).
	offline   *dkg.Book
	offlineMu sync.Mutex
}

// topicState is one data topic's routing state: the assignment is swapped whole (a record is
// placed by one assignment, never a mix); counters are atomics read at scrape time.
type topicState struct {
	name       string
	assignment atomic.Pointer[dkg.Assignment]
	used       atomic.Bool
	// unknown counts records left to the client while the count was unknown (PartitionFor).
	unknown atomic.Uint64
	count   atomic.Int64 // last partition count seen, 0 = none
	changes atomic.Uint64
	partsMu sync.Mutex
	// cells[4*p+route] counts records placed on partition p by route: one atomic add per record
	// serves both dkg_producer_records_total and dkg_producer_partition_records_total.
	cells     atomic.Pointer[[]*atomic.Uint64]
	metaCount atomic.Int64 // PartitionFor's count from metadata, 0 = unknown
	// rejected counts control records naming this topic that were rejected, once it is used.
	rejected [dkg.NumReasons]atomic.Uint64
}

// OtherTopic is the topic label of rejected control records that name no topic this router
// produces to (another producer's topic, or none): not a legal topic name, so it never collides
// with one, and the series stay bounded by the producer's own topics (spec 10).
const OtherTopic = "(other)"

// New starts a Router: it reads the control topic to its end (an error after StartupTimeout), then
// follows it in the background until Close. A missing control topic reads as empty.
func New(ctx context.Context, cfg Config) (*Router, error) {
	if len(cfg.Seeds) == 0 {
		return nil, errors.New("dkg router: no seed brokers")
	}
	if cfg.ControlTopic == "" {
		cfg.ControlTopic = DefaultControlTopic
	}
	if cfg.StartupTimeout <= 0 {
		cfg.StartupTimeout = 30 * time.Second
	}
	if cfg.MetadataRefresh <= 0 {
		cfg.MetadataRefresh = 5 * time.Second
	}
	cfg.MetadataRefresh = max(cfg.MetadataRefresh, 100*time.Millisecond)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.ControlTopic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Markers are kept so the reader sees the offsets of transaction markers (the sampler
		// publishes transactionally): reading "to the end" counts them.
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.FetchMaxPartitionBytes(16 << 20),
		kgo.FetchMaxBytes(32 << 20),
	}, cfg.ClientOpts...)
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("dkg router: %w", err)
	}
	r := &Router{cfg: cfg, log: cfg.Logger, client: client, admin: kadm.NewClient(client),
		done: make(chan struct{}), kick: make(chan struct{}, 1)}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	for _, t := range cfg.Topics {
		r.topic(t).used.Store(true)
	}
	book := dkg.NewBook(cfg.MaxValueBytes)
	startCtx, cancel := context.WithTimeout(ctx, cfg.StartupTimeout)
	defer cancel()
	if err := r.catchUp(startCtx, book); err != nil {
		client.Close()
		return nil, err
	}
	if cfg.Registerer != nil {
		r.collector = &collector{r: r}
		if err := cfg.Registerer.Register(r.collector); err != nil {
			client.Close()
			return nil, fmt.Errorf("dkg router: registering metrics: %w", err)
		}
	}
	go r.follow(book)
	go r.refreshCounts()
	return r, nil
}

// Close stops following (the last adopted assignments stay in use) and unregisters the metrics.
func (r *Router) Close() {
	r.cancel()
	<-r.done
	if r.client != nil {
		r.client.Close()
	}
	if r.collector != nil {
		r.cfg.Registerer.Unregister(r.collector)
	}
}

// endOffset is the control partition's last stable offset (read_committed), 0 for a missing topic.
func (r *Router) endOffset(ctx context.Context) (int64, error) {
	listed, err := r.admin.ListCommittedOffsets(ctx, r.cfg.ControlTopic)
	if err != nil {
		return 0, err
	}
	o, ok := listed.Lookup(r.cfg.ControlTopic, 0)
	if !ok || errors.Is(o.Err, kerr.UnknownTopicOrPartition) {
		return 0, nil
	}
	if o.Err != nil {
		return 0, o.Err
	}
	return o.Offset, nil
}

// catchUp applies every record up to the end offset found at start.
func (r *Router) catchUp(ctx context.Context, book *dkg.Book) error {
	var end int64
	for {
		var err error
		if end, err = r.endOffset(ctx); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("dkg router: listing the end of %s: %w", r.cfg.ControlTopic, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	next := int64(0)
	for next < end {
		fetches := r.client.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("dkg router: reading %s to its end (offset %d of %d) within the start-up timeout: %w",
				r.cfg.ControlTopic, next, end, ctx.Err())
		}
		next = r.applyFetches(fetches, book, next)
	}
	return nil
}

func (r *Router) follow(book *dkg.Book) {
	defer close(r.done)
	next := int64(0)
	for r.ctx.Err() == nil {
		next = r.applyFetches(r.client.PollFetches(r.ctx), book, next)
	}
}

// applyFetches applies the polled records in order and returns the next offset to read; on a
// re-read (spec 6.4 G5) it rewinds the reader to the beginning and drops the rest of the poll.
func (r *Router) applyFetches(fetches kgo.Fetches, book *dkg.Book, next int64) int64 {
	fetches.EachError(func(topic string, p int32, err error) {
		if !errors.Is(err, context.Canceled) && !errors.Is(err, kerr.UnknownTopicOrPartition) {
			r.log.Warn("dkg router: fetching the control topic", "topic", topic, "partition", p, "err", err)
		}
	})
	iter := fetches.RecordIter()
	for !iter.Done() {
		rec := iter.Next()
		if rec.Offset < next {
			continue // a poll buffered before a rewind
		}
		next = rec.Offset + 1
		if rec.Attrs.IsControl() {
			continue
		}
		if r.apply(book, rec.Key, rec.Value) {
			r.client.SetOffsets(map[string]map[int32]kgo.EpochOffset{r.cfg.ControlTopic: {0: {Epoch: -1, Offset: 0}}})
			return 0
		}
	}
	return next
}

// apply applies one record and publishes its effect; true when the reader must re-read.
func (r *Router) apply(book *dkg.Book, key, value []byte) bool {
	return r.publish(book.Apply(key, value))
}

// publish makes a book update visible to Place; true when the reader must re-read.
func (r *Router) publish(u dkg.Update) bool {
	switch u.Outcome {
	case dkg.Accepted:
		r.topic(u.Topic).assignment.Store(u.Assignment)
		r.changes.Add(1)
		r.log.Info("dkg router: adopted an assignment", "topic", u.Topic, "epoch", u.Assignment.Epoch,
			"partitions", u.Assignment.Partitions)
	case dkg.Retracted:
		r.topic(u.Topic).assignment.Store(nil)
		r.changes.Add(1)
		r.log.Info("dkg router: assignment retracted, Kafka's placement until the next one", "topic", u.Topic)
	case dkg.Rejected:
		if v, ok := r.topics.Load(u.Topic); ok && v.(*topicState).used.Load() {
			v.(*topicState).rejected[u.Err.Reason].Add(1)
		} else {
			r.rejected[u.Err.Reason].Add(1)
		}
		r.log.Warn("dkg router: control record rejected, the last good assignment stays", "key", u.Topic,
			"reason", u.Err.Reason.String(), "detail", u.Err.Detail)
	case dkg.Reset, dkg.Reread:
		r.topics.Range(func(_, v any) bool {
			v.(*topicState).assignment.Store(nil)
			return true
		})
		r.changes.Add(1)
		r.log.Warn("dkg router: control topic generation changed, every assignment dropped", "outcome", u.Outcome.String())
		return u.Outcome == dkg.Reread
	}
	return false
}

func (r *Router) topic(name string) *topicState {
	if v, ok := r.topics.Load(name); ok {
		return v.(*topicState)
	}
	v, _ := r.topics.LoadOrStore(name, &topicState{name: name})
	return v.(*topicState)
}

// Assignment returns the current assignment of topic, or nil.
func (r *Router) Assignment(topic string) *dkg.Assignment {
	if v, ok := r.topics.Load(topic); ok {
		return v.(*topicState).assignment.Load()
	}
	return nil
}

// Epoch is the epoch of topic's current assignment, 0 without one.
func (r *Router) Epoch(topic string) uint64 {
	if a := r.Assignment(topic); a != nil {
		return a.Epoch
	}
	return 0
}

// Rejected is the number of control records rejected for reason so far, every topic.
func (r *Router) Rejected(reason dkg.Reason) uint64 {
	n := r.rejected[reason].Load()
	r.topics.Range(func(_, v any) bool {
		n += v.(*topicState).rejected[reason].Load()
		return true
	})
	return n
}

// Place is the partition of a keyed record of topic over partitions partitions (spec 5), counted in
// the metrics: the current assignment in effect, else Kafka's murmur2 placement. Never blocks;
// the result is in [0, partitions).
func (r *Router) Place(topic string, key []byte, partitions int) (int, dkg.Route) {
	return r.topic(topic).place(key, partitions)
}

func (t *topicState) place(key []byte, n int) (int, dkg.Route) {
	p, route := dkg.Place(t.assignment.Load(), n, key)
	t.count1(n)
	t.cell(4*p + int(route)).Add(1)
	return p, route
}

// count1 records the partition count seen and counts changes after the first.
func (t *topicState) count1(n int) {
	last := t.count.Load()
	if last == int64(n) {
		return
	}
	if t.count.CompareAndSwap(last, int64(n)) {
		if last == 0 {
			t.used.Store(true)
		} else {
			t.changes.Add(1)
		}
	}
}

func (t *topicState) cell(p int) *atomic.Uint64 {
	if cells := t.cells.Load(); cells != nil && p < len(*cells) {
		return (*cells)[p]
	}
	t.partsMu.Lock()
	defer t.partsMu.Unlock()
	var old []*atomic.Uint64
	if cells := t.cells.Load(); cells != nil {
		old = *cells
	}
	if p < len(old) {
		return old[p]
	}
	grown := append(make([]*atomic.Uint64, 0, p+1), old...)
	for len(grown) <= p || len(grown)%4 != 0 { // whole partitions: 4 routes each
		grown = append(grown, new(atomic.Uint64))
	}
	t.cells.Store(&grown)
	return grown[p]
}

// PartitionFor is the placement for clients without a partitioner hook (confluent-kafka-go: set
// TopicPartition.Partition to it): the partition of a keyed record of topic with the topic's
// partition count from metadata (refreshed every MetadataRefresh). ok is false while the count is
// not known yet (the first call asks for it without waiting): leave such a record to the client's
// partitioner (kgo/librdkafka "murmur2_random" places it as the fallback would, spec 7.2).
func (r *Router) PartitionFor(topic string, key []byte) (partition int32, ok bool) {
	t := r.topic(topic)
	n := t.metaCount.Load()
	if n <= 0 {
		if t.used.CompareAndSwap(false, true) {
			select {
			case r.kick <- struct{}{}:
			default:
			}
		}
		t.unknown.Add(1)
		return 0, false
	}
	p, _ := t.place(key, int(n))
	return int32(p), true
}

// refreshCounts keeps PartitionFor's counts of used topics fresh; a failed refresh keeps the last
// count, a topic that disappears reads as unknown (spec 7.2).
func (r *Router) refreshCounts() {
	tick := time.NewTicker(r.cfg.MetadataRefresh)
	defer tick.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-tick.C:
		case <-r.kick:
		}
		var names []string
		r.topics.Range(func(k, v any) bool {
			if v.(*topicState).used.Load() {
				names = append(names, k.(string))
			}
			return true
		})
		if len(names) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
		details, err := r.admin.ListTopics(ctx, names...)
		cancel()
		if err != nil {
			continue
		}
		for _, name := range names {
			d, ok := details[name]
			t := r.topic(name)
			switch {
			case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
				t.metaCount.Store(0)
			case d.Err == nil:
				t.metaCount.Store(int64(len(d.Partitions)))
			}
		}
	}
}

// WaitForEpoch waits until topic's current assignment has an epoch >= epoch (tests, tools).
func (r *Router) WaitForEpoch(ctx context.Context, topic string, epoch uint64) error {
	for r.Epoch(topic) < epoch {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for epoch %d of %s (now %d): %w", epoch, topic, r.Epoch(topic), ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// NewOffline returns a Router that follows no control topic: every key takes Kafka's placement
// until records are fed with Apply (tests, tools that read the control topic themselves).
// Metrics go to reg when it is not nil.
func NewOffline(reg prometheus.Registerer) (*Router, error) {
	r := &Router{cfg: Config{Registerer: reg}, log: slog.Default(), done: make(chan struct{}), kick: make(chan struct{}, 1)}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.offline = dkg.NewBook(0)
	close(r.done)
	if reg != nil {
		r.collector = &collector{r: r}
		if err := reg.Register(r.collector); err != nil {
			return nil, fmt.Errorf("dkg router: registering metrics: %w", err)
		}
	}
	return r, nil
}

// Apply feeds one control record (value nil: a tombstone) to an offline Router, with the effect
// a record read from the control topic has. It panics on a Router made by New.
func (r *Router) Apply(key, value []byte) dkg.Update {
	if r.offline == nil {
		panic("dkg router: Apply on a Router that follows a control topic")
	}
	r.offlineMu.Lock()
	defer r.offlineMu.Unlock()
	u := r.offline.Apply(key, value)
	r.publish(u)
	return u
}
