# scripts/lib/tool.sh: what scripts/demo, scripts/e2e and scripts/soak share (sourced, not run). Each sets
# ROOT, TOOL (the dkg-lab subcommand, also the prefix of messages) and KEEP_BROKER, collects its own
# arguments in ARGS and HELP, then calls:
#   tool_build       build dkg-lab and dkg-sampler (release; DKG_BUILD_PROFILE=dev builds and runs the debug
#                    binaries, as the CI smoke run of scripts/demo does, which finds them built; the lab's demo
#                    and soak start the sidecar from the dkg-sampler beside it) and set BIN to dkg-lab; with
#                    HELP=1 print the script's header comment and the subcommand's --help, and exit
#   tool_broker      set BOOTSTRAP: DKG_BOOTSTRAP_SERVERS when set (a broker of yours, or the one scripts/test
#                    runs; scripts/kafka is then not touched), else start the local broker (scripts/kafka start;
#                    DKG_KAFKA_PORT etc. are honoured) and stop it at exit if this script started it (unless
#                    KEEP_BROKER=1)
# shellcheck shell=bash

tool_die() {
  echo "$TOOL: ERROR: $*" >&2
  exit 1
}

# Splits "$@" into ARGS, HELP (-h/--help) and KEEP_BROKER (--keep-broker).
tool_args() {
  HELP=0
  ARGS=()
  for a in "$@"; do
    case "$a" in
      --keep-broker) KEEP_BROKER=1 ;;
      -h | --help) HELP=1 ;;
      *) ARGS+=("$a") ;;
    esac
  done
}

tool_build() {
  command -v cargo >/dev/null 2>&1 || tool_die "cargo not found: install Rust (https://rustup.rs)"
  command -v java >/dev/null 2>&1 ||
    tool_die "java not found: install a Java 17+ runtime (e.g. apt-get install openjdk-17-jre-headless)"
  local profile=${DKG_BUILD_PROFILE:-release} dir
  case "$profile" in
    release) dir=release ;;
    dev) dir=debug ;;
    *) tool_die "DKG_BUILD_PROFILE must be release or dev, got '$profile'" ;;
  esac
  echo "$TOOL: building dkg-lab and dkg-sampler ($profile; the first build compiles librdkafka and takes a few minutes)" >&2
  cargo build --profile "$profile" --locked -p dkg-lab --bin dkg-lab -p dkg-sampler --bin dkg-sampler \
    --manifest-path "$ROOT/Cargo.toml" >&2
  local target_dir
  target_dir=$(cargo metadata --format-version 1 --no-deps --manifest-path "$ROOT/Cargo.toml" |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
  BIN="${target_dir:-$ROOT/target}/$dir/dkg-lab"
  [[ -x "$BIN" ]] || tool_die "built binary not found at $BIN"
  if ((HELP)); then
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
    echo "  --keep-broker    leave a broker this script started running"
    echo
    exec "$BIN" "$TOOL" --help
  fi
}

tool_broker() {
  TOOL_STARTED_BROKER=0
  if [[ -n "${DKG_BOOTSTRAP_SERVERS:-}" ]]; then
    BOOTSTRAP=$DKG_BOOTSTRAP_SERVERS
    return
  fi
  if ! bash "$ROOT/scripts/kafka" status >/dev/null 2>&1; then
    TOOL_STARTED_BROKER=1
  fi
  BOOTSTRAP=$(bash "$ROOT/scripts/kafka" start | tail -n1)
  [[ -n "$BOOTSTRAP" ]] || tool_die "scripts/kafka start printed no bootstrap address"
  trap tool_stop_broker EXIT
}

# shellcheck disable=SC2317 # called by the EXIT trap
tool_stop_broker() {
  if ((TOOL_STARTED_BROKER)) && [[ "$KEEP_BROKER" != 1 ]]; then
    echo "$TOOL: stopping the broker this script started (keep it with --keep-broker)" >&2
    bash "$ROOT/scripts/kafka" stop >&2 || true
  fi
}
