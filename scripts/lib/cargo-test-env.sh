# scripts/lib/cargo-test-env.sh (sourced): the environment `cargo test` gives a test binary, for the scripts that
# run the built binaries themselves (run-test-binaries, flake-hunt).
#   cargo_test_env PKG_DIR NAME VERSION MANIFEST   exports the package's CARGO_* variables and the dylib path
cargo_test_env() {
  local pkg_dir=$1 name=$2 version=$3 manifest=$4 major minor patch
  IFS=. read -r major minor patch <<<"${version%%-*}"
  export CARGO_MANIFEST_DIR="$pkg_dir" CARGO_MANIFEST_PATH="$manifest" CARGO_PKG_NAME="$name" \
    CARGO_PKG_VERSION="$version" CARGO_PKG_VERSION_MAJOR="$major" CARGO_PKG_VERSION_MINOR="$minor" \
    CARGO_PKG_VERSION_PATCH="$patch" CARGO_CRATE_NAME="${name//-/_}" CARGO="$(command -v cargo)" \
    LD_LIBRARY_PATH="$ROOT/target/debug/deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}
