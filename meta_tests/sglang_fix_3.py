"""SGLang's #3 fixed for one test (``RADIXCHECK_SGLANG_FIX=3``: both halves of a split keep the
node's last use), the patched methods restored by ``monkeypatch`` afterwards. Shared by the SWA
meta-tests that show a program explained by #3 passes once #3 is fixed."""

from __future__ import annotations

import pytest

from radixcheck.properties.adapters import sglang_hicache


def fix_3_for_this_test(monkeypatch: pytest.MonkeyPatch) -> None:
    sglang_hicache._load()  # SGLang imports on CPU only after the adapter's setup
    from sglang.srt.mem_cache.unified_cache.unified_tree_core import UnifiedTreeCore

    monkeypatch.setattr(UnifiedTreeCore, "_split_node", UnifiedTreeCore._split_node)  # restored after the test
    monkeypatch.setattr(UnifiedTreeCore, "_insert_walk_step", UnifiedTreeCore._insert_walk_step)
    sglang_hicache._fix_split_refresh(UnifiedTreeCore)
