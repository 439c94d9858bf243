package brokertest

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dkg "dkg.dev/dkg-go"
)

func buildConsoleProducer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "dkg-console-producer")
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/dkg-console-producer").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// The console producer places a keyed stream exactly as the spec says under a published assignment,
// and exits non-zero when records are not acknowledged.
func TestConsoleProducerPlacesByTheSpec(t *testing.T) {
	bin := buildConsoleProducer(t)
	const partitions = 5
	b, topic, control := dataAndControl(t, "console", partitions)
	heavy := []string{"hot", "warm", "user-7"}
	publish(t, producer(t), control, []byte(topic), document(topic, partitions, 3, heavy, 9))
	a, err := dkg.DecodeAssignment(document(topic, partitions, 3, heavy, 9))
	if err != nil {
		t.Fatal(err)
	}
	var in strings.Builder
	const lines = 3000
	for i := 0; i < lines; i++ {
		key := fmt.Sprintf("user-%d", i%300)
		if i%3 == 0 {
			key = heavy[i%len(heavy)]
		}
		fmt.Fprintf(&in, "%s\tvalue-%d\n", key, i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--bootstrap-server", b, "--topic", topic, "--control-topic", control)
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("dkg-console-producer: %v\n%s", err, out)
	}
	recs := readAll(t, topic)
	if len(recs) != lines {
		t.Fatalf("%d records, want %d", len(recs), lines)
	}
	routes := map[dkg.Route]int{}
	for _, rec := range recs {
		p, route := dkg.Place(a, partitions, rec.Key)
		if int32(p) != rec.Partition {
			t.Fatalf("%q on %d, the spec says %d", rec.Key, rec.Partition, p)
		}
		if !bytes.HasPrefix(rec.Value, []byte("value-")) {
			t.Fatalf("value %q", rec.Value)
		}
		routes[route]++
	}
	if routes[dkg.RouteHeavy] < lines/3 || routes[dkg.RouteBucket] == 0 {
		t.Fatalf("routes %v", routes)
	}

	// A topic that does not exist: records are not acknowledged, the exit status says so.
	cmd = exec.CommandContext(ctx, bin, "--bootstrap-server", b, "--topic", unique("missing"), "--control-topic", control)
	cmd.Stdin = strings.NewReader("k\tv\n")
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("exit 0 for a missing topic:\n%s", out)
	}
}
