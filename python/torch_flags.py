"""Prints the build flags of Debian's PyTorch for python/meson.build, one 'key=value' a line.

Run by Meson at configure time with /usr/bin/python3. When something the extension compiles
against is missing it prints 'missing=<Debian package>' and 'reason=<what is absent>' and exits
1, so -Dpython=auto can report the feature as not built, naming the package.
"""
import os
import sys
import sysconfig


def missing(package, reason):
    print(f"missing={package}")
    print(f"reason={reason}")
    sys.exit(1)


try:
    import torch
    from torch.utils import cpp_extension
except ImportError as e:  # python3-torch not installed
    missing("python3-torch", f"torch is not importable by {sys.executable}: {e}")

includes = [d for d in cpp_extension.include_paths() if os.path.isdir(d)]  # THC is listed where absent
system_includes = includes + ["/usr/include"]


def found(header, dirs):
    return any(os.path.exists(os.path.join(d, header)) for d in dirs)


# What torch's own headers include: c10d's, pybind11's (only a Recommends of python3-torch) and
# the interpreter's.
if not found("torch/csrc/distributed/c10d/ProcessGroup.hpp", includes):
    missing("libtorch-dev", f"torch/csrc/distributed/c10d/ProcessGroup.hpp not found under {includes}")
if not found("pybind11/pybind11.h", system_includes):
    missing("pybind11-dev", "pybind11/pybind11.h not found (torch's headers include it)")
if not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
    missing("python3-dev", f"Python.h not found in {sysconfig.get_paths()['include']}")
for d in includes:
    print(f"include={os.path.realpath(d)}")
for d in cpp_extension.library_paths():
    print(f"libdir={os.path.realpath(d)}")
print(f"cxx11_abi={int(torch._C._GLIBCXX_USE_CXX11_ABI)}")
print(f"version={torch.__version__}")
