#!/usr/bin/env bash
# Installs what Missile needs to build and test on a Debian 12 machine.
# The CUDA 13 toolkit (headers and the libcuda stub) is expected at /usr/local/cuda; it is not
# a Debian package. Everything else comes from apt. Idempotent: skips apt when all is present.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config binutils python3 clang
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libspdlog-dev libfmt-dev libtomlplusplus-dev
  # the tools' command lines (header-only, common/flags)
  libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # the Debian package and its test: man pages, dpkg-shlibdeps, systemd-analyze verify
  help2man dpkg-dev systemd
  # Tests only: the metrics endpoint scraped by a real Prometheus, missilectl top run under tmux,
  # bench/plot_results.py's charts.
  prometheus tmux python3-matplotlib
  # the self-contained shim (MISSILE_SHIM_STATIC): Debian's static gRPC, c-ares and zlib, and
  # dpkg-dev's dpkg-source to unpack the abseil and protobuf sources it rebuilds as PIC
  libc-ares-dev zlib1g-dev dpkg-dev
  # the Kubernetes manifests' offline check (deploy/kubernetes/check_manifests.py)
  python3-yaml
  # the image check (deploy/kubernetes/check_image.py) runs the programs on the files of the
  # packages the Dockerfile's final stage installs, so those must be installed here: the
  # admission webhook's HTTPS libraries (the others come with the -dev packages above)
  libcpp-httplib0.11 libssl3
  # the Helm chart's offline renderer (deploy/helm/render, Go in GOPATH mode): Go, sprig (the
  # template functions Helm adds) and a YAML library
  golang-go golang-github-masterminds-sprig-dev golang-gopkg-yaml.v3-dev
  # clang's sanitizer and libFuzzer runtimes, for scripts/fuzz.sh
  libclang-rt-14-dev
  # missile-webhook (webhook/): its HTTPS server (cpp-httplib, built with OpenSSL), JSON, and
  # the openssl command that makes its test's certificate
  libcpp-httplib-dev libssl-dev nlohmann-json3-dev openssl
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all Debian packages present"
fi

if [ ! -f /usr/local/cuda/include/cuda.h ] || [ ! -f /usr/local/cuda/lib64/stubs/libcuda.so ]; then
  echo "install-deps: the CUDA 13 toolkit is missing at /usr/local/cuda (need include/cuda.h and lib64/stubs/libcuda.so)" >&2
  exit 1
fi
