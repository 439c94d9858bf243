# syntax=docker/dockerfile:1
# The dkg-sampler image: `run` (the sidecar), `loadgen`, `inspect`, `simulate`.
#
#   docker build -t dkg-sampler .
#   docker run --rm dkg-sampler run --help
#
# Two stages: the Rust toolchain builds a release binary (librdkafka is compiled from source by rdkafka-sys,
# which needs a C/C++ toolchain, make, cmake, pkg-config, zlib and OpenSSL headers: TLS and SCRAM); the runtime stage is a slim Debian
# of the same release, so the binary finds the glibc it was linked against.

FROM rust:1.95-trixie AS builder
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        build-essential cmake pkg-config zlib1g-dev libssl-dev python3 \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# Cache mounts keep the crates.io downloads and the target dir between builds (BuildKit, the default builder).
# The release profile keeps line tables (debug = 1): the image drops them and keeps the symbols (backtraces).
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p dkg-sampler --bin dkg-sampler \
    && install -D -m 0755 target/release/dkg-sampler /out/dkg-sampler \
    && strip --strip-debug /out/dkg-sampler

FROM debian:13-slim
# curl: the compose healthchecks ask /healthz; ca-certificates: TLS brokers.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl zlib1g libssl3t64 \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 dkg \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin dkg
COPY --from=builder /out/dkg-sampler /usr/local/bin/dkg-sampler
# Numeric, so that Kubernetes can check runAsNonRoot without resolving the name (deploy/helm runs it as 10001).
USER 10001:10001
EXPOSE 9100
ENV RUST_LOG=info
ENTRYPOINT ["/usr/local/bin/dkg-sampler"]
CMD ["--help"]
