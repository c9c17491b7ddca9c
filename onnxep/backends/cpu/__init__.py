from onnxep.backends.cpu.device import CpuBackend, CpuDevice, CPU_DEVICE

__all__ = ["CpuBackend", "CpuDevice", "CPU_DEVICE"]
