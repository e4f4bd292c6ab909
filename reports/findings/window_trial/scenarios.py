"""Hand scenarios: each planted bug shown by one short story; the correct cache passes them all."""
# ruff: noqa: E702  (one engine step a line, as the docs write a TierWorld story)
import mybugs
import mycache

from radixcheck.properties.tiers.world import TierWorld


def b2(f):   # a host slot reused by a page whose token is tombstoned shows the old owner's value
    w = TierWorld(f, page_size=1, write_policy="write_through")
    w.serve([1]); w.finish(); w.complete_all()
    w.evict(100); w.complete_all(); w.evict_host(100)
    w.serve([9, 8, 7, 6, 5, 4]); w.finish(); w.complete_all()
    w.evict(100); w.complete_all()
    w.serve([9, 8, 7, 6, 5, 4]); w.finish()


def b4(f):   # tenant b's twin overwrites tenant a's host window
    w = TierWorld(f, page_size=1, write_policy="write_through")
    w.serve([1, 2], namespace="a"); w.finish(); w.complete_all()
    w.serve([1, 2], namespace="b"); w.finish(); w.complete_all()
    w.evict(100); w.complete_all()
    w.serve([1, 2], namespace="a"); w.finish()


def b5(f):   # a write-back lands while a request holds the page: the page stays, its window must too
    w = TierWorld(f, page_size=1, write_policy="write_back")
    w.serve([1, 2]); w.finish()
    w.evict(1)
    w.serve([1, 2])
    w.complete_all()
    w.finish()


def b6(f):   # re-inserted page: window live on device, tombstoned in its host copy
    w = TierWorld(f, page_size=1, write_policy="write_through")
    w.serve([1, 2, 3, 4, 5, 6]); w.finish(); w.complete_all()
    w.evict(100); w.complete_all()
    w.serve([1, 2, 3]); w.finish(); w.complete_all()
    w.serve([1, 2, 3, 4]); w.finish()


def b8(f):   # a failed load-back must resume where the window is live on device
    w = TierWorld(f, page_size=1, write_policy="write_through")
    w.serve([1, 2, 3, 4, 5, 6]); w.finish(); w.complete_all()
    w.evict(4); w.complete_all()
    w.fail_next([True])
    w.serve([1, 2, 3, 4, 5, 6]); w.finish()


def b9(f):   # a request matches a leaf whose write-back is pending: its window is still live on device
    w = TierWorld(f, page_size=1, write_policy="write_back")
    w.serve([1, 2]); w.finish()
    w.evict(1)
    w.serve([1, 2]); w.finish()


def b10(f):  # tenant b caches the twin of tenant a's prompt: a's window must stay a's
    w = TierWorld(f, page_size=1, write_policy="write_through")
    w.serve([1, 2], namespace="a"); w.finish()
    w.serve([9, 1, 2], namespace="b"); w.finish()
    w.serve([1, 2, 3, 4, 5, 6], namespace="b"); w.finish()
    w.serve([1, 2], namespace="a"); w.finish()


CASES = {"HostWindowSkipsTombstones": b2, "HostWindowKeyedByTokens": b4, "WriteBackFreesWindowOfKeptLeaf": b5,
         "HostPartReadsOnlyHostCopy": b6, "LoadFailReturnsDevicePath": b8,
         "WriteBackStartFreesWindow": b9, "TwinWindowOverwrite": b10}


if __name__ == "__main__":
    for name, story in CASES.items():
        story(mycache.make)
        try:
            story(getattr(mybugs, "make_" + name))
            print(f"{name}: NOT shown by its story")
        except Exception as exc:
            print(f"{name}: {type(exc).__name__}: {str(exc)[:300]}")
