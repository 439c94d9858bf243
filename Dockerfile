# syntax=docker/dockerfile:1
# Two images from one file: the product and the lab.
#   sampler (the default, last stage): dkg-sampler alone: `run` (the sidecar), `inspect`, `retract`. The image
#     users deploy (deploy/helm) and the compose stack's samplers.
#   lab: dkg-lab (loadgen, consume, simulate, demo, e2e, soak) beside dkg-sampler, which its demo and soak start
#     as children. The compose stack's load generators and consumers.
#
#   docker build -t dkg-sampler .                 # the product
#   docker build --target lab -t dkg-lab .        # the lab
#   docker run --rm dkg-sampler run --help
#
# The Rust toolchain builds release binaries (librdkafka is compiled from source by rdkafka-sys, which needs a
# C/C++ toolchain, make, cmake, pkg-config, zlib and OpenSSL headers: TLS and SCRAM); the runtime stages are a
# slim Debian of the same release, so the binaries find the glibc they were linked against. BuildKit builds only
# the stages a target needs: the product image never compiles the lab (nor plotters, its font, indicatif).

FROM rust:1.95-trixie AS toolchain
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        build-essential cmake pkg-config zlib1g-dev libssl-dev python3 \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .

# Cache mounts keep the crates.io downloads and the target dir between builds (BuildKit, the default builder);
# `locked`: the two build stages never run cargo in the same target dir at once.
# The release profile keeps line tables (debug = 1): the images drop them and keep the symbols (backtraces).
FROM toolchain AS build-sampler
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target,sharing=locked \
    cargo build --release --locked -p dkg-sampler --bin dkg-sampler \
    && install -D -m 0755 target/release/dkg-sampler /out/dkg-sampler \
    && strip --strip-debug /out/dkg-sampler

FROM toolchain AS build-lab
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target,sharing=locked \
    cargo build --release --locked -p dkg-lab --bin dkg-lab \
    && install -D -m 0755 target/release/dkg-lab /out/dkg-lab \
    && strip --strip-debug /out/dkg-lab

FROM debian:13-slim AS runtime
# curl: the compose healthchecks ask /healthz; ca-certificates: TLS brokers.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl zlib1g libssl3t64 \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 dkg \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin dkg
# Numeric, so that Kubernetes can check runAsNonRoot without resolving the name (deploy/helm runs it as 10001).
USER 10001:10001
EXPOSE 9100
ENV RUST_LOG=info

FROM runtime AS lab
COPY --from=build-sampler /out/dkg-sampler /usr/local/bin/dkg-sampler
COPY --from=build-lab /out/dkg-lab /usr/local/bin/dkg-lab
ENTRYPOINT ["/usr/local/bin/dkg-lab"]
# (After ENTRYPOINT: setting it resets an inherited CMD.)
CMD ["--help"]

FROM runtime AS sampler
COPY --from=build-sampler /out/dkg-sampler /usr/local/bin/dkg-sampler
ENTRYPOINT ["/usr/local/bin/dkg-sampler"]
CMD ["--help"]
