"""Make ``import sglang`` work on a CPU-only machine, for the reproductions in this folder.

Where the real ``triton`` is installed (any GPU box with a normal sglang install) this does
nothing. Elsewhere it registers radixcheck's stand-ins for ``triton`` and ``torchvision``
(``properties/adapters/_sglang_stubs.py``): nothing on the radix-cache code path runs them.
The reproductions use only sglang's own API; this file is their only link to radixcheck.
"""

import importlib.util
import sys
import warnings
from pathlib import Path

warnings.simplefilter("ignore")
if importlib.util.find_spec("triton") is None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from radixcheck.properties.adapters import _sglang_stubs

    _sglang_stubs.install()


class RecordingAllocator:
    """The smallest KV allocator RadixCache needs: remembers every free, refuses double frees."""

    device = "cpu"
    page_size = 1

    def __init__(self):
        self.freed = []

    def free(self, idx):
        ids = [int(i) for i in idx]
        again = sorted(set(ids) & set(self.freed))
        assert not again, f"double free of KV slots {again}"
        self.freed += ids

    def free_segment(self, idx, start_pos):
        self.free(idx)
