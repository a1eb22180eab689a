#!/usr/bin/env bash
# Debian unstable's Vulkan driver and shader compiler, for the
# cooperative-matrix kernels (shaders/default/matmul_coopmat.comp): Debian 12's
# glslc predates GL_KHR_cooperative_matrix and its lavapipe has no
# cooperative matrices; unstable's glslc compiles them and its lavapipe
# (Mesa 26) runs them on the CPU. A minimal tree made by debootstrap in a
# cache folder, never installed over the system; its programs, and the
# tests built here, run on the tree's own C library through its dynamic
# loader, so nothing of the system changes.
#   scripts/sid.sh fetch          make the tree if it is not there (scripts/deps.sh test; root)
#   scripts/sid.sh root           print the tree's folder (exit 1, naming the fix, if absent)
#   scripts/sid.sh run PROG ARG.. run PROG on the tree's C library, lavapipe and
#                                 validation layer (its glslc: run "$(scripts/sid.sh root)/usr/bin/glslc")
#   scripts/sid.sh torch          add the tree's python3-torch and a venv of transformers and
#                                 bitsandbytes (the oracle of the model families and of the 4-bit
#                                 folders that Debian 12's torch cannot run, test_hf_families and
#                                 test_bnb_folders; root)
#   scripts/sid.sh python ARG..   that venv's python in the tree (chroot: paths are the tree's)
# The folder: $VKTRAIN_SID, else ~/.cache/vktrain-sid.
set -euo pipefail
dir=${VKTRAIN_SID:-$HOME/.cache/vktrain-sid}
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
loader=$dir/usr/lib64/ld-linux-x86-64.so.2

present() {
  [ -x "$loader" ] && [ -f "$dir/usr/share/vulkan/icd.d/lvp_icd.json" ] && [ -x "$dir/usr/bin/glslc" ]
}
need() {
  present || { echo "sid: no Debian unstable tree in $dir: run scripts/deps.sh test (or scripts/sid.sh fetch)" >&2; exit 1; }
}

# The oracle's pins: a transformers with Qwen3, Gemma 3 and SmolLM3 (its
# wheels and their dependencies' from PyPI, downloaded by the system's pip
# for the tree's Python and installed offline there), and bitsandbytes
# (CPU kernels) with accelerate, which transformers needs to quantize with
# it, and PEFT (their own wheels only: torch and the rest are the tree's).
transformers_pin=transformers==4.57.1
bnb_pins="bitsandbytes==0.50.2 accelerate==1.16.0 peft==0.17.1"
venv=/opt/vktrain-hf
has_torch() {
  present && [ -x "$dir$venv/bin/python" ] &&
    [ "$(cat "$dir$venv/pin" 2>/dev/null)" = "$transformers_pin $bnb_pins" ]
}

case "${1:-}" in
  root)
    need
    echo "$dir"
    ;;
  run)
    need
    shift
    [ $# -ge 1 ] || { echo "usage: $0 run PROG [ARG...]" >&2; exit 2; }
    icd=$dir/usr/share/vulkan/icd.d/lvp_icd.json
    export VK_DRIVER_FILES=$icd VK_ICD_FILENAMES=$icd VK_LAYER_PATH=$dir/usr/share/vulkan/explicit_layer.d
    exec "$loader" --library-path "$dir/usr/lib/$multiarch" "$@"
    ;;
  python)
    has_torch || { echo "sid: no transformers venv in $dir: run scripts/deps.sh test (or scripts/sid.sh torch)" >&2; exit 1; }
    shift
    exec chroot "$dir" "$venv/bin/python" "$@"
    ;;
  torch)
    need
    has_torch && exit 0
    [ "$(id -u)" -eq 0 ] || { echo "sid: installing into the tree needs root" >&2; exit 1; }
    echo "vktrain: python3-torch, $transformers_pin and $bnb_pins into $dir (the oracle of the newer model families and the 4-bit folders)"
    cp /etc/resolv.conf "$dir/etc/resolv.conf"
    # the system's apt settings of the archive's dates (a mirror whose
    # Release files the system accepts)
    opts=$(apt-config dump | sed -n 's/^\(Acquire::Check-\(Valid-Until\|Date\)\) "\(.*\)";$/-o \1=\3/p' | tr '\n' ' ')
    chroot "$dir" /bin/sh -c "apt-get $opts update && DEBIAN_FRONTEND=noninteractive apt-get $opts install -y \
      --no-install-recommends python3-torch python3-venv" >> "$dir.log" 2>&1 ||
      { echo "sid: apt-get in the tree failed (log: $dir.log)" >&2; tail -5 "$dir.log" >&2; exit 1; }
    pyver=$(chroot "$dir" python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    wheels=$dir/tmp/vktrain-wheels
    rm -rf "$wheels" "$dir$venv"
    /usr/bin/python3 -m pip --version >/dev/null 2>&1 ||
      { echo "sid: no pip on this system to download the wheels (apt-get install python3-pip)" >&2; exit 1; }
    /usr/bin/python3 -m pip download -q --only-binary=:all: --implementation cp --python-version "$pyver" \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      --platform linux_x86_64 -d "$wheels" "$transformers_pin" >> "$dir.log" 2>&1 ||
      { echo "sid: pip download of $transformers_pin failed (log: $dir.log)" >&2; tail -5 "$dir.log" >&2; exit 1; }
    # shellcheck disable=SC2086
    /usr/bin/python3 -m pip download -q --only-binary=:all: --no-deps --implementation cp --python-version "$pyver" \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 --platform linux_x86_64 -d "$wheels/nodeps" $bnb_pins >> "$dir.log" 2>&1 ||
      { echo "sid: pip download of $bnb_pins failed (log: $dir.log)" >&2; tail -5 "$dir.log" >&2; exit 1; }
    # numpy: the tree's, which its torch was built with, not a wheel's
    chroot "$dir" /bin/sh -c "python3 -m venv --system-site-packages $venv &&
      $venv/bin/pip install -q --no-index --find-links /tmp/vktrain-wheels $transformers_pin &&
      $venv/bin/pip install -q --no-index --no-deps /tmp/vktrain-wheels/nodeps/*.whl" >> "$dir.log" 2>&1 ||
      { echo "sid: installing $transformers_pin $bnb_pins in the tree failed (log: $dir.log)" >&2; tail -5 "$dir.log" >&2; exit 1; }
    rm -rf "$wheels"
    echo "$transformers_pin $bnb_pins" > "$dir$venv/pin"
    ;;
  fetch)
    present && exit 0
    command -v debootstrap >/dev/null ||
      { echo "sid: no debootstrap: apt-get install debootstrap (scripts/deps.sh test installs it)" >&2; exit 1; }
    [ "$(id -u)" -eq 0 ] || { echo "sid: debootstrap needs root (run scripts/deps.sh test as root)" >&2; exit 1; }
    mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -1)
    [ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $2 ~ /^http/ && $3 !~ /security/ {print $2; exit}' \
                                   /etc/apt/sources.list 2>/dev/null)
    mirror=${mirror:-http://deb.debian.org/debian}
    echo "vktrain: debootstrap of Debian unstable into $dir (lavapipe and glslc for the cooperative-matrix kernels)"
    rm -rf "$dir.new"
    mkdir -p "$(dirname "$dir")"
    debootstrap --variant=minbase --include=mesa-vulkan-drivers,glslc,vulkan-validationlayers,libvulkan1 \
      sid "$dir.new" "$mirror" > "$dir.log" 2>&1 ||
      { echo "sid: debootstrap failed (log: $dir.log)" >&2; tail -5 "$dir.log" >&2; exit 1; }
    rm -rf "$dir"
    mv "$dir.new" "$dir"
    present || { echo "sid: the tree in $dir lacks lavapipe or glslc" >&2; exit 1; }
    ;;
  *)
    echo "usage: $0 fetch|root|run PROG [ARG...]|torch|python [ARG...]" >&2
    exit 2
    ;;
esac
