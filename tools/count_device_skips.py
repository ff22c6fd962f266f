"""The runs per device of the tests marked `devices(...)`, and those a `not_on(device, why)` mark skips, by reason.

    .venv/bin/python tools/count_device_skips.py [pytest arguments, default: tests]

Collection only: nothing runs (skips decided at run time, such as a missing device, are not counted)."""
import collections, sys
import pytest

class Count:
    def __init__(self):
        self.total = collections.Counter(); self.reasons = collections.Counter()
    def pytest_collection_modifyitems(self, items):
        for item in items:
            callspec = getattr(item, "callspec", None)
            device = callspec.params.get("gpuc_device") if callspec else None
            if device is None:
                continue
            self.total[device] += 1
            for mark in item.iter_markers("skip"):
                reason = mark.kwargs.get("reason", mark.args[0] if mark.args else "")
                if reason.startswith(f"not on {device}"):
                    self.reasons[(device, reason)] += 1
                    break

c = Count()
pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", *(sys.argv[1:] or ["tests"])], plugins=[c])
print("runs per device:", dict(c.total))
by_device = collections.Counter()
for (device, reason), n in c.reasons.most_common():
    by_device[device] += n
print("skipped statically:", dict(by_device))
for (device, reason), n in c.reasons.most_common():
    print(f"{n:5d}  {reason[:200]}")
