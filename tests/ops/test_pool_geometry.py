"""PoolAttrs.geometry's refusal of a window that covers no input pixel (what supports_pool asks of a static input
shape), against a brute-force oracle: every tap of every window enumerated in Python."""
import itertools

import pytest

from onnxep.ops._pool_common import PoolAttrs


def _brute_empty_window(n, k, s, d, b, o) -> bool:
    """Whether some window of the o windows covers no pixel of [0, n): each tap st + t * d walked."""
    return any(not any(0 <= j * s - b + t * d < n for t in range(k)) for j in range(o))


@pytest.mark.parametrize("ceil_mode", [0, 1])
def test_geometry_refuses_exactly_the_empty_windows(ceil_mode):
    # oracle: the tap-by-tap walk above, on the output size geometry reports (or works out when it refuses)
    seen = {True: 0, False: 0}
    for n, k, s, d, b, e in itertools.product(range(1, 9), range(1, 4), range(1, 4), range(1, 6), range(3), range(3)):
        if b >= k or e >= k:
            continue            # (PoolAttrs.valid refuses pads >= kernel)
        pa = PoolAttrs([k], [s], [b, e], [d], "NOTSET", ceil_mode)
        sw = (k - 1) * d + 1
        span = n + b + e - sw
        if ceil_mode:
            o = -(-span // s) + 1
            if o > 0 and (o - 1) * s >= n + b:
                o -= 1
        else:
            o = span // s + 1 if span >= 0 else 0
        if o < 1:
            with pytest.raises(ValueError, match="empty"):
                pa.geometry([n])
            continue
        empty = _brute_empty_window(n, k, s, d, b, o)
        seen[empty] += 1
        if empty:
            with pytest.raises(ValueError, match="covers no input pixel"):
                pa.geometry([n])
        else:
            out, pb, pe = pa.geometry([n])
            assert (out, pb, pe) == ([o], [b], [e])
    assert seen[True] > 0 and seen[False] > 0       # both answers met
