// Command dkg-console-producer reads key<TAB>value lines from stdin and produces each as a record
// of --topic through franz-go with the dkg partitioner (idempotent, acks=all). It exits 0 only when
// every record was acknowledged. A line without a tab is a record with that key and an empty value.
//
//	dkg-console-producer --bootstrap-server 127.0.0.1:9092 --topic orders < records.tsv
//
// It is to Go users what Kafka's console producer with partitioner.class is to Java users.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"dkg.dev/dkg-go/router"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stderr))
}

func run(args []string, stdin io.Reader, stderr io.Writer) int {
	fs := flag.NewFlagSet("dkg-console-producer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bootstrap := fs.String("bootstrap-server", envOr("DKG_BOOTSTRAP_SERVERS", ""), "Kafka bootstrap servers, host:port[,host:port...] (env DKG_BOOTSTRAP_SERVERS)")
	topic := fs.String("topic", envOr("DKG_TOPIC", ""), "the data topic to produce to (env DKG_TOPIC)")
	control := fs.String("control-topic", envOr("DKG_CONTROL_TOPIC", router.DefaultControlTopic), "the control topic to follow (env DKG_CONTROL_TOPIC)")
	startup := fs.Duration("startup-timeout", 30*time.Second, "bound on reading the control topic to its end at start")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *bootstrap == "" || *topic == "" {
		fmt.Fprintln(stderr, "dkg-console-producer: --bootstrap-server and --topic are required")
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	seeds := strings.Split(*bootstrap, ",")
	ctx := context.Background()
	r, err := router.New(ctx, router.Config{Seeds: seeds, ControlTopic: *control, StartupTimeout: *startup, Logger: log})
	if err != nil {
		fmt.Fprintf(stderr, "dkg-console-producer: %v\n", err)
		return 1
	}
	defer r.Close()
	client, err := kgo.NewClient(
		kgo.SeedBrokers(seeds...),
		kgo.RecordPartitioner(r.Partitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), // franz-go's default, stated: no-loss settings (spec 7.4)
		kgo.DefaultProduceTopic(*topic),
		kgo.ProducerLinger(5*time.Millisecond),
	)
	if err != nil {
		fmt.Fprintf(stderr, "dkg-console-producer: %v\n", err)
		return 1
	}
	defer client.Close()

	var failed atomic.Int64
	var firstErr sync.Once
	var sent int64
	in := bufio.NewReaderSize(stdin, 1<<20)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 {
			line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
			key, value, _ := bytes.Cut(line, []byte("\t"))
			rec := &kgo.Record{Key: append([]byte{}, key...), Value: append([]byte{}, value...)}
			sent++
			client.Produce(ctx, rec, func(_ *kgo.Record, err error) {
				if err != nil {
					failed.Add(1)
					firstErr.Do(func() { fmt.Fprintf(stderr, "dkg-console-producer: a record failed: %v\n", err) })
				}
			})
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fmt.Fprintf(stderr, "dkg-console-producer: reading stdin: %v\n", err)
			failed.Add(1)
			break
		}
	}
	if err := client.Flush(ctx); err != nil {
		fmt.Fprintf(stderr, "dkg-console-producer: flush: %v\n", err)
		return 1
	}
	if n := failed.Load(); n > 0 {
		fmt.Fprintf(stderr, "dkg-console-producer: %d of %d records not acknowledged\n", n, sent)
		return 1
	}
	return 0
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
