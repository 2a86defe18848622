"""scripts/torch-conformance reads unittest's verbose output right and compares the backends as
issue 19 asks. The full suite takes 10 minutes, so CI checks the reader on a log of the shapes it
meets, not the run."""
import importlib.machinery
import importlib.util
import os
import sys

script = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "torch-conformance")
loader = importlib.machinery.SourceFileLoader("torch_conformance", script)
spec = importlib.util.spec_from_loader("torch_conformance", loader)
conformance = importlib.util.module_from_spec(spec)
loader.exec_module(conformance)

LOG = """test_a (__main__.TestDistBackendWithSpawn.test_a) ... ok
test_b (__main__.TestDistBackendWithSpawn.test_b) ... INFO:torch.testing._internal.common_distributed:Started process 0 with pid 1
INFO:torch.distributed.distributed_c10d:Rank 0: Completed store-based barrier for key:store_based_barrier_key:1 with 2 nodes.
ok
test_c (__main__.TestDistBackendWithSpawn.test_c)
Runs c with its default inputs ... skipped 'CUDA is not available.'
test_d (__main__.TestDistBackendWithSpawn.test_d) ... INFO:x
ERROR
test_e (__main__.TestDistBackendWithSpawn.test_e) ... FAIL
test_f (__main__.TestDistBackendWithSpawn.test_f) ... skipped "Test requires backend to be one of {'gloo'}"
test_g (__main__.TestDistBackendWithSpawn.test_g) ... expected failure
test_h (__main__.TestDistBackendWithSpawn.test_h) ... INFO:torch: ok
ok
"""

got = conformance.parse(LOG)
want = {"test_a": "ok", "test_b": "ok", "test_c": "skip", "test_d": "error", "test_e": "fail", "test_f": "skip",
        "test_g": "skip", "test_h": "ok"}
if got != want:
    sys.exit(f"parse: got {got}, want {want}")

gloo = {"test_a": "ok", "test_b": "ok", "test_d": "ok", "test_f": "ok", "test_x": "ok", "test_y": "error"}
ours = {"test_a": "ok", "test_b": "fail", "test_d": "error", "test_f": "skip", "test_y": "ok"}
counted, reserved = conformance.compare(gloo, ours)
if counted != ["test_b", "test_d", "test_x"] or reserved != ["test_f"]:
    sys.exit(f"compare: got counted {counted}, reserved {reserved}")
print("conformance_parse_check: ok")
