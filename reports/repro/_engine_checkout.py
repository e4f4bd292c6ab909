"""The engine module a reproduction runs, from the user's own checkout (mini-sglang, LightLLM).

Neither engine is audited from the package registry: each repro takes the same setting as the
adapters, ``RADIXCHECK_MINISGLANG_SRC`` or ``RADIXCHECK_LIGHTLLM_SRC`` (a git clone), and one
optional argument saying what to run:

    <repro>.py            # the commit the finding was made on, from the checkout's history
    <repro>.py <commit>   # another commit of that history (e.g. the one before or after a fix)
    <repro>.py worktree   # the checkout as it is (to try upstream's latest)

The module is imported unchanged through radixcheck's loader, which puts radixcheck's stand-ins
for the engine's GPU and shared-memory internals into ``sys.modules`` first
(``properties/adapters/checkout.py``). Without the setting the repro prints what to clone and
exits 2 (not run), so that 1 keeps meaning "the behaviour is present".
"""

import sys
import warnings
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # a clone run without installing radixcheck

from radixcheck.properties.adapters.checkout import CheckoutMissing  # noqa: E402


def engine_module(adapter: str, default_commit: str) -> tuple[ModuleType, str]:
    """The engine's cache module and a label naming its commit; ``adapter`` is ``"mini_sglang"`` or
    ``"lightllm_radix"``. Exits 2 with the checkout message when the setting is missing."""
    import importlib

    load = importlib.import_module(f"radixcheck.properties.adapters.{adapter}").load
    wanted = sys.argv[1] if len(sys.argv) > 1 else default_commit
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")  # an unvalidated working tree is said, not hidden
            module, source = load(None if wanted == "worktree" else wanted)
    except CheckoutMissing as exc:
        print(f"not run: {exc}", file=sys.stderr)
        sys.exit(2)
    print(source.describe())
    return module, (source.commit or "unknown")[:7]
