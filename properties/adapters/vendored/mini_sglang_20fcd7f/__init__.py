"""mini-sglang's radix prefix cache at sgl-project/mini-sglang@20fcd7f, vendored for radixcheck's audit.

See ORIGIN.md (what was copied, from where, and the only lines changed) and LICENSE (MIT).
"""
