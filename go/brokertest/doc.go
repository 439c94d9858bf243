// Package brokertest holds the Go module's broker tests (go test ./brokertest): they need a Kafka
// broker at DKG_TEST_BOOTSTRAP and fail without one (never skip), and the dkg-sampler binary at
// DKG_SAMPLER_BIN or the repository's target/debug/dkg-sampler (scripts/test builds it first).
package brokertest
