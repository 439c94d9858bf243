"""Checks what `maturin build --release` and `maturin sdist` put in a directory; prints the wheel's path.

One abi3 wheel (cp310-abi3: CPython 3.10 and later, one per platform) and one sdist of the version in
pyproject.toml, with the metadata PyPI shows (licence expression, Python range, classifiers), the licence
file, the extension and py.typed in the wheel, and the Rust crates the extension builds from in the sdist.
"""

import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path


def fail(msg: str) -> None:
    sys.exit(f"python/scripts/check_dist.py: {msg}")


def main() -> None:
    dist = Path(sys.argv[1])
    here = Path(__file__).resolve().parent.parent
    project = tomllib.loads((here / "pyproject.toml").read_text())["project"]
    version = project["version"]
    wheels = sorted(dist.glob(f"dkg_kafka-{version}-cp310-abi3-*.whl"))
    sdists = sorted(dist.glob(f"dkg_kafka-{version}.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        fail(f"expected one cp310-abi3 wheel and one sdist of {version} in {dist}, found "
             f"{sorted(p.name for p in dist.iterdir())}")
    whl, sdist = wheels[0], sdists[0]

    with zipfile.ZipFile(whl) as z:
        names = z.namelist()
        meta_name = next((n for n in names if n.endswith(".dist-info/METADATA")), None)
        if meta_name is None:
            fail(f"{whl.name} has no METADATA")
        meta = z.read(meta_name).decode()
    lines = meta.splitlines()
    licensed = "License-Expression: Apache-2.0" in lines or "License: Apache-2.0" in lines
    if not licensed:
        fail(f"{whl.name}: METADATA names no Apache-2.0 licence")
    if "Requires-Python: >=3.10" not in lines:
        fail(f"{whl.name}: METADATA lacks Requires-Python: >=3.10")
    for classifier in project["classifiers"]:
        if f"Classifier: {classifier}" not in lines:
            fail(f"{whl.name}: METADATA lacks the classifier {classifier!r}")
    if not any(n.endswith("/LICENSE") for n in names):
        fail(f"{whl.name} carries no LICENSE")
    if not any(n.startswith("dkg_kafka/_native") and n.endswith((".so", ".pyd")) for n in names):
        fail(f"{whl.name} has no extension module")
    for need in ("dkg_kafka/py.typed", "dkg_kafka/_native.pyi"):
        if need not in names:
            fail(f"{whl.name} has no {need}")

    with tarfile.open(sdist) as t:
        members = t.getnames()
    for need in ("/pyproject.toml", "/LICENSE", "/rust/lib.rs", "dkg-core/Cargo.toml", "dkg-protocol/Cargo.toml"):
        if not any(m.endswith(need) for m in members):
            fail(f"{sdist.name} has no */{need.lstrip('/')}")
    print(whl)


if __name__ == "__main__":
    main()
