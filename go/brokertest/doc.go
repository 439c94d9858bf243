// Package brokertest holds the Go module's broker tests (go test ./brokertest): they need a Kafka
// broker at DKG_TEST_BOOTSTRAP and fail without one (never skip), the dkg-sampler binary at
// DKG_SAMPLER_BIN or the repository's target/debug/dkg-sampler, and the lab's dkg-lab (its loadgen) at
// DKG_LAB_BIN or target/debug/dkg-lab (scripts/test builds both first).
package brokertest
