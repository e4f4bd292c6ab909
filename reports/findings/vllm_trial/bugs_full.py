"""The tenant bugs on the full-attention group alone (no window), to compare which oracle files them."""
import bugs
from vllm_like import make_full


def _full(cls):
    def factory(allocator, page_size):
        return cls(allocator, page_size)
    factory.capabilities = make_full.capabilities
    return factory


salt_keyed_by_str = _full(bugs.SaltKeyedByStr)
extra_keys_concatenated = _full(bugs.ExtraKeysConcatenated)
