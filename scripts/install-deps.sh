#!/usr/bin/env bash
# Installs the Debian packages keel needs to build, test and benchmark,
# skipping those already present. Run as root (CI and `make` do).
set -euo pipefail

packages=(
  build-essential cmake pkg-config clang libclang-rt-14-dev
  libuv1-dev libcmocka-dev libssl-dev
  openssl  # the TLS tests make throwaway certificates with the openssl CLI
  iproute2 procps psmisc netcat-openbsd
  python3 python3-kazoo python3-pytest
  python3-pure-sasl  # kazoo's sasl_options (tests/integration/test_sasl.py)
  python3-kafka python3-confluent-kafka kcat  # Kafka wire checks (tests/kafka)
  librdkafka-dev  # Kafka clients against keel brokers (tests/integration)
  golang-go golang-github-shopify-sarama-dev  # sarama, tests/clients/sarama
  zookeeper zookeeper-bin libzookeeper-mt-dev default-jre-headless
  default-jdk-headless  # jcmd: ZooKeeper's live heap in `make bench`
  gnuplot-nox
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# kafkajs (tests/integration/kafkajs) runs on Node.js;
# a machine that already has node and npm (from any source) keeps them.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi
# kafkajs for tests/integration/test_kafka_groups.py (npm; the kafkajs test
# skips, saying so, when the registry cannot be reached).
install_kafkajs() {
  local dir
  dir="$(cd "$(dirname "$0")/.." && pwd)/tests/integration/kafkajs"
  if command -v npm >/dev/null && [ ! -d "$dir/node_modules/kafkajs" ]; then
    (cd "$dir" && npm install --no-audit --no-fund >/dev/null 2>&1) ||
      echo "install-deps: npm install in tests/integration/kafkajs failed" >&2
  fi
  return 0
}

if [ ${#missing[@]} -eq 0 ]; then
  install_kafkajs
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run as root (or install them) and try again" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq || true
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
install_kafkajs
