"""The seed contracts: interfaces and their semantics, no numerics.

| contract                         | seed (shared/seeds/)        |
|----------------------------------|-----------------------------|
| Kernel, KernelContext            | 001_a7cfc285f4a38a75.txt    |
| SharedPrePackedWeightCache,      | 000_410c6350a087f106.txt    |
|   PrePackedWeightsContainer      |                             |
| Device, Backend, BufferType,     | 002_23061e04fda6a8e4.txt    |
|   Buffer, Tensor, GraphPlan      |                             |
| compile                          | 003_a6c6328fd6e65493.txt    |
| AllocatorDesc, Stream,           | 004_addf7aa1a7373ebc.txt    |
|   register_allocator             |                             |
"""
from onnxep.contracts.allocator import AllocatorDesc, Stream, register_allocator, default_allocator
from onnxep.contracts.backend import Backend, Buffer, BufferType, Device, GraphPlan, Tensor, cpy_tensor
from onnxep.contracts.compile import compile
from onnxep.contracts.kernel import API_VERSION, Kernel, KernelContext
from onnxep.contracts.weight_cache import PrePackedWeightsContainer, SharedPrePackedWeightCache

__all__ = [
    "API_VERSION", "AllocatorDesc", "Backend", "Buffer", "BufferType", "Device", "GraphPlan", "Kernel",
    "KernelContext", "PrePackedWeightsContainer", "SharedPrePackedWeightCache", "Stream", "Tensor", "compile",
    "cpy_tensor", "default_allocator", "register_allocator",
]
