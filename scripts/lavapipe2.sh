#!/usr/bin/env bash
# A second lavapipe for the tests: Debian bookworm-backports' Mesa (25.x
# when this was written; bookworm itself has 22.3), unpacked into a cache
# folder beside the system's driver, never installed over it. Its
# compiler front end and shader lowering are two years newer: vktrain's
# kernels and the reproducible mode's claim (the same bits on every
# device that passes the start-up probe) meet a driver they were not
# developed on (tests/test_lavapipe2.sh; tests/test_repro_train.sh runs
# it as one more configuration; docs/devices.md, "Newer Mesa", says what
# it found).
#   scripts/lavapipe2.sh fetch   unpack it if it is not there (scripts/deps.sh test)
#   scripts/lavapipe2.sh env     print the VAR=value words that select it
#                                (exit 1, naming the fix, if it is not there)
# The folder: $VKTRAIN_LAVAPIPE2, else ~/.cache/vktrain-lavapipe2.
set -euo pipefail
dir=${VKTRAIN_LAVAPIPE2:-$HOME/.cache/vktrain-lavapipe2}
icd=$dir/lvp_icd.json
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
lib=$dir/root/usr/lib/$multiarch

case "${1:-}" in
  env)
    if [ ! -f "$icd" ]; then
      echo "lavapipe2: no second lavapipe in $dir: run scripts/deps.sh test (or scripts/lavapipe2.sh fetch)" >&2
      exit 1
    fi
    # VK_DRIVER_FILES (loader 1.3.207+) and its older name: this driver
    # only; its own libdrm first on the library path.
    echo "VK_DRIVER_FILES=$icd VK_ICD_FILENAMES=$icd LD_LIBRARY_PATH=$lib"
    ;;
  fetch)
    [ -f "$icd" ] && exit 0
    # this release's backports, from the mirror the system's sources name
    . /etc/os-release
    suite=${VERSION_CODENAME:-bookworm}-backports
    mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -1)
    [ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $2 ~ /^http/ && $3 !~ /security/ {print $2; exit}' \
                                   /etc/apt/sources.list 2>/dev/null)
    mirror=${mirror:-http://deb.debian.org/debian}
    echo "vktrain: unpacking lavapipe from $suite into $dir (a second driver for the tests)"
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    # apt with its own source list, package lists and cache: the system's
    # sources and packages are left as they are.
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $suite main" > "$tmp/sources.list"
    mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial" "$tmp/debs"
    opts=(-o Dir::Etc::SourceList="$tmp/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o Dir::State::Lists="$tmp/lists" -o Dir::Cache="$tmp/cache" -o Debug::NoLocking=1 -qq)
    # (as root: no hand-over to the _apt user, who cannot write to $tmp)
    [ "$(id -u)" -ne 0 ] || opts+=(-o APT::Sandbox::User=root)
    apt-get "${opts[@]}" update
    # The driver and the libdrm it needs (newer than bookworm's); the rest
    # of its dependencies are bookworm's own (LLVM 15 included).
    (cd "$tmp/debs" && apt-get "${opts[@]}" download mesa-vulkan-drivers/"$suite" libdrm2/"$suite") || true
    ls "$tmp"/debs/mesa-vulkan-drivers_*.deb "$tmp"/debs/libdrm2_*.deb >/dev/null 2>&1 ||
      { echo "lavapipe2: could not download mesa-vulkan-drivers and libdrm2 from $suite ($mirror)" >&2; exit 1; }
    rm -rf "$dir.new"
    mkdir -p "$dir.new/root"
    for d in "$tmp"/debs/*.deb; do dpkg-deb -x "$d" "$dir.new/root"; done
    so=$lib/libvulkan_lvp.so
    [ -f "$dir.new/root/usr/lib/$multiarch/libvulkan_lvp.so" ] ||
      { echo "lavapipe2: the package holds no libvulkan_lvp.so" >&2; exit 1; }
    api=$(sed -n 's/.*"api_version": *"\([^"]*\)".*/\1/p' "$dir.new"/root/usr/share/vulkan/icd.d/lvp_icd*.json | head -1)
    printf '{\n  "file_format_version": "1.0.0",\n  "ICD": {"library_path": "%s", "api_version": "%s"}\n}\n' \
      "$so" "${api:-1.3.0}" > "$dir.new/lvp_icd.json"
    rm -rf "$dir"
    mv "$dir.new" "$dir"
    ;;
  *)
    echo "usage: $0 fetch|env" >&2
    exit 2
    ;;
esac
