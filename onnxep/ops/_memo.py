"""ShapeMemo: a kernel's decisions per input shapes (its plans: offsets, collapsed strides, row operands), kept for
the shapes a session meets again.

Compiled runs never ask a kernel for them; the Python runs do: a signature's first runs (not yet recorded, the
recording, the capture), a decoder's growing steps, an encoder fed lengths it has not planned. Dropping a memo whole
at 17 entries (each kernel's own rule till now) made every run of an encoder fed lengths 8-128 at random a cold
miss in every kernel. At most LIMIT entries, the oldest dropped first (a dict keeps insertion order)."""
from __future__ import annotations


class ShapeMemo(dict):
    """A dict whose `keep` bounds it: `memo.get(key)` to look up, `memo.keep(key, value)` to add (returns value)."""

    __slots__ = ()

    #: distinct shapes kept: more than an encoder's lengths 8-128 at batch 1; a few KB an entry at most
    LIMIT = 128

    @classmethod
    def of(cls, owner, name: str) -> "ShapeMemo":
        """owner's memo in its instance attribute `name`, made on first use."""
        memo = owner.__dict__.get(name)
        if memo is None:
            memo = owner.__dict__[name] = cls()
        return memo

    def keep(self, key, value):
        if key not in self:
            # (memos are shared by the runs of several Python threads: another may drop the same entry first, or
            # change the memo between iter and next; the loop then tries again)
            while len(self) >= self.LIMIT:
                try:
                    del self[next(iter(self))]
                except (KeyError, RuntimeError, StopIteration):
                    pass
        self[key] = value
        return value
