#!/usr/bin/env bash
# Installs the Debian packages vktrain needs that are missing, and nothing
# when all are present. Usage: scripts/deps.sh build|train|test|bench|fuzz
set -euo pipefail

build=(cmake make gcc pkg-config libvulkan-dev glslc mesa-vulkan-drivers
       libyaml-dev libjansson-dev libopenmpi-dev openmpi-bin)
case "${1:-build}" in
  build) want=("${build[@]}") ;;
  train) want=("${build[@]}" fortunes fortunes-min python3-matplotlib) ;;
  test)  want=("${build[@]}" vulkan-validationlayers fortunes fortunes-min
               python3 python3-pip python3-venv python3-numpy python3-torch python3-matplotlib
               python3-jinja2 spirv-tools debootstrap) ;;
  bench) want=("${build[@]}" python3 python3-numpy python3-torch libopenblas0-pthread time) ;;
  fuzz)  want=("${build[@]}" clang libclang-rt-dev) ;;
  *) echo "usage: $0 build|train|test|bench|fuzz" >&2; exit 2 ;;
esac

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "vktrain: installing missing Debian packages: ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "vktrain: error: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    sudo=sudo
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The oracles of the transformers parity, chat template and LoRA parity
# tests, which Debian does not ship: transformers 4.44.2 and peft 0.12.0
# (with accelerate 0.33.0, the one peft dependency the venv lacks) from PyPI
# in a venv over Debian's Python and torch (--system-site-packages), once;
# $VKTRAIN_VENV or ~/.cache/vktrain-venv.
if [ "${1:-build}" = test ]; then
  venv=${VKTRAIN_VENV:-$HOME/.cache/vktrain-venv}
  if ! "$venv/bin/python" -c 'import importlib.metadata as m; assert m.version("transformers") == "4.44.2"' \
       2>/dev/null; then
    echo "vktrain: making $venv with transformers==4.44.2 (PyPI) for the parity test"
    /usr/bin/python3 -m venv --system-site-packages "$venv"
    "$venv/bin/python" -m pip install --quiet transformers==4.44.2
  fi
  if ! "$venv/bin/python" -c 'import importlib.metadata as m; assert m.version("peft") == "0.12.0"' 2>/dev/null; then
    echo "vktrain: adding peft==0.12.0 (PyPI) to $venv for the LoRA parity test"
    "$venv/bin/python" -m pip install --quiet --no-deps peft==0.12.0 accelerate==0.33.0
  fi
fi

# A second lavapipe (this release's backports Mesa, unpacked into a cache
# folder, the system's driver untouched) for the tests that run vktrain on
# a second driver (test_lavapipe2, test_repro_train): scripts/lavapipe2.sh.
if [ "${1:-build}" = test ]; then
  "$(dirname "$0")/lavapipe2.sh" fetch
fi

# Debian unstable's lavapipe and glslc (a debootstrap tree in a cache
# folder, the system untouched) for the cooperative-matrix kernels, which
# Debian 12's glslc cannot compile and its lavapipe cannot run
# (test_coopmat_sid): scripts/sid.sh.
if [ "${1:-build}" = test ]; then
  "$(dirname "$0")/sid.sh" fetch
  # the same tree's python3-torch and a newer transformers: the oracle of
  # Qwen3 and the families transformers 4.44.2 lacks (test_hf_families)
  "$(dirname "$0")/sid.sh" torch
fi
