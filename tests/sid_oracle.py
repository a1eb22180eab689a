"""sid_oracle: tests/hf_oracle.py run inside the Debian unstable tree of
scripts/sid.sh (chroot: its python3-torch, transformers and bitsandbytes),
over a work folder inside the tree that vktrain, running here, reads and
writes too. Used by hf_families_parity.py and bnb_parity.py."""
import json
import os
import shutil
import subprocess
import tempfile

SRC = os.environ["SRC"]
failures = []  # the names of the failed checks


def check(name, ok, detail=""):
    print(("ok: " if ok else "FAIL: ") + name + (f"  ({detail})" if detail else ""))
    if not ok:
        failures.append(name)


def tree_root():
    return subprocess.run([os.path.join(SRC, "scripts", "sid.sh"), "root"], check=True, capture_output=True,
                          text=True).stdout.strip()


class Oracle:
    """hf_oracle.py in the tree: requests over a work folder inside it."""

    def __init__(self, root):
        self.root = root
        self.host = tempfile.mkdtemp(prefix="vktrain-hf-", dir=os.path.join(root, "tmp"))
        self.inside = "/" + os.path.relpath(self.host, root)
        shutil.copy(os.path.join(SRC, "tests", "hf_oracle.py"), self.host)

    def path(self, name):
        """(host path, path in the tree) of a file of the work folder."""
        return os.path.join(self.host, name), self.inside + "/" + name

    def ask(self, requests):
        with open(os.path.join(self.host, "requests.json"), "w") as f:
            json.dump(requests, f)
        r = subprocess.run([os.path.join(SRC, "scripts", "sid.sh"), "python", self.inside + "/hf_oracle.py",
                            self.inside + "/requests.json", self.inside + "/results.json"],
                           capture_output=True, text=True)
        if r.returncode:
            print(r.stdout[-3000:], r.stderr[-3000:])
            raise SystemExit(f"FAIL: the oracle exited {r.returncode}")
        return json.load(open(os.path.join(self.host, "results.json")))

    def close(self):
        shutil.rmtree(self.host, ignore_errors=True)
