"""Every environment variable onnxep reads, read here and nowhere else."""
import os

#: Force one kernel variant: "avx512", "avx2" or "generic". Empty: pick the best the CPU supports.
ISA = os.environ.get("ONNXEP_ISA", "").strip().lower()
