# Container image of vgpu_exporter.
#
#   docker build -t vgpu_exporter .
#   docker run --rm --gpus all -p 9949:9949 vgpu_exporter            # NVML
#   docker run --rm -p 9949:9949 vgpu_exporter --backend=sim         # no GPU
#
# The NVML backend needs cgo, so the binary is built against glibc and runs
# on a small glibc base. The image holds no NVIDIA library: the NVIDIA
# container toolkit mounts the host driver's libnvidia-ml.so.1 and the
# device nodes when the container asks for them (NVIDIA_VISIBLE_DEVICES,
# NVIDIA_DRIVER_CAPABILITIES below; --gpus or runtimeClassName: nvidia).
#
# GO_IMAGE and BASE_IMAGE may name other images (a mirror, a pinned digest).
# A prebuilt binary can stand in for the build stage:
#   buildah build --build-context build=DIR .   (DIR/out/vgpu_exporter)

ARG GO_IMAGE=docker.io/library/golang:1.26-bookworm
ARG BASE_IMAGE=gcr.io/distroless/base-debian12:nonroot

FROM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The git revision and branch of the build (the build context has no .git).
ARG REVISION=unknown
ARG BRANCH=unknown
RUN mkdir -p /out && make build BIN=/out/vgpu_exporter REVISION="${REVISION}" BRANCH="${BRANCH}" \
    && /out/vgpu_exporter --version

FROM ${BASE_IMAGE}
ARG REVISION=unknown
LABEL org.opencontainers.image.title="vgpu_exporter" \
      org.opencontainers.image.description="Prometheus exporter for GPUs shared by several tenants (MIG, MPS, time-slicing, vGPU)" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build /out/vgpu_exporter /bin/vgpu_exporter
# Ask the NVIDIA container toolkit for every GPU and for the management
# library only (utility: libnvidia-ml.so.1 and nvidia-smi, no CUDA).
ENV NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=utility
# Non-root by default (the distroless "nonroot" user). Reading GPUs needs no
# root; changing clocks or power limits does (see docs/deploy.md).
USER 65532:65532
EXPOSE 9949
ENTRYPOINT ["/bin/vgpu_exporter"]
