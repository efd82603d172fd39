# syntax=docker/dockerfile:1
#
# The waitroom image: one static binary, nothing else.
#
#   docker build -t waitroom .
#   docker run --read-only -p 8080:8080 waitroom
#
# The base images are build arguments so the image builds where no
# registry is reachable: RUNTIME_IMAGE=scratch needs no pull, and the
# "prebuilt" target copies a binary built on the host with the same flags
# (see OPERATIONS.md, "Deploying") instead of running the Go stage.
ARG GO_IMAGE=golang:1.26-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/static-debian12:nonroot

FROM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Static (no libc), no local paths in the binary, the VCS revision stamped
# for 'waitroom version', symbols stripped.
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=true -ldflags='-s -w' -o /waitroom ./cmd/waitroom

# The image from a binary built on the host with the flags above; it pulls
# nothing when RUNTIME_IMAGE is scratch.
FROM ${RUNTIME_IMAGE} AS prebuilt
COPY waitroom /waitroom
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/waitroom"]
CMD ["serve", "--addr", ":8080"]

# The default target. distroless/static carries CA certificates; scratch
# does not, so they come from the build stage either way (rediss://,
# amqps:// and an HTTPS upstream need them).
FROM ${RUNTIME_IMAGE} AS runtime
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /waitroom /waitroom
# 65532 is distroless's "nonroot"; it is numeric so scratch needs no
# /etc/passwd. serve writes no file, so the root filesystem may be
# read-only.
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/waitroom"]
CMD ["serve", "--addr", ":8080"]
