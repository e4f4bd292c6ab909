"""mini-sglang's radix cache manager at sgl-project/mini-sglang@f074873 (the parent of the fix for
mini-sglang#52), vendored for radixcheck's audit.

See ORIGIN.md (what was copied, from where, and the only lines changed) and LICENSE (MIT).
"""
