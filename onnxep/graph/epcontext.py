"""EPContext models: a session's compiled cpu partitions written out, and loaded back without compiling
(seed 003_a6c6328fd6e65493.txt, OrtEp::Compile: "If the session is configured to generate a pre-compiled model, the
execution provider must return EPContext nodes ... Each EPContext node encapsulates the pre-compiled binary data for
a OrtGraph compiled for a specific execution provider"; onnxruntime's EPContext design for the node and the keys).

Session config entries (onnxruntime's names):
  ep.context_enable      "1": creating the session writes an EPContext model
  ep.context_file_path   where it goes; default <input model>_ctx.onnx next to the input model; required when the
                         model was given as bytes. An existing file is not overwritten (as onnxruntime).
  ep.context_embed_mode  "0" (onnxruntime's default): the blob goes to a side file next to the EPContext model and
                         ep_cache_context holds its relative file name; "1": ep_cache_context holds the blob itself

The EPContext model: each cpu partition becomes one node, domain com.microsoft, op EPContext, whose inputs and
outputs are the partition's, with attributes main_context=1, ep_cache_context, embed_mode, source="onnxep",
partition_name, ep_sdk_version (onnxep's version), hardware_architecture (the kernel ISA) and notes (the packing
format). Reference-backend partitions stay plain ONNX nodes; the constants they read, overridable initializers and
constant graph outputs stay initializers. The graph is the optimized one, so loading runs no passes.

Blob layout, format version 1 (2 when a node carries subgraphs: If, Loop, Scan, SequenceMap), little-endian:

  header   magic b"ONNXEPCX" | u32 format version | u32 header bytes | u16 len(isa) | u16 len(packing format) | u32 0
           | u64 manifest bytes | u64 data bytes | u64 XXH64 (seed 0) of the payload | isa | packing format
           | zeros up to a multiple of 64
  payload  manifest (UTF-8 JSON) | zeros up to a multiple of 64 | data (arrays, each at a 64-aligned offset)

  manifest {"onnxep_version", "partition_name", "inputs": [names], "outputs": [names], "opsets": [one per node],
            "graph": [offset, nbytes]    a serialized GraphProto: the nodes (names, op types, domains, attributes,
                                         inputs, outputs) and one ValueInfo per value they read or write
            "constants": [{"name", "dtype", "shape", "offset", "nbytes"}]        constant inputs read unpacked
                         (or {"name", "tensorproto": [offset, nbytes]} for string tensors)
            "prepacked": [{"node", "input", "format", "weight": {"hash", "dtype", "shape"}, "info",
                           "buffers": [[offset, nbytes], ...]}]                   packed bytes + the kernel's info
            "repack": [[node, input], ...]       weights whose kernel cannot describe its packing: saved unpacked (in
                                                 "constants") and packed again on load
            "scope": [offset, nbytes]            format 2 only: a serialized ModelProto with no graph whose opset_import,
                                                 ir_version and functions are those the subgraphs are compiled with
            "compute_precision": "fp32"|"bf16", "bf16_conv_path": "amx"|"avx512bf16"|"fp32"}   the second only for
                                                 bf16 with conv packings; a session that differs refuses the blob

A node with subgraphs keeps them as its GraphProto attributes (the bodies are compiled again on load, over the
loading session's devices and fallback setting, as when the session compiled them). What the bodies read from the
enclosing scope (graph/partition.py subgraph_reads, nested bodies included) is saved as a node input is: a ValueInfo
in "graph" for each such value, and the constants among them in "constants"; the others are inputs of the EPContext
node (the partition's inputs include them) or outputs of its earlier nodes. Format 2 exists so that an onnxep that predates it refuses such a blob
instead of compiling its bodies without their opsets; a blob without subgraphs is still written as format 1.

No pickle, no np.save: every array is raw bytes with a dtype from a fixed list and a shape checked against its size.
Loading checks magic, format version, ISA and packing format against this process, then the hash, then every offset,
dtype and shape; any mismatch raises InvalidGraph naming the EPContext node, what was expected and what was found --
a blob is run exactly as saved or not at all.
"""
from __future__ import annotations

import json
import os
import re
import struct
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnxep import _kernels
from onnxep.contracts.backend import Buffer
from onnxep.contracts.weight_cache import content_hash
from onnxep.errors import Fail, InvalidArgument, InvalidGraph, NoSuchFile
from onnxep.errors import NotImplemented as OnnxepNotImplemented
from onnxep.graph.ir import Node, ValueType
from onnxep.graph.model import _attr_value, decode_bodies
from onnxep.graph.partition import op_info, subgraph_reads

CONFIG_ENABLE = "ep.context_enable"
CONFIG_FILE_PATH = "ep.context_file_path"
CONFIG_EMBED_MODE = "ep.context_embed_mode"

DOMAIN = "com.microsoft"
OP_TYPE = "EPContext"
SOURCE = "onnxep"
INTERNAL_DOMAIN = "com.onnxep"

MAGIC = b"ONNXEPCX"
FORMAT_VERSION = 2              # the newest this onnxep writes and reads
PLAIN_FORMAT_VERSION = 1        # written for a partition whose nodes carry no subgraph
_READ_VERSIONS = (1, 2)
ALIGN = 64
_HEADER = struct.Struct("<8sIIHHIQQQ")

#: dtypes a blob may hold as raw bytes (numpy names); anything else is refused.
_RAW_DTYPES = frozenset(("float32", "float64", "float16", "int8", "int16", "int32", "int64", "uint8", "uint16",
                         "uint32", "uint64", "bool"))


def _pad(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def is_context_node(node) -> bool:
    """A com.microsoft EPContext NodeProto (any source)."""
    return node.op_type == OP_TYPE and node.domain == DOMAIN


# ---------------------------------------------------------------------------------------------------- export
@dataclass(frozen=True)
class ExportOptions:
    path: str           # absolute path of the EPContext model to write
    embed_mode: int     # 1: blob in the attribute; 0: side file next to the model


def export_options(config: dict, path_or_bytes) -> ExportOptions | None:
    """The session's EPContext export settings, or None when ep.context_enable is not "1". Checked before compiling,
    so a bad setting costs nothing."""
    enable = config.get(CONFIG_ENABLE, "0").strip()
    if enable not in ("0", "1"):
        raise InvalidArgument(f"session config {CONFIG_ENABLE!r} must be '0' or '1', got {enable!r}")
    if enable != "1":
        return None
    embed = config.get(CONFIG_EMBED_MODE, "0").strip()
    if embed not in ("0", "1"):
        raise InvalidArgument(f"session config {CONFIG_EMBED_MODE!r} must be '0' or '1', got {embed!r}")
    src = os.path.abspath(os.fspath(path_or_bytes)) if isinstance(path_or_bytes, (str, os.PathLike)) else None
    path = config.get(CONFIG_FILE_PATH, "").strip()
    if not path:
        if src is None:
            raise InvalidArgument(f"{CONFIG_ENABLE}=1 with a model given as bytes: set {CONFIG_FILE_PATH!r} to where "
                                  f"the EPContext model should go")
        path = os.path.splitext(src)[0] + "_ctx.onnx"
    path = os.path.abspath(path)
    if os.path.isdir(path):
        raise InvalidArgument(f"{CONFIG_FILE_PATH}={path!r} is a folder; it must name the EPContext model file")
    if not os.path.isdir(os.path.dirname(path)):
        raise NoSuchFile(f"{CONFIG_FILE_PATH}={path!r}: the folder {os.path.dirname(path)!r} does not exist")
    if os.path.exists(path):  # as onnxruntime: never overwrite (it may be the input model itself)
        raise Fail(f"Failed to generate EP context model since the file exists already: {path!r}")
    return ExportOptions(path, int(embed))


class Exporter:
    """The compile step's EPContext hook (CompileContext.ep_context_export): one EPContext NodeProto per cpu
    partition, made while the partition is valid; `write` then writes the model (and side files)."""

    def __init__(self, opts: ExportOptions, taken_names):
        self.opts = opts
        self.taken = set(taken_names)
        self.blobs = []               # (side file name or None, blob bytes)
        self.count = 0

    def __call__(self, partition, plan):
        if partition.backend != "cpu":
            return None                # reference partitions stay plain nodes
        name = f"onnxep_cpu_{self.count}"
        while name in self.taken:
            name += "_"
        self.taken.add(name)
        self.count += 1
        blob = serialize(partition, plan, name)
        if self.opts.embed_mode == 1:
            cache, side = blob, None
        else:
            stem = os.path.splitext(os.path.basename(self.opts.path))[0]
            side = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{stem}_{name}.bin")
            cache = side.encode()
        self.blobs.append((side, blob))
        return helper.make_node(OP_TYPE, list(plan.inputs), list(plan.outputs), name=name, domain=DOMAIN,
                                main_context=1, ep_cache_context=cache, embed_mode=self.opts.embed_mode,
                                source=SOURCE, partition_name=name, ep_sdk_version=_onnxep_version(),
                                hardware_architecture=_kernels.ISA, notes=_kernels.SGEMM_FORMAT)

    def write(self, graph, partitions, ctx_nodes) -> None:
        """Write the EPContext model: the EPContext nodes in place of the cpu partitions, the reference partitions'
        nodes as they are. Side files first, the model last (a model never names a side file not yet written)."""
        folder = os.path.dirname(self.opts.path)
        for side, blob in self.blobs:
            if side is not None:
                with open(os.path.join(folder, side), "wb") as f:
                    f.write(blob)
        model = _context_model(graph, partitions, ctx_nodes)
        onnx.save(model, self.opts.path)
        self.blobs = []


def _onnxep_version() -> str:
    import onnxep
    return onnxep.__version__


def _value_info(name, vt):
    v = onnx.ValueInfoProto()
    v.name = name
    if vt is not None and vt.proto is not None:
        v.type.CopyFrom(vt.proto)
    return v


class _Data:
    """The data section being written: chunks at 64-aligned offsets."""

    def __init__(self):
        self.chunks = []
        self.size = 0

    def add(self, raw) -> list:
        raw = memoryview(raw).cast("B")
        off = _pad(self.size)
        if off > self.size:
            self.chunks.append(bytes(off - self.size))
        self.chunks.append(raw)
        self.size = off + raw.nbytes
        return [off, raw.nbytes]


def _array_entry(data: _Data, name, arr) -> dict:
    arr = np.asarray(arr)
    if arr.dtype.name in _RAW_DTYPES:
        a = np.ascontiguousarray(arr)
        off, n = data.add(a.reshape(-1).view(np.uint8))
        return {"name": name, "dtype": a.dtype.name, "shape": list(arr.shape), "offset": off, "nbytes": n}
    return {"name": name, "tensorproto": data.add(numpy_helper.from_array(arr, name).SerializeToString())}


def serialize(partition, plan, name: str) -> bytes:
    """The blob of one compiled cpu partition (layout in the module docstring)."""
    data = _Data()
    nodes = partition.nodes
    consts = partition.constants
    # the graph: nodes + a ValueInfo for every value they touch (constants typed from their arrays, as op_info does)
    g = onnx.GraphProto()
    g.name = name
    g.node.extend(n.proto for n in nodes)
    # what each node's subgraphs read from the enclosing scope: saved as its inputs are (types, constants)
    outer = {i: subgraph_reads(n) for i, n in enumerate(nodes) if n.attrs and n.has_subgraph}
    seen = set()
    for i, n in enumerate(nodes):
        for x in list(n.inputs) + list(n.outputs) + list(outer.get(i, ())):
            if not x or x in seen:
                continue
            seen.add(x)
            vt = partition.value_types.get(x)
            if vt is None and x in consts:
                vt = ValueType.of_array(consts[x])
            if vt is not None:
                g.value_info.append(_value_info(x, vt))
    graph_ref = data.add(g.SerializeToString())
    # packed weights the kernels can describe; the rest of the constant inputs go unpacked
    prepacked, repack, saved = [], [], set()
    refs = {}   # id(Buffer) -> [offset, nbytes]: a packing the container shares between kernels is written once

    def ref(buf):
        if id(buf) not in refs:
            refs[id(buf)] = data.add(buf.memory()[:buf.get_size()])
        return refs[id(buf)]

    for (i, j), (fmt, buffers) in sorted(plan.prepacked.items()):
        kernel = plan.steps[i][0]
        info = kernel.prepacked_weight_info(j)
        if info is None:
            repack.append([i, j])
            continue
        try:
            json.dumps(info)
        except (TypeError, ValueError) as e:
            raise Fail(f"node {nodes[i].name!r} ({nodes[i].op_type}): prepacked_weight_info({j}) of "
                       f"{type(kernel).__name__} is not JSON-able: {e}") from None
        weight = np.asarray(consts[nodes[i].inputs[j]])
        prepacked.append({
            "node": i, "input": j, "format": fmt, "info": info,
            "weight": {"hash": f"{content_hash(weight):016x}", "dtype": weight.dtype.name, "shape": list(weight.shape)},
            "buffers": [ref(b) for b in buffers],
        })
        saved.add((i, j))
    for i, step in enumerate(plan.steps):  # packed without the shared cache (non-sharing mode): packed again on load
        for j in step[3]:
            if (i, j) not in saved and [i, j] not in repack:
                repack.append([i, j])
    constants, written = [], set()
    for i, n in enumerate(nodes):
        for j, x in enumerate(list(n.inputs) + list(outer.get(i, ()))):
            if x and x in consts and (i, j) not in saved and x not in written:
                written.add(x)
                constants.append(_array_entry(data, x, consts[x]))
    manifest = {
        "onnxep_version": _onnxep_version(), "partition_name": name,
        "inputs": list(plan.inputs), "outputs": list(plan.outputs),
        "opsets": [int(n.opset) for n in nodes], "graph": graph_ref,
        "constants": constants, "prepacked": prepacked, "repack": repack,
        # onnxep.compute_precision the weights were packed for (the effective one: bf16 only where the CPU has it);
        # a session computing in another precision refuses the blob (backends/cpu/device.py)
        "compute_precision": _plan_precision(plan),
    }
    if manifest["compute_precision"] == "bf16" and any(_nhwc_conv_packing(e["format"]) for e in prepacked):
        # which convs took bf16 (and so which packing each has) follows from the CPU's bf16 conv path; a session on
        # a CPU with another one refuses the blob (backends/cpu/device.py)
        manifest["bf16_conv_path"] = _bf16_conv_path()
    version = PLAIN_FORMAT_VERSION
    if outer:
        version = FORMAT_VERSION
        scope = onnx.ModelProto()
        scope.ir_version = int(getattr(partition, "ir_version", 0) or 0)
        for d, v in sorted((getattr(partition, "opsets", None) or {}).items()):
            scope.opset_import.add(domain=d, version=int(v))
        scope.functions.extend(getattr(partition, "functions", None) or ())
        manifest["scope"] = data.add(scope.SerializeToString())
    mbytes = json.dumps(manifest, separators=(",", ":")).encode()
    payload = bytearray(_pad(len(mbytes)) + data.size)
    payload[:len(mbytes)] = mbytes
    pos = _pad(len(mbytes))
    for c in data.chunks:
        n = memoryview(c).nbytes
        payload[pos:pos + n] = c
        pos += n
    digest = _kernels.xxh64(np.frombuffer(payload, np.uint8))
    return _header(len(mbytes), data.size, digest, version) + bytes(payload)


def _nhwc_conv_packing(fmt: str) -> bool:
    """True for a dense channel-last conv's packing (fp32 GEMM, Winograd or bf16: ops/onnxep/nhwc_conv.py
    prepack_format), the packings the bf16 conv path decides between."""
    return "conv-nhwc" in fmt or "winograd" in fmt


def _bf16_conv_path() -> str:
    """This process's bf16 conv path as the manifest records it (ops/_bf16.py bf16_conv_packings): "amx",
    "avx512bf16" (+"+winograd" when Winograd convs take bf16 there, "+winograd4" when F(4x4) ones do too) or
    "fp32"."""
    from onnxep.ops._bf16 import bf16_conv_packings
    return bf16_conv_packings()


def _plan_precision(plan) -> str:
    """The effective onnxep.compute_precision of the plan's kernels: "bf16" when the session asked for it and the CPU
    has vdpbf16ps (ops/_bf16.py; what CpuBackend.effective_precision compares on load), else "fp32"."""
    asked = any(getattr(getattr(s[0], "info", None), "precision", "fp32") == "bf16" for s in plan.steps)
    return "bf16" if asked and _kernels.bgemm_hw() else "fp32"


def _header(manifest_len, data_len, digest, version=FORMAT_VERSION, isa=None, fmt=None) -> bytes:
    isa = (isa if isa is not None else _kernels.ISA).encode()
    fmt = (fmt if fmt is not None else _kernels.SGEMM_FORMAT).encode()
    hlen = _pad(_HEADER.size + len(isa) + len(fmt))
    h = _HEADER.pack(MAGIC, version, hlen, len(isa), len(fmt), 0, manifest_len, data_len, digest) + isa + fmt
    return h + bytes(hlen - len(h))


def _context_model(graph, partitions, ctx_nodes) -> onnx.ModelProto:
    """The EPContext model of an optimized graph whose partitions were compiled (ctx_nodes: one per partition)."""
    nodes, outer_reads = [], set()
    for part, cnode in zip(partitions, ctx_nodes):
        if cnode is not None:
            nodes.append(cnode)
            outer_reads.update(cnode.input)
        else:
            nodes.extend(n.proto for n in part.nodes)
            outer_reads.update(part.constants)
            outer_reads.update(part.inputs)
    over = [n for n, _ in graph.overridable]
    out_names = [n for n, _ in graph.outputs]
    keep = [k for k in graph.initializers if k in outer_reads or k in over or k in out_names]
    g = onnx.GraphProto()
    g.name = graph.metadata.get("graph_name", "") or "onnxep_ctx"
    g.doc_string = graph.metadata.get("graph_description", "")
    g.node.extend(nodes)
    g.input.extend(_value_info(n, vt) for n, vt in graph.inputs)
    g.input.extend(_value_info(n, vt) for n, vt in graph.overridable)
    if graph.ir_version < 4:  # before IR 4 every initializer is also a graph input
        listed = {i.name for i in g.input}
        g.input.extend(_value_info(k, ValueType.of_array(graph.initializers[k])) for k in keep if k not in listed
                       and isinstance(graph.initializers[k], np.ndarray))
    g.output.extend(_value_info(n, vt) for n, vt in graph.outputs)
    g.initializer.extend(numpy_helper.from_array(np.asarray(graph.initializers[k]), k) for k in keep)
    declared = {i.name for i in g.input} | set(out_names)
    inner = set()
    for n in g.node:
        inner.update(x for x in list(n.input) + list(n.output) if x)
    for x in sorted(inner - declared):
        vt = graph.value_types.get(x)
        if vt is not None and vt.proto is not None:
            g.value_info.append(_value_info(x, vt))
    meta = graph.metadata
    m = helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in graph.opsets.items()
                                            if d not in (INTERNAL_DOMAIN, DOMAIN)] + [helper.make_opsetid(DOMAIN, 1)])
    m.ir_version = graph.ir_version
    m.producer_name = meta.get("producer_name", "") or "onnxep"
    m.domain = meta.get("domain", "")
    m.doc_string = meta.get("description", "")
    m.model_version = int(meta.get("version", 0) or 0)
    for k, v in meta.get("custom_metadata_map", {}).items():
        m.metadata_props.append(onnx.StringStringEntryProto(key=k, value=v))
    m.functions.extend(graph.functions)
    return m


# ---------------------------------------------------------------------------------------------------- load
@dataclass
class LoadedPacking:
    """One packed weight read from a blob: what load_prepacked_kernel gives a kernel and the container."""

    format: str
    key_hash: int                 # the original weight's content hash, recorded at export (not recomputed)
    dtype: str
    shape: tuple
    buffers: tuple                # Buffers viewing the blob's memory (one Buffer per distinct blob range)
    info: dict


class LoadedContext:
    """A verified blob, shaped like a Partition for CpuBackend.graph_plan_create: nodes, inputs, outputs, value types,
    the unpacked constants, and per node index the packed weights (`packed_for`) and the weights to pack again
    (`repack_for`). A blob whose nodes carry subgraphs also gives the opsets, IR version and local functions their
    bodies are compiled with (None otherwise)."""

    backend = "cpu"

    def __init__(self, name, nodes, inputs, outputs, constants, value_types, packed, repack, opsets=None,
                 ir_version=None, functions=None):
        self.opsets = opsets
        self.ir_version = ir_version
        self.functions = functions
        self.name = name
        self.nodes = nodes
        self.inputs = inputs
        self.outputs = outputs
        self.constants = constants
        self.value_types = value_types
        self._packed = packed
        self._repack = repack

    def op_info(self, node):
        return op_info(node, self.value_types, self.constants)

    def packed_for(self, i) -> dict:
        return self._packed.get(i, {})

    def repack_for(self, i) -> tuple:
        return self._repack.get(i, ())


def extract(model: onnx.ModelProto, model_dir: str | None, buft) -> dict:
    """node name -> LoadedContext for every onnxep EPContext node of `model`'s graph, each blob read and verified.

    Each blob is read (side file) or copied (embedded) once into memory from `buft` (the session's weights
    BufferType): the packed weights are then Buffers viewing that memory, no further copy. The blobs are dropped from
    the protos (build_graph then sees small nodes). Raises InvalidGraph / NoSuchFile / NotImplemented naming the
    node."""
    out = {}
    for node in model.graph.node:
        if not is_context_node(node):
            continue
        attrs = {a.name: a for a in node.attribute}
        name = node.name
        where = f"EPContext node {name!r}"
        if not name or name in out:
            raise InvalidGraph(f"{where}: EPContext nodes need unique, non-empty names")
        source = attrs["source"].s.decode("utf-8", "replace") if "source" in attrs else ""
        if source != SOURCE:
            raise OnnxepNotImplemented(f"{where}: made by source {source!r}; onnxep loads only its own EPContext "
                                       f"nodes (source {SOURCE!r})")
        main = attrs["main_context"].i if "main_context" in attrs else 1
        if main != 1:
            raise OnnxepNotImplemented(f"{where}: main_context={main}; onnxep writes and reads main_context=1 only")
        embed = attrs["embed_mode"].i if "embed_mode" in attrs else 1
        if "ep_cache_context" not in attrs:
            raise InvalidGraph(f"{where}: no ep_cache_context attribute")
        cache = attrs["ep_cache_context"]
        if embed == 1:
            raw = cache.s
            cache.s = b""   # free the proto's copy; build_graph must not decode megabytes as a string
            blob = buft.alloc_buffer(len(raw))
            blob.memory()[:len(raw)] = np.frombuffer(raw, np.uint8)
            del raw
        elif embed == 0:
            try:
                ref = cache.s.decode("utf-8")
            except UnicodeDecodeError:
                raise InvalidGraph(f"{where}: ep_cache_context (embed_mode=0) is not a UTF-8 file name") from None
            blob = _read_side_file(model_dir, ref, where, buft)
        else:
            raise InvalidGraph(f"{where}: embed_mode must be 0 or 1, got {embed}")
        ctx = parse(blob, name)
        if list(node.input) != ctx.inputs or list(node.output) != ctx.outputs:
            raise InvalidGraph(f"{where}: the node's inputs/outputs {list(node.input)} -> {list(node.output)} are "
                               f"not the blob's {ctx.inputs} -> {ctx.outputs}")
        out[name] = ctx
    return out


def _read_side_file(model_dir, ref: str, where: str, buft) -> Buffer:
    """The side file `ref` of an embed_mode=0 node: a relative name that must resolve inside the model's folder."""
    if model_dir is None:
        raise InvalidGraph(f"{where}: embed_mode=0 names a side file ({ref!r}) but the model was given as bytes, "
                           f"with no folder to read it from: load the model from its path")
    parts = re.split(r"[\\/]", ref)
    if not ref or "\x00" in ref or os.path.isabs(ref) or ref.startswith(("/", "\\")) or ".." in parts \
            or re.match(r"^[A-Za-z]:", ref):
        raise InvalidGraph(f"{where}: side file {ref!r} must be a relative file name inside the model's folder "
                           f"(no absolute path, no '..')")
    root = os.path.realpath(model_dir)
    full = os.path.realpath(os.path.join(root, ref))
    if os.path.commonpath([full, root]) != root:
        raise InvalidGraph(f"{where}: side file {ref!r} resolves to {full!r}, outside the model's folder {root!r}")
    if not os.path.isfile(full):
        raise NoSuchFile(f"{where}: side file {ref!r} not found in {root!r}")
    with open(full, "rb", buffering=0) as f:
        size = os.fstat(f.fileno()).st_size
        blob = buft.alloc_buffer(size)
        mem = memoryview(blob.memory()[:size])
        got = 0
        while got < size:
            n = f.readinto(mem[got:])
            if not n:
                break
            got += n
    if got != size:
        raise InvalidGraph(f"{where}: side file {ref!r} changed while being read ({got} of {size} bytes)")
    return blob


def parse(blob: Buffer, name: str) -> LoadedContext:
    """Verify and decode one blob held in `blob` (the checks are in the module docstring)."""
    where = f"EPContext node {name!r}"
    buf = blob.memory()[:blob.get_size()]
    if buf.size < _HEADER.size:
        raise InvalidGraph(f"{where}: the blob is {buf.size} bytes, shorter than its {_HEADER.size}-byte header")
    magic, version, hlen, isa_len, fmt_len, _, mlen, dlen, digest = _HEADER.unpack_from(buf, 0)
    if magic != MAGIC:
        raise InvalidGraph(f"{where}: not an onnxep EPContext blob (magic {magic!r}, expected {MAGIC!r})")
    if version not in _READ_VERSIONS:
        raise InvalidGraph(f"{where}: blob format version {version}, this onnxep reads version {FORMAT_VERSION} "
                           f"(and {PLAIN_FORMAT_VERSION}): generate the EPContext model again with this onnxep")
    if hlen < _HEADER.size + isa_len + fmt_len or hlen > buf.size:
        raise InvalidGraph(f"{where}: header size {hlen} is inconsistent with the blob ({buf.size} bytes)")
    isa = bytes(buf[_HEADER.size:_HEADER.size + isa_len]).decode("ascii", "replace")
    fmt = bytes(buf[_HEADER.size + isa_len:_HEADER.size + isa_len + fmt_len]).decode("ascii", "replace")
    if isa != _kernels.ISA:
        raise InvalidGraph(f"{where}: the blob was made for kernel ISA {isa!r}, this process runs {_kernels.ISA!r} "
                           f"(see ONNXEP_ISA): generate the EPContext model again on this machine")
    if fmt != _kernels.SGEMM_FORMAT:
        raise InvalidGraph(f"{where}: the blob's weights are packed as {fmt!r}, this process packs "
                           f"{_kernels.SGEMM_FORMAT!r}: generate the EPContext model again with this onnxep")
    if hlen + _pad(mlen) + dlen != buf.size:
        raise InvalidGraph(f"{where}: the blob is {buf.size} bytes; its header says {hlen} + {_pad(mlen)} + {dlen} "
                           f"(truncated or padded)")
    payload = buf[hlen:]
    got = _kernels.xxh64(payload)
    if got != digest:
        raise InvalidGraph(f"{where}: integrity check failed: the header records XXH64 {digest:016x}, the payload "
                           f"hashes to {got:016x} (the blob was modified or damaged)")
    data = payload[_pad(mlen):]
    try:
        manifest = json.loads(bytes(payload[:mlen]).decode("utf-8"))
        return _decode(manifest, data, name, blob.buft, version)
    except InvalidGraph:
        raise
    except Exception as e:  # KeyError / TypeError / ValueError from the manifest, protobuf's DecodeError, ...
        raise InvalidGraph(f"{where}: malformed blob: {type(e).__name__}: {e}") from None


def _slice(data, ref, what, where):
    off, n = (int(v) for v in ref)
    if off < 0 or n < 0 or off + n > data.size:
        raise InvalidGraph(f"{where}: {what} at [{off}, {off + n}) lies outside the {data.size}-byte data section")
    return data[off:off + n]


def _array(data, e, where):
    what = f"constant {e['name']!r}"
    if "tensorproto" in e:
        t = onnx.TensorProto.FromString(bytes(_slice(data, e["tensorproto"], what, where)))
        return numpy_helper.to_array(t)
    dtype, shape = str(e["dtype"]), tuple(int(d) for d in e["shape"])
    if dtype not in _RAW_DTYPES or any(d < 0 for d in shape):
        raise InvalidGraph(f"{where}: {what} has dtype {dtype!r} / shape {shape}: not a raw array onnxep writes")
    raw = _slice(data, [e["offset"], e["nbytes"]], what, where)
    dt = np.dtype(dtype)
    if int(np.prod(shape, dtype=object)) * dt.itemsize != raw.size:
        raise InvalidGraph(f"{where}: {what}: {dtype} {shape} needs {int(np.prod(shape, dtype=object)) * dt.itemsize}"
                           f" bytes, the blob holds {raw.size}")
    return raw.view(dt).reshape(shape)   # a view of the blob's (64-aligned) memory


def _decode(manifest, data, name, buft, version=FORMAT_VERSION) -> LoadedContext:
    from onnxep.ops import _registry

    where = f"EPContext node {name!r}"
    g = onnx.GraphProto.FromString(bytes(_slice(data, manifest["graph"], "the graph", where)))
    opsets = [int(v) for v in manifest["opsets"]]
    if len(opsets) != len(g.node):
        raise InvalidGraph(f"{where}: {len(g.node)} nodes but {len(opsets)} opsets")
    nodes = []
    for n, opset in zip(g.node, opsets):
        node = decode_bodies(Node(n.name, n.op_type, n.domain, tuple(n.input), tuple(n.output),
                                  {a.name: _attr_value(a) for a in n.attribute}, opset))
        if _registry.lookup(node.domain, node.op_type, opset) is None:
            raise InvalidGraph(f"{where}: node {node.name!r} (op {node.domain + '.' if node.domain else ''}"
                               f"{node.op_type}, opset {opset}) has no cpu kernel in this onnxep")
        nodes.append(node)
    value_types = {vi.name: (ValueType.from_proto(vi.type) if vi.HasField("type") else ValueType())
                   for vi in g.value_info}
    constants = {e["name"]: _array(data, e, where) for e in manifest["constants"]}
    packed = {}
    views = {}   # (offset, nbytes) -> Buffer: a range written once for several kernels is one Buffer again

    def view(ref, what):
        key = (int(ref[0]), int(ref[1]))
        if key not in views:
            raw = _slice(data, key, what, where)
            views[key] = Buffer(buft, raw.size, raw)
        return views[key]

    for e in manifest["prepacked"]:
        i, j = int(e["node"]), int(e["input"])
        if not (0 <= i < len(nodes)) or not (0 <= j < len(nodes[i].inputs)) or j in packed.get(i, {}):
            raise InvalidGraph(f"{where}: packed weight for node {i} input {j}: no such input (or twice)")
        w = e["weight"]
        wdtype = str(w["dtype"])
        if wdtype not in _RAW_DTYPES:
            raise InvalidGraph(f"{where}: node {nodes[i].name!r} input {j}: weight dtype {wdtype!r} is not one onnxep "
                               f"packs")
        bufs = tuple(view(b, f"node {nodes[i].name!r} input {j} packed buffer") for b in e["buffers"])
        if not bufs:
            raise InvalidGraph(f"{where}: node {nodes[i].name!r} input {j}: a packed weight with no buffers")
        wshape = tuple(int(d) for d in w["shape"])
        vt = value_types.get(nodes[i].inputs[j])
        if vt is not None and vt.shape is not None and (tuple(vt.shape) != wshape or vt.dtype != np.dtype(wdtype)):
            raise InvalidGraph(f"{where}: node {nodes[i].name!r} input {j}: the packed weight is recorded as {wdtype} "
                               f"{wshape}, the blob's graph types {nodes[i].inputs[j]!r} as {vt.type_str} "
                               f"{tuple(vt.shape)}")
        info = e["info"]
        if not isinstance(info, dict):
            raise InvalidGraph(f"{where}: node {nodes[i].name!r} input {j}: packing info must be an object")
        packed.setdefault(i, {})[j] = LoadedPacking(str(e["format"]), int(w["hash"], 16), wdtype, wshape, bufs, info)
    repack = {}
    for i, j in manifest["repack"]:
        i, j = int(i), int(j)
        if not (0 <= i < len(nodes)) or not (0 <= j < len(nodes[i].inputs)) or nodes[i].inputs[j] not in constants:
            raise InvalidGraph(f"{where}: weight to pack again (node {i}, input {j}) is not a saved constant input")
        repack.setdefault(i, []).append(j)
    inputs = [str(x) for x in manifest["inputs"]]
    outputs = [str(x) for x in manifest["outputs"]]
    opsets = ir_version = functions = None
    with_subgraphs = [n.name for n in nodes if n.attrs and n.has_subgraph]
    if with_subgraphs:
        if version < FORMAT_VERSION or "scope" not in manifest:
            raise InvalidGraph(f"{where}: node {with_subgraphs[0]!r} carries subgraphs but the blob (format version "
                               f"{version}) does not record the opsets they are compiled with")
        scope = onnx.ModelProto.FromString(bytes(_slice(data, manifest["scope"], "the subgraph scope", where)))
        opsets = {o.domain: int(o.version) for o in scope.opset_import}
        ir_version = int(scope.ir_version)
        functions = list(scope.functions)
    precision = str(manifest.get("compute_precision", "fp32"))
    if precision not in ("fp32", "bf16"):
        raise InvalidGraph(f"{where}: compute_precision {precision!r} is not one onnxep knows ('fp32', 'bf16')")
    loaded = LoadedContext(str(manifest.get("partition_name", name)), nodes, inputs, outputs, constants, value_types,
                           packed, repack, opsets, ir_version, functions)
    loaded.compute_precision = precision
    loaded.bf16_conv_path = manifest.get("bf16_conv_path")      # None: no conv packing recorded one
    return loaded
