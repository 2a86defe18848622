"""Prints the build flags of Debian's PyTorch for python/meson.build, one 'key=value' a line.

Run by Meson at configure time with /usr/bin/python3; exits 1 with the reason on stderr when
torch or libtorch-dev's headers are missing, so -Dpython=auto can skip the package.
"""
import os
import sys

try:
    import torch
    from torch.utils import cpp_extension
except ImportError as e:  # python3-torch not installed
    sys.exit(f"torch is not importable by {sys.executable}: {e} (apt-get install python3-torch libtorch-dev)")

includes = cpp_extension.include_paths()
header = "torch/csrc/distributed/c10d/ProcessGroup.hpp"
if not any(os.path.exists(os.path.join(d, header)) for d in includes):
    sys.exit(f"{header} not found under {includes} (apt-get install libtorch-dev)")
for d in includes:
    if os.path.isdir(d):  # include_paths() lists THC even where it does not exist
        print(f"include={os.path.realpath(d)}")
for d in cpp_extension.library_paths():
    print(f"libdir={os.path.realpath(d)}")
print(f"cxx11_abi={int(torch._C._GLIBCXX_USE_CXX11_ABI)}")
print(f"version={torch.__version__}")
