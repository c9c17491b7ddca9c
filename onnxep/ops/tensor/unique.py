"""Unique: not implemented yet (the module is listed in OPS so that its kernels register once written)."""
