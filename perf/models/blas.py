"""Which BLAS torch computes with, pinned per process so that traces regenerate bit for bit.

Debian's python3-torch calls the system libblas.so.3 (BLAS_INFO=generic), which is whatever
alternative is installed: the netlib reference BLAS (libblas3) or OpenBLAS. They round
differently, and the reference one is 10-20x slower (a 512x256 by 256x30001 matmul: 1.9 s against
0.12 s on one core here). The LSTM trace was recorded with the reference BLAS and stays so; the
rec and transformer traces and the DDP benchmark use OpenBLAS (libopenblas0-pthread) on one
thread with its Haswell (AVX2) kernels, the same on every x86-64 machine with AVX2, whatever
kernels the CPU would otherwise get. The directories below are Debian's alternatives' own.
"""
import os
import sys

DIRS = {
    "reference": "/usr/lib/x86_64-linux-gnu/blas",
    "openblas": "/usr/lib/x86_64-linux-gnu/openblas-pthread",
}


def environment(kind):
    """Variables that make a new process load `kind`'s libblas.so.3 (before the system's)."""
    env = {"LD_LIBRARY_PATH": DIRS[kind], "SPARCOLL_BLAS": kind}
    if kind == "openblas":
        env.update(OPENBLAS_NUM_THREADS="1", OPENBLAS_CORETYPE="Haswell")
    return env


def reexec_with(kind):
    """Restarts this script with `kind`'s BLAS unless it already runs with it."""
    want = environment(kind)
    if all(os.environ.get(k) == v for k, v in want.items()):
        return
    if not os.path.exists(os.path.join(DIRS[kind], "libblas.so.3")):
        sys.exit(f"blas: {DIRS[kind]}/libblas.so.3 is missing (scripts/install-deps.sh installs "
                 f"{'libblas3' if kind == 'reference' else 'libopenblas0-pthread'})")
    os.execve(sys.executable, [sys.executable] + sys.argv, {**os.environ, **want})


def loaded():
    """The libblas.so.3 this process has mapped (after importing torch), from /proc/self/maps."""
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if "/libblas.so.3" in path:
                return os.path.realpath(path)
    return "none"
