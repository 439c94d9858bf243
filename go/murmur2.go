package dkg

import "encoding/binary"

// KafkaSeed is the murmur2 seed of Kafka's default placement (spec 3.1).
const KafkaSeed uint32 = 0x9747b28c

// Murmur2 is MurmurHash2, 32 bits, little-endian word reads, as Kafka's Java client and librdkafka
// compute it (spec 3.1). Kafka always uses KafkaSeed; the bucket hash uses the document's seed.
func Murmur2(data []byte, seed uint32) uint32 {
	const m uint32 = 0x5bd1e995
	h := seed ^ uint32(len(data))
	for len(data) >= 4 {
		k := binary.LittleEndian.Uint32(data)
		data = data[4:]
		k *= m
		k ^= k >> 24
		k *= m
		h = h*m ^ k
	}
	switch len(data) {
	case 3:
		h ^= uint32(data[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}

// ToPositive clears the sign bit (Kafka's Utils.toPositive; never abs, spec 3.2).
func ToPositive(h uint32) uint32 { return h & 0x7fffffff }

// KafkaPartition is Kafka's default placement of a keyed record over n partitions (spec 3.3):
// the fallback of every adapter before an assignment is in effect. n < 1 yields 0.
func KafkaPartition(key []byte, n int) int {
	if n < 1 {
		return 0
	}
	return int(ToPositive(Murmur2(key, KafkaSeed)) % uint32(n))
}

// Bucket is the bucket hash of spec 3.4; buckets < 1 yields 0.
func Bucket(key []byte, seed uint32, buckets uint32) uint32 {
	if buckets == 0 {
		return 0
	}
	return ToPositive(Murmur2(key, seed)) % buckets
}
