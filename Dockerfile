# roce-fwd: build on Debian bookworm with Go and libdpdk-dev, run with the
# DPDK runtime libraries and PMDs only.
FROM golang:1.25-bookworm AS build
# The image pins its own Go; go.mod's toolchain line names the build's.
ENV GOTOOLCHAIN=auto
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libdpdk-dev pkg-config \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=docker
# With the settings the Makefile uses (x86-64-v3, Go's SIMD experiment).
RUN bash -c '. scripts/goenv.sh && CGO_ENABLED=1 go build -ldflags "-X main.version=${VERSION}" -o /out/roce-fwd ./cmd/roce-fwd'

FROM debian:bookworm-slim
# The libraries roce-fwd links (ldd bin/roce-fwd), the mempool and bus
# drivers EAL loads, and the PMDs: mlx5 (with rdma-core), ionic, and the
# virtual devices.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      librte-eal23 librte-ethdev23 librte-kvargs23 librte-mbuf23 librte-mempool23 librte-meter23 \
      librte-net23 librte-ring23 librte-telemetry23 librte-mempool-ring23 librte-bus-pci23 librte-bus-vdev23 \
      librte-net-mlx5-23 librte-net-ionic23 librte-net-pcap23 librte-net-null23 librte-net-ring23 \
      librte-net-af-packet23 librte-net-tap23 ibverbs-providers \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/roce-fwd /usr/bin/roce-fwd
VOLUME ["/etc/roce-fwd"]
ENTRYPOINT ["/usr/bin/roce-fwd"]
CMD ["run", "--config", "/etc/roce-fwd/roce-fwd.toml"]
