//! Golden vectors for Kafka's murmur2, taken verbatim from the two reference clients' own tests.
//! If one of these fails, records would land on different partitions than a stock producer's.

use dkg_kafka_core::{KAFKA_MURMUR2_SEED, kafka_partition, murmur2, murmur2_seeded, to_positive};

/// Apache Kafka, `clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java`,
/// `testMurmur2` (expected values are Java `int`s).
const KAFKA_UTILS_TEST: &[(&[u8], i32)] = &[
    (b"21", -973_932_308),
    (b"foobar", -790_332_482),
    (b"a-little-bit-long-string", -985_981_536),
    (b"a-little-bit-longer-string", -1_486_304_829),
    (
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
        -58_897_971,
    ),
    // Java builds this one as `new byte[] {'a', 'b', 'c'}`.
    (b"abc", 479_470_107),
];

/// librdkafka, `src/rdmurmur2.c`, `unittest_murmur2` (`java_murmur2_results`). The C test feeds
/// `"1234"` and `"PreAmbleWillBeRemoved,ThePrePartThatIs"` at offsets 0..=3 to exercise its aligned
/// and unaligned paths; here those are the suffixes. Its last two rows are `""` and `NULL` (length 0).
const LIBRDKAFKA_UNITTEST: &[(&[u8], u32)] = &[
    (b"kafka", 0xd067_cf64),
    (b"giberish123456789", 0x8f55_2b0c),
    (b"1234", 0x9fc9_7b14),
    (b"234", 0xe7c0_09ca),
    (b"34", 0x8739_30da),
    (b"4", 0x5a4b_5ca1),
    (b"PreAmbleWillBeRemoved,ThePrePartThatIs", 0x7842_4f1c),
    (b"reAmbleWillBeRemoved,ThePrePartThatIs", 0x4a62_b377),
    (b"eAmbleWillBeRemoved,ThePrePartThatIs", 0xe0e4_e09e),
    (b"AmbleWillBeRemoved,ThePrePartThatIs", 0x62b8_b43f),
    (b"", 0x106e_08d9),
];

/// librdkafka, `tests/0048-partitioner.c`, `do_test_partitioners`: expected partitions of the
/// `murmur2` / `murmur2_random` partitioners ("acquired using tests/java/Murmur2Cli", i.e. the Java
/// client) are `value % part_cnt` with `part_cnt` 17 (or 7 in quick mode). The values are already
/// `toPositive(murmur2(key))`. Keys: `""`, `"123456" + 1`, a long string, `"hejsan"` (the NULL key is
/// random under `murmur2_random`, and hashes like `""` under `murmur2`).
const LIBRDKAFKA_0048_PARTITIONER: &[(&[u8], u32)] = &[
    (b"", 0x106e_08d9),
    (b"23456", 0x058d_780f),
    (
        b"this is another string with more length to it perhaps",
        0x4f77_03da,
    ),
    (b"hejsan", 0x5ec1_9395),
];

#[test]
fn kafka_java_utils_test_vectors() {
    for &(key, expected) in KAFKA_UTILS_TEST {
        assert_eq!(
            murmur2(key) as i32,
            expected,
            "murmur2({:?})",
            String::from_utf8_lossy(key)
        );
    }
}

#[test]
fn librdkafka_rd_murmur2_unittest_vectors() {
    for &(key, expected) in LIBRDKAFKA_UNITTEST {
        assert_eq!(
            murmur2(key),
            expected,
            "murmur2({:?})",
            String::from_utf8_lossy(key)
        );
        assert_eq!(murmur2_seeded(key, KAFKA_MURMUR2_SEED), expected);
    }
}

#[test]
fn librdkafka_murmur2_partitioner_expected_partitions() {
    for &(key, positive) in LIBRDKAFKA_0048_PARTITIONER {
        assert_eq!(to_positive(murmur2(key)), positive);
        for part_cnt in [17_u32, 7] {
            assert_eq!(
                kafka_partition(key, part_cnt),
                positive % part_cnt,
                "key {:?}, {part_cnt} partitions",
                String::from_utf8_lossy(key)
            );
        }
    }
}

#[test]
fn every_tail_length_is_covered_by_the_vectors() {
    // The fallthrough `switch` on len % 4 is where ports usually break; make sure the tables above
    // pin all four cases.
    let mut seen = [false; 4];
    for &(key, _) in KAFKA_UTILS_TEST {
        seen[key.len() % 4] = true;
    }
    for &(key, _) in LIBRDKAFKA_UNITTEST {
        seen[key.len() % 4] = true;
    }
    assert_eq!(seen, [true; 4]);
}

#[test]
fn kafka_partition_never_panics_and_is_in_range() {
    for key in [&b""[..], b"x", b"some longer key bytes \xff\x00"] {
        assert_eq!(kafka_partition(key, 0), 0);
        for n in [1_u32, 2, 3, 17, 1000, u32::MAX] {
            assert!(kafka_partition(key, n) < n);
        }
    }
}
