"""What the parity scripts share: a token shard in llm.c's uint16 format
(256 int32 header: magic 20240520, version 1, token count; then the ids),
the format vktrain's tokens dataset reads."""
import numpy as np


def write_shard(path, ids):
    header = np.zeros(256, np.int32)
    header[0], header[1], header[2] = 20240520, 1, len(ids)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(ids, np.uint16).tobytes())
