# poolcoord image: poolcoord-apiserver (the entrypoint) and poolcoord-agent (the chart's
# agent DaemonSet runs it as its command); multi-stage, Debian 12 (bookworm) on both sides.
# Not built on the development machines (no Docker engine there); docs/chart.md.
#
#   docker build -t poolcoord/poolcoord-apiserver:0.1.0 .

# ---- build: the same Debian -dev packages as scripts/install-deps.sh, then CMake ----
FROM debian:bookworm AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake g++ pkg-config libboost-dev libboost-test-dev libssl-dev \
      rapidjson-dev libabsl-dev libyaml-cpp-dev libcurl4-openssl-dev ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null \
 && cmake --build /build -j"$(nproc)" --target poolcoord-apiserver kubectl-pool poolcoord-agent \
 && strip --strip-debug -o /poolcoord-apiserver /build/poolcoord-apiserver \
 && strip --strip-debug -o /kubectl-pool /build/kubectl-pool \
 && strip --strip-debug -o /poolcoord-agent /build/poolcoord-agent

# ---- runtime: only the shared libraries the binary links (Boost.Beast/Asio and
# RapidJSON are header-only) ----
FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libssl3 libyaml-cpp0.7 libcurl4 libabsl20220623 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 65532 poolcoord \
 && useradd --system --uid 65532 --gid 65532 --home-dir /nonexistent --no-create-home \
      --shell /usr/sbin/nologin poolcoord
COPY --from=build /poolcoord-apiserver /usr/local/bin/poolcoord-apiserver
# The kubectl plugin (`kubectl pool`), for `kubectl cp` out of the image or a
# debug container; it links the same libraries.
COPY --from=build /kubectl-pool /usr/local/bin/kubectl-pool
COPY --from=build /poolcoord-agent /usr/local/bin/poolcoord-agent
# Numeric, so that runAsNonRoot can verify it without resolving names.
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["/usr/local/bin/poolcoord-apiserver"]
