"""Scan: the body runs as a compiled subgraph (control/_body.py) once per slice of the scan inputs.

Scan-8: a batch axis 0 on the states and the scan inputs (the scan axis is 1), an optional sequence_lens input
(per batch entry, 1..max length; outputs past an entry's length are zero), `directions` of the scan inputs.
Scan-9+: no batch axis; scan_input_axes / scan_input_directions per scan input, scan_output_axes /
scan_output_directions per scan output (negative axes counted from the end)."""
from __future__ import annotations

import numpy as np

from onnxep.errors import InvalidArgument, OnnxepError
from onnxep.graph.model import check_size
from onnxep.ops._base import OpKernel
from onnxep.ops.control._body import Body, BodyOwner, fed_owners, owned, run_context, wrap_iteration


def _attr_list(v, count, default, what, name):
    v = list(v) if v is not None else []
    if v and len(v) != count:
        raise InvalidArgument(f"Scan node {name!r}: {what} has {len(v)} values, expected {count}")
    return [int(a) for a in v] or [default] * count


class _Scan(BodyOwner, OpKernel):
    op_type = "Scan"

    @classmethod
    def check_types(cls, op) -> bool:
        return True

    def __init__(self, info):
        super().__init__(info)
        self.body = Body(info.attrs["body"], info, "body")
        body = self.body
        self.m = int(self.num_scan_inputs)
        self.n = len(body.input_names) - self.m
        self.k = len(body.output_names) - self.n
        if self.n < 0 or self.k < 0 or info.scope.n_inputs != self.n + self.m + (1 if self.since == 8 else 0):
            self.release()
            raise InvalidArgument(f"Scan node {self.name!r}: the body has {len(body.input_names)} inputs and "
                                  f"{len(body.output_names)} outputs, the node {info.scope.n_inputs} inputs, for "
                                  f"num_scan_inputs={self.m}")

    def _iterate(self, ctx, states, xs, dirs, length, feeds, owners, run_ctx, batch=None):
        """Run the body `length` times over xs (scan axis first, C-contiguous); returns (final states, per scan
        output the list of per-iteration outputs)."""
        body = self.body
        names_in = body.input_names
        n = self.n
        ys = [[] for _ in range(self.k)]
        for t in range(length):
            for i in range(n):
                feeds[names_in[i]] = states[i]
            for j, (x, d) in enumerate(zip(xs, dirs)):
                feeds[names_in[n + j]] = x[length - 1 - t] if d else x[t]
            try:
                outs = body.run(feeds, run_ctx)
            except OnnxepError as e:
                where = f"in {body.attr}, iteration {t}" + ("" if batch is None else f" of batch entry {batch}")
                raise wrap_iteration(e, where) from e
            states = list(outs[:n])
            for q in range(self.k):
                y = outs[n + q]
                if not isinstance(y, np.ndarray):
                    raise InvalidArgument(f"Scan node {self.name!r}: scan output {q} is not a tensor "
                                          f"({type(y).__name__})")
                if ys[q] and (y.shape != ys[q][0].shape or y.dtype != ys[q][0].dtype):
                    raise InvalidArgument(f"Scan node {self.name!r}: scan output {q} ({body.output_names[n + q]!r}) "
                                          f"has shape {y.shape} at iteration {t}, {ys[q][0].shape} at iteration 0")
                ys[q].append(owned(y, owners))
        return states, ys

    def _empty_shape(self, q):
        vt = self.body.output_types[self.n + q]
        dims = vt.shape if vt is not None else None
        if dims is None or not all(isinstance(d, int) for d in dims):
            raise InvalidArgument(f"Scan node {self.name!r}: no iteration, and the body does not declare a static "
                                  f"shape for scan output {q}")
        return tuple(dims), (vt.dtype or np.float32)


class Scan_9(_Scan):
    since = 9

    def compute(self, ctx):
        m, n, k, name = self.m, self.n, self.k, self.name
        states = [ctx.input(i) for i in range(n)]
        xs = [np.asarray(ctx.input(n + j)) for j in range(m)]
        in_axes = _attr_list(getattr(self, "scan_input_axes", None), m, 0, "scan_input_axes", name)
        in_dirs = _attr_list(getattr(self, "scan_input_directions", None), m, 0, "scan_input_directions", name)
        out_axes = _attr_list(getattr(self, "scan_output_axes", None), k, 0, "scan_output_axes", name)
        out_dirs = _attr_list(getattr(self, "scan_output_directions", None), k, 0, "scan_output_directions", name)
        moved = []
        for j, (x, a) in enumerate(zip(xs, in_axes)):
            if not -x.ndim <= a < x.ndim:
                raise InvalidArgument(f"Scan node {name!r}: scan_input_axes[{j}]={a} is out of range for scan input "
                                      f"{j} of shape {x.shape}")
            moved.append(np.ascontiguousarray(np.moveaxis(x, a % x.ndim, 0)))
        lengths = {x.shape[0] for x in moved}
        if len(lengths) > 1:
            raise InvalidArgument(f"Scan node {name!r}: scan inputs of different lengths along their scan axes "
                                  f"{sorted(lengths)}")
        length = lengths.pop() if lengths else 0
        feeds = self.body.outer_feeds(ctx)
        owners = fed_owners(list(feeds.values()) + states + xs)
        states, ys = self._iterate(ctx, states, moved, in_dirs, length, feeds, owners, run_context(ctx))
        for i in range(n):
            ctx.set_output(i, states[i])
        for q in range(k):
            if not ctx.has_output(n + q):
                continue
            seq = ys[q]
            if seq:
                elem, dtype = seq[0].shape, seq[0].dtype
            else:
                elem, dtype = self._empty_shape(q)
            rank = len(elem) + 1
            a = out_axes[q]
            if not -rank <= a < rank:
                raise InvalidArgument(f"Scan node {name!r}: scan_output_axes[{q}]={a} is out of range for rank {rank}")
            a %= rank
            stacked_shape = (length,) + tuple(elem)
            shape = stacked_shape[1:a + 1] + (length,) + stacked_shape[a + 1:]
            check_size(shape, dtype, f"Scan node {name!r} scan output {q}")
            out = ctx.output(n + q, shape, dtype)
            if seq:
                view = np.moveaxis(out, a, 0)         # (length, *elem), a view of out
                if out_dirs[q]:
                    seq = seq[::-1]
                for t, y in enumerate(seq):
                    view[t] = y


class Scan_8(_Scan):
    since = 8

    def compute(self, ctx):
        m, n, k, name = self.m, self.n, self.k, self.name
        lens_in = ctx.input(0)
        states = [np.asarray(ctx.input(1 + i)) for i in range(n)]
        xs = [np.asarray(ctx.input(1 + n + j)) for j in range(m)]
        if not xs:
            raise InvalidArgument(f"Scan node {name!r}: no scan input")
        for j, x in enumerate(xs):
            if x.ndim < 2 or x.shape[:1] != xs[0].shape[:1] or x.shape[1] != xs[0].shape[1]:
                raise InvalidArgument(f"Scan node {name!r}: scan input {j} of shape {x.shape}: every scan input "
                                      f"needs the shape (batch, sequence, ...) of the first, {xs[0].shape}")
        batch, max_len = xs[0].shape[0], xs[0].shape[1]
        for i, s in enumerate(states):
            if s.ndim < 1 or s.shape[0] != batch:
                raise InvalidArgument(f"Scan node {name!r}: state {i} of shape {s.shape} needs the batch axis "
                                      f"({batch}) first")
        dirs = _attr_list(getattr(self, "directions", None), m, 0, "directions", name)
        if lens_in is None or np.size(lens_in) == 0:
            lens = [max_len] * batch
        else:
            lens = [int(v) for v in np.asarray(lens_in).reshape(-1)]
        if len(lens) != batch or any(not 1 <= v <= max_len for v in lens):
            raise InvalidArgument(f"Scan node {name!r}: sequence_lens {lens} must have {batch} values in "
                                  f"[1, {max_len}]")
        feeds = self.body.outer_feeds(ctx)
        owners = fed_owners(list(feeds.values()) + states + xs)
        run_ctx = run_context(ctx)
        finals, scans = [], []
        for b in range(batch):
            st, ys = self._iterate(ctx, [np.ascontiguousarray(s[b]) for s in states],
                                   [np.ascontiguousarray(x[b, :lens[b]]) for x in xs], dirs, lens[b], feeds, owners,
                                   run_ctx, batch=b)
            finals.append(st)
            scans.append(ys)
        for i in range(n):
            if not ctx.has_output(i):
                continue
            per = [np.asarray(f[i]) for f in finals]
            shape = (batch,) + (per[0].shape if per else tuple(states[i].shape[1:]))
            dtype = per[0].dtype if per else states[i].dtype
            check_size(shape, dtype, f"Scan node {name!r} state output {i}")
            out = ctx.output(i, shape, dtype)
            for b, p in enumerate(per):
                if p.shape != shape[1:]:
                    raise InvalidArgument(f"Scan node {name!r}: final state {i} of batch entry {b} has shape "
                                          f"{p.shape}, entry 0 {shape[1:]}")
                out[b] = p
        for q in range(k):
            if not ctx.has_output(n + q):
                continue
            if batch:
                elem, dtype = scans[0][q][0].shape, scans[0][q][0].dtype
            else:
                elem, dtype = self._empty_shape(q)
            shape = (batch, max_len) + tuple(elem)
            check_size(shape, dtype, f"Scan node {name!r} scan output {q}")
            out = ctx.output(n + q, shape, dtype)
            for b in range(batch):
                if lens[b] < max_len:
                    out[b, lens[b]:] = 0
                for t, y in enumerate(scans[b][q]):
                    if y.shape != tuple(elem):
                        raise InvalidArgument(f"Scan node {name!r}: scan output {q} has shape {y.shape} in batch "
                                              f"entry {b}, {tuple(elem)} in entry 0")
                    out[b, t] = y
