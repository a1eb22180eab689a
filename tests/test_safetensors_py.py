"""test_safetensors_py: the C reader and writer against an independent
implementation of the format in Python (struct, json, numpy). Python writes
every F16 and BF16 bit pattern plus F32 tensors; `test_safetensors convert`
reads them and writes F32; Python parses that file and compares each value
with numpy's own conversion, and checks the header the way the Hugging Face
reader does (8-byte alignment, no holes, no overlaps)."""
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np


def write_st(path, tensors, metadata):
    header, blobs, off = {"__metadata__": metadata}, [], 0
    for name, (dtype, arr) in tensors.items():
        raw = arr.tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_st(path):
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack("<Q", buf[:8])
    assert n % 8 == 0, f"header length {n} not a multiple of 8"
    header = json.loads(buf[8:8 + n].decode())
    data = buf[8 + n:]
    meta = header.pop("__metadata__", None)
    spans = sorted((v["data_offsets"][0], v["data_offsets"][1], k) for k, v in header.items())
    pos = 0
    for b, e, k in spans:
        assert b == pos, f"{k}: begins at {b}, previous ends at {pos} (hole or overlap)"
        pos = e
    assert pos == len(data), f"data is {len(data)} bytes, tensors cover {pos}"
    out = {}
    for k, v in header.items():
        assert v["dtype"] == "F32", f"{k}: dtype {v['dtype']}"
        b, e = v["data_offsets"]
        out[k] = np.frombuffer(data[b:e], dtype="<f4").reshape(v["shape"])
    return out, meta


def same(got, want):
    """Bit-equal, except that any NaN matches any NaN of the same sign."""
    g, w = got.view(np.uint32).ravel(), want.view(np.uint32).ravel()
    nan = np.isnan(want.ravel())
    ok = np.where(nan, np.isnan(got.ravel()) & ((g >> 31) == (w >> 31)), g == w)
    return int((~ok).sum())


def main():
    exe = os.path.join(os.environ["BUILD"], "tests", "test_safetensors")
    allbits = np.arange(65536, dtype=np.uint32).astype("<u2")
    rng = np.random.default_rng(0)
    f32 = rng.standard_normal((3, 7)).astype("<f4")
    tensors = {
        "all_f16": ("F16", allbits.view("<f2").reshape(256, 256)),
        "all_bf16": ("BF16", allbits),
        "w": ("F32", f32),
        "one": ("F32", np.array([2.5], dtype="<f4")),
    }
    want = {
        "all_f16": allbits.view("<f2").astype(np.float32).reshape(256, 256),
        "all_bf16": (allbits.astype(np.uint32) << 16).view(np.float32),
        "w": f32,
        "one": np.array([2.5], dtype=np.float32),
    }
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "in.safetensors"), os.path.join(d, "out.safetensors")
        write_st(src, tensors, {"format": "pt", "note": "é"})
        subprocess.run([exe, "convert", src, dst], check=True)
        got, meta = read_st(dst)
    failures = 0
    if meta != {"format": "pt", "note": "é"}:
        print(f"metadata {meta!r}", file=sys.stderr)
        failures += 1
    for k, w in want.items():
        if k not in got or got[k].shape != w.shape:
            print(f"{k}: missing or shape {got.get(k, np.zeros(0)).shape} != {w.shape}", file=sys.stderr)
            failures += 1
            continue
        bad = same(got[k], w)
        if bad:
            print(f"{k}: {bad} values differ from numpy", file=sys.stderr)
            failures += 1
    if failures:
        sys.exit(f"test_safetensors_py: {failures} checks failed")
    print("test_safetensors_py: all checks passed")


main()
