"""Runs a script under torchrun on this host: run_torchrun.py NPROC SCRIPT [ARGS...].

torchrun gets a free --master_port (tests may run next to other jobs) and --redirects 1
--tee 1: torch 1.13's torchrun fails on Python 3.11 without them (its Std flag parsing).
Exits with torchrun's status; a launch that outlives RUN_TORCHRUN_TIMEOUT seconds (default 240) is killed
and fails.
"""
import os
import signal
import socket
import subprocess
import sys

TIMEOUT = int(os.environ.get("RUN_TORCHRUN_TIMEOUT", "240"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv):
    if len(argv) < 2:
        sys.exit("usage: run_torchrun.py NPROC SCRIPT [ARGS...]")
    nproc, script, args = argv[0], argv[1], argv[2:]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", nproc,
           "--master_addr", "127.0.0.1", "--master_port", str(free_port()),
           "--redirects", "1", "--tee", "1", script, *args]
    print("run_torchrun:", " ".join(cmd), flush=True)
    proc = subprocess.Popen(cmd, start_new_session=True)
    try:
        return proc.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # torchrun and its ranks: the session we started
        print(f"run_torchrun: still running after {TIMEOUT} s, killed", flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
