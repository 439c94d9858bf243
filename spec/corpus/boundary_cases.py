"""Writes the hand-made inputs of spec/corpus/assignment/ (see README.md beside this file): the documents of
the reject vectors, and the boundary cases of docs/spec.md section 4 the fuzzer need not find (epochs around
2^53, the longest topic name, 16 and 17 heavy keys in a bucket, 64 split parts, number syntax, deep nesting, other
kinds of control value). Each file is named by the SHA-1 of its bytes, as libFuzzer names its inputs; the
verdicts come from the Rust decoder (`cargo run -p dkg-protocol --example corpus_verdicts`), not from here.

    python3 spec/corpus/boundary_cases.py spec/corpus/assignment
"""

import base64
import hashlib
import json
import os
import sys
from pathlib import Path

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
VECTORS = Path(__file__).resolve().parent.parent / "vectors"
BASE = '{"format":"dkg.assignment","version":1,"topic":"orders","partitions":3,"epoch":7,"bucket_hash":{"function":"murmur2","seed":625341585},"buckets":4,"table":[0,1,2,0],"heavy":[{"key_b64":"aG90","partition":1,"weight":1200}],"params":{"theta":0.01,"epsilon":0.005,"mu":4.0,"window_records":100000},"created_at_ms":1700000000000,"predicted_load":[0.5,0.25,0.25]}'
docs = []
def add(b):
    docs.append(b.encode() if isinstance(b, str) else b)
def edit(a, b, base=BASE):
    assert base.count(a) == 1, a
    return base.replace(a, b)
add(BASE)
for file in ("reject.json", "v2/reject.json"):
    for case in json.loads((VECTORS / file).read_text())["cases"]:
        if case.get("document_b64"):
            add(base64.b64decode(case["document_b64"]))
for e in ["0", "1", "9007199254740990", "9007199254740991", "9007199254740992", "9007199254740993",
          "18446744073709551615", "18446744073709551616", "99999999999999999999999", "-1", "-0", "7.0", "7e0",
          "1E1", "0.0", "07", "9007199254740991.0", "9.007199254740991e15"]:
    add(edit('"epoch":7,', '"epoch":%s,' % e))
V2 = edit('"version":1,', '"version":2,')
for e in ["9007199254740991", "9007199254740992", "18446744073709551615"]:
    add(edit('"epoch":7,', '"epoch":%s,' % e, V2))
add(V2)
# Retraction and generation documents (version 2): valid control values, not assignments.
add('{"format":"dkg.assignment","version":2,"kind":"retraction","topic":"orders","epoch":3,"created_at_ms":1}')
add('{"format":"dkg.assignment","version":2,"kind":"retraction","topic":"orders","epoch":9007199254740992,"created_at_ms":1}')
add('{"format":"dkg.assignment","version":2,"kind":"generation","generation":"0123456789abcdef0123456789abcdef"}')
add('{"format":"dkg.assignment","version":2,"kind":"generation","generation":"0123456789ABCDEF0123456789abcdef"}')
add(edit('"version":2,', '"version":2,"kind":"assignment",', V2))
add(edit('"version":2,', '"version":2,"kind":"other",', V2))
add(edit('"version":2,', '"version":2,"kind":null,', V2))
add(edit('"version":2,', '"version":2,"generation":"0123456789abcdef0123456789abcdef",', V2))
add(edit('"version":2,', '"version":2,"generation":"0123456789abcdef",', V2))
# Topic names: longest valid, one too long, legal characters, escapes.
add(edit('"topic":"orders"', '"topic":"%s"' % ("t" * 249)))
add(edit('"topic":"orders"', '"topic":"%s"' % ("t" * 250)))
add(edit('"topic":"orders"', '"topic":"a.b_c-D9"'))
add(edit('"topic":"orders"', '"topic":"\\u006frders"'))
add(edit('"topic":"orders"', '"topic":"ord\\/ers"'))
add(edit('"topic":"orders"', '"topic":"\\ud83d\\ude00"'))
add(edit('"topic":"orders"', '"topic":"ord\\u0000ers"'))
add(edit('"topic":"orders"', '"\\u0074opic":"orders"'))
add(edit('"format":"dkg.assignment"', '"format":"dkg.assignmen\\u0074"'))
# Seeds, counts and floats at their bounds.
for s in ["0", "4294967295", "4294967296", "2147483648", "-0", "1.0"]:
    add(edit('"seed":625341585', '"seed":%s' % s))
for c in ["0", "18446744073709551615", "18446744073709551616", "9007199254740992"]:
    add(edit('"created_at_ms":1700000000000', '"created_at_ms":%s' % c))
for w in ["0", "18446744073709551615", "18446744073709551616"]:
    add(edit('"weight":1200', '"weight":%s' % w))
    add(edit('"window_records":100000', '"window_records":%s' % w))
for f in ["0", "0.0", "1", "1.0", "1e308", "1e309", "1e-400", "-0.0", "4.9e-324", "0.1e1", "1E+2", "1.7976931348623157e308"]:
    add(edit('"theta":0.01', '"theta":%s' % f))
    add(edit('"mu":4.0', '"mu":%s' % f))
    add(edit('"predicted_load":[0.5,0.25,0.25]', '"predicted_load":[%s,0.25,0.25]' % f))
add(edit('"partitions":3', '"partitions":4294967296'))
add(edit('"partitions":3', '"partitions":1000001'))
add(edit('"buckets":4', '"buckets":4194305'))
add(edit('"table":[0,1,2,0]', '"table":[0,1,2,2]'))
add(edit('"table":[0,1,2,0]', '"table":[0,1,2,3]'))
add(edit('"partition":1', '"partition":2'))
add(edit('"partition":1', '"partition":3'))
# Heavy keys: none, empty key, 16 and 17 in one bucket (buckets 1), padding variants.
add(edit('"heavy":[{"key_b64":"aG90","partition":1,"weight":1200}]', '"heavy":[]'))
add(edit('"key_b64":"aG90"', '"key_b64":""'))
for k in ["aA==", "aGk=", "aA", "aA=", "aA===", "aGk", "+/8=", "-_8=", "AAAA", "AAA=", "aB==", "aGl="]:
    add(edit('"key_b64":"aG90"', '"key_b64":"%s"' % k))
def heavy_n(n):
    hv = ",".join('{"key_b64":"%s","partition":0,"weight":1}' % base64.b64encode(b"k%d" % i).decode() for i in range(n))
    d = edit('"buckets":4,"table":[0,1,2,0],"heavy":[{"key_b64":"aG90","partition":1,"weight":1200}]',
             '"buckets":1,"table":[0],"heavy":[%s]' % hv)
    return d
add(heavy_n(16)); add(heavy_n(17))
big = base64.b64encode(b"x" * 65536).decode()
add(edit('"key_b64":"aG90"', '"key_b64":"%s"' % big))
add(edit('"key_b64":"aG90"', '"key_b64":"%s"' % base64.b64encode(b"x" * 65537).decode()))
# Version 2 splits: 64 parts (accepted), weights summing to 4096, 65 parts.
def split(parts, weights):
    sp = ",".join('{"partition":%d,"weight":%d}' % (p, w) for p, w in zip(parts, weights))
    n = max(parts) + 1
    d = edit('"partitions":3', '"partitions":%d' % n, V2)
    d = d.replace('{"key_b64":"aG90","partition":1,"weight":1200}', '{"key_b64":"aG90","split":[%s],"weight":1200}' % sp)
    d = d.replace('"predicted_load":[0.5,0.25,0.25]', '"predicted_load":[%s]' % ",".join(["0.0"] * n))
    return d
add(split(list(range(64)), [1] * 64)); add(split(list(range(65)), [1] * 65))
add(split([0, 1], [4095, 1])); add(split([0, 1], [4096, 1])); add(split([0, 1], [1, 1])); add(split([1, 0], [2, 3]))
add(split([0, 0], [1, 1])); add(split([0, 1], [0, 1])); add(split([0], [1]))
# JSON syntax: whitespace, escapes, nesting, numbers.
add(" \t\r\n" + BASE + " \t\r\n")
add(BASE.replace(",", " , ").replace(":", " : "))
add(BASE + "\x00")
add(BASE.replace('{"format"', '{ "format"'))
add(BASE[:-1] + ',"x":' + "[" * 10000 + "]" * 10000 + "}")
add('{"format":"dkg.assignment","version":1,"x":' + "[" * 30000 + "]" * 30000 + "}")
add('{"x":' + "{\"a\":" * 5000 + "1" + "}" * 5000 + ',"format":"dkg.assignment","version":1}')
add("[" * 200 + "]" * 200)
add('{"version":1,"format":"dkg.assignment"}')
add('{"version":3,"format":"dkg.assignment"}')
add('{"format":"dkg.assignment","version":1}')
add('{"format":"dkg.assignment","version":2}')
add('{"format":"dkg.assignment","version":2,"kind":"retraction"}')
add('{"format":"dkg.assignment"}')
add('{}')
add('{"format":"dkg.assignment","version":1,"format":"dkg.assignment"}')
add(BASE.replace('"orders"', '"orders\\u00e9"'))
add(BASE.replace('"orders"', '"ord\xc3\xa9rs"'))
add(BASE.replace('"orders"', '"ord\\"ers"'))
add(BASE.replace('"murmur2"', '"murmur\\u0032"'))
add(BASE.replace('"mu":4.0', '"mu":4.0,"mu":4.0'))
for tok in ["true", "false", "null", '"1"', "[]", "{}"]:
    add(edit('"epoch":7,', '"epoch":%s,' % tok))
    add(edit('"heavy":[{"key_b64":"aG90","partition":1,"weight":1200}]', '"heavy":%s' % tok))
n = 0
for b in docs:
    name = hashlib.sha1(b).hexdigest()
    with open(os.path.join(out, name), "wb") as f:
        f.write(b)
    n += 1
print(n, "inputs", sum(map(len, docs)), "bytes")
