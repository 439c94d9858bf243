package brokertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	dkg "dkg.dev/dkg-go"
	"dkg.dev/dkg-go/router"
)

// A missing control topic reads as empty (New returns) and is followed once it exists (spec 7.3).
func TestMissingControlTopicIsFollowedOnceCreated(t *testing.T) {
	b := bootstrap(t)
	topic := newTopic(t, "late", 3)
	control := unique("control-late")
	start := time.Now()
	r, err := router.New(context.Background(), router.Config{Seeds: []string{b}, ControlTopic: control, StartupTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	t.Logf("start-up on a missing control topic: %s", time.Since(start))
	compact := "compact"
	createTopic(t, control, 1, map[string]*string{"cleanup.policy": &compact})
	publish(t, producer(t), control, []byte(topic), document(topic, 3, 1, []string{"hot"}, 1))
	waitUntil(t, "the first assignment on the new control topic", 60*time.Second, func() bool { return r.Epoch(topic) == 1 })
}

// Spec 6.4 on the broker: a recreated control topic's new @generation resets every topic, and a
// document of a generation not in force makes the router read the control topic again from its
// beginning (the re-read meets the same document: generation_mismatch), then the topic's new
// generation record puts it in force and the next document is adopted.
func TestGenerationResetAndReread(t *testing.T) {
	b, topic, control := dataAndControl(t, "gen", 3)
	pub := producer(t)
	g1, g2 := "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	v2 := func(epoch uint64, gen string) []byte {
		d := string(document(topic, 3, epoch, []string{"hot"}, epoch))
		return []byte(replaceOnce(replaceOnce(d, `"version":1`, `"version":2`), fmt.Sprintf(`"epoch":%d`, epoch),
			fmt.Sprintf(`"epoch":%d,"generation":%q`, epoch, gen)))
	}
	genRecord := func(id string) []byte {
		return []byte(fmt.Sprintf(`{"format":"dkg.assignment","version":2,"kind":"generation","generation":%q}`, id))
	}
	publish(t, pub, control, []byte(dkg.GenerationKey), genRecord(g1))
	publish(t, pub, control, []byte(topic), v2(1, g1))
	r, err := router.New(context.Background(), router.Config{Seeds: []string{b}, ControlTopic: control})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Epoch(topic) != 1 {
		t.Fatalf("epoch %d at start", r.Epoch(topic))
	}
	// A new generation: every assignment dropped (Kafka's placement), then its documents adopted.
	publish(t, pub, control, []byte(dkg.GenerationKey), genRecord(g2))
	waitUntil(t, "the reset", 30*time.Second, func() bool { return r.Assignment(topic) == nil })
	publish(t, pub, control, []byte(topic), v2(2, g2))
	waitUntil(t, "epoch 2 under the new generation", 30*time.Second, func() bool { return r.Epoch(topic) == 2 })
	// A document of a third generation: re-read from the beginning (everything dropped, then the log
	// applied again up to it, where it is now a generation_mismatch).
	g3 := "00000000000000000000000000000003"
	before := r.Rejected(dkg.ReasonGenerationMismatch)
	publish(t, pub, control, []byte(topic), v2(3, g3))
	waitUntil(t, "the re-read to meet the document again", 30*time.Second, func() bool {
		return r.Rejected(dkg.ReasonGenerationMismatch) == before+1
	})
	// The re-read applied the log from its start: g1's document, g2's reset, g2's epoch 2.
	if r.Epoch(topic) != 2 {
		t.Fatalf("after the re-read: epoch %d, want 2", r.Epoch(topic))
	}
}

func replaceOnce(s, old, repl string) string {
	for i := 0; i+len(old) <= len(s); i++ {
		if s[i:i+len(old)] == old {
			return s[:i] + repl + s[i+len(old):]
		}
	}
	return s
}
