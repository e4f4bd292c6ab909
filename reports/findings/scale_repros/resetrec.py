from radixcheck.reference import RadixCache


class ResetsRecursively(RadixCache):
    def reset(self):
        for root in self.roots.values():
            self._walk(root)
        super().reset()

    def _walk(self, node):
        for child in node.children.values():
            self._walk(child)


def make(allocator, page_size):
    return ResetsRecursively(allocator, page_size)
