"""What the parity tests need to know of the torch they compare with.

torch picks its CPU kernels by capability at run time (ATEN_CPU_CAPABILITY
overrides it). Stoker's kernels reproduce the float32 rounding of the AVX2
kernels (grid_sample's fused multiply-adds, linspace's vector steps), so
the parity tests hold them bit for bit there, and to their MAD bound
elsewhere.
"""
import torch

TORCH_AVX2 = "CPU capability usage: AVX2" in torch.__config__.show()
