#!/usr/bin/python3
"""DDP step time of the three models of perf/models on sparcoll and on gloo.

    scripts/bench-ddp                                  # every case: 3 models x dense/sparse x 2, 4 ranks
    scripts/bench-ddp --models rec --ranks 4 --grads sparse --jsonl out.jsonl

Run without torchrun's variables, it is the launcher: for every case (model, gradient layout,
rank count) it starts torchrun with itself (--redirects 1 --tee 1: torch 1.13's torchrun needs
them on Python 3.11) and prints a summary table at the end. Under torchrun, every rank trains the
model with DistributedDataParallel once per backend (a gloo group and the sparcoll default
group), with the same initial weights and the same batches (each rank its own), the backends'
steps interleaved (gloo, sparcoll, then sparcoll, gloo, ...) so the shared host's load falls on
both alike, and rank 0 prints per backend:
  step ms     median time of a training step (zero_grad, forward, backward, optimizer step)
              after the warm-up steps, rank 0; "max rank" is the largest median over the ranks
  comm ms     median per step of the time during which at least one DDP bucket's allreduce was
              in flight: a communication hook wraps DDP's default allreduce hook and notes when
              it was called and when its future completed
  exposed ms  median per step of backward's end minus the last bucket's launch: how long the
              step waited for communication after the last gradient was ready
  backward ms median of loss.backward(), which includes DDP's wait for every bucket
and whether the two loss curves agree within --rtol/--atol on every rank. The backends sum in
different orders, so the curves are close, not equal, and training amplifies an ulp's difference
step after step; so every bucket of the warm-up steps (--check-steps) is also checked against
the f64 sum of every rank's input, and the verdict is "agree" (within tolerance), "rounding"
(beyond it, but every sum within fp32's bound for any order and the curves' first difference
rounding-sized) or "DIFFER", which, like a wrong sum, fails the launch. --grad sparse gives the models'
embeddings sparse COO gradients (sparse=True); dense is the default layout of every parameter.
Each launch's result is also one JSON line per backend (--jsonl).

Threads: one torch thread per rank and OpenBLAS on one thread (set by scripts/bench-ddp), as
several ranks share the host's cores.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, HERE)

import models  # noqa: E402  (perf/models)
from models import blas, hostload  # noqa: E402

# Per model: steps and warm-up per backend, and the per-rank batch, chosen so a step is a real
# training step (the recorder's batch) and all 12 launches take well under 15 minutes here.
PLAN = {
    "rec": dict(steps=16, warmup=4, batch=None),
    "transformer": dict(steps=12, warmup=3, batch=None),
    "lstm": dict(steps=30, warmup=6, batch=None),
}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="rec,transformer,lstm", help="launcher: comma-separated models")
    p.add_argument("--grads", default="dense,sparse", help="launcher: comma-separated gradient layouts")
    p.add_argument("--ranks", default="2,4", help="launcher: comma-separated rank counts")
    p.add_argument("--jsonl", help="append one JSON object per launch and backend to this file")
    p.add_argument("--timeout", type=int, default=900, help="launcher: seconds one launch may take")
    p.add_argument("--model", choices=sorted(models.MODULES), help="rank: the model")
    p.add_argument("--grad", choices=["dense", "sparse"], default="dense", help="rank: embedding gradients")
    p.add_argument("--steps", type=int, help="training steps per backend (default: per model)")
    p.add_argument("--warmup", type=int, help="first steps left out of the medians (default: per model)")
    p.add_argument("--batch", type=int, help="per-rank batch (default: the model's)")
    p.add_argument("--backends", default="gloo,sparcoll",
                   help="in the order they run; the first is the reference. 'nocomm' is DDP whose hook returns "
                        "each bucket unreduced: no backend's step can be faster (its losses are not compared)")
    p.add_argument("--rtol", type=float, default=1e-3, help="allowed relative loss difference")
    p.add_argument("--atol", type=float, default=1e-5, help="allowed absolute loss difference")
    p.add_argument("--check-steps", type=int,
                   help="check every bucket's sum of the first N steps against an f64 sum (default: the warm-up "
                        "steps, which the medians leave out, as the check gathers every rank's bucket)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", action="store_true",
                   help="rank 0 also prints the CPU time per step of each of its threads over the measured steps")
    return p.parse_args()


def thread_cpu():
    """{tid: (name, CPU seconds)} of this process's threads, from /proc/self/task."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        out[int(tid)] = (name, (int(fields[11]) + int(fields[12])) / tick)
    return out


# ---------------------------------------------------------------- one rank

class SumCheck:
    """Checks a bucket's allreduce against the exact sum: before the launch it gathers every
    rank's input over the gloo group and sums it in f64; when the future completes it compares.
    The error is reported in units of the bound on fp32 summation in any order,
    (p - 1) * 2^-24 * sum_r |x_r| per element, so <= 1 is a correct sum whatever the order, and
    anything above is a wrong one (a lost, doubled or misplaced contribution)."""

    def __init__(self, gloo):
        self.gloo = gloo
        self.worst = 0.0
        self.buckets = 0

    def gather(self, x):
        import torch
        import torch.distributed as dist
        world = dist.get_world_size(self.gloo)
        if x.is_sparse:
            x = x.coalesce()
            parts = [None] * world
            dist.all_gather_object(parts, (x.indices(), x.values()), group=self.gloo)
            idx = torch.cat([i for i, _ in parts], dim=1)
            ref = torch.sparse_coo_tensor(idx, torch.cat([v.double() for _, v in parts]), x.shape).coalesce()
            mag = torch.sparse_coo_tensor(idx, torch.cat([v.double().abs() for _, v in parts]), x.shape).coalesce()
            return ref, mag, world
        parts = [torch.empty_like(x) for _ in range(world)]
        dist.all_gather(parts, x, group=self.gloo)
        ref = torch.zeros(x.shape, dtype=torch.float64)
        mag = torch.zeros(x.shape, dtype=torch.float64)
        for part in parts:
            ref += part.double()
            mag += part.double().abs()
        return ref, mag, world

    def compare(self, expected, result):
        import torch
        ref, mag, world = expected
        if result.is_sparse:
            diff = (result.coalesce().double() - ref).coalesce().to_dense()
            mag = mag.to_dense()
        else:
            diff = result.double() - ref
        bound = max(world - 1, 1) * 2.0**-24 * mag + 1e-45  # 1e-45: the smallest fp32 subnormal
        ratio = (diff.abs() / bound).max().item() if diff.numel() else 0.0
        self.worst = max(self.worst, ratio)
        self.buckets += 1


class CommTimer:
    """DDP communication hook: DDP's own allreduce hook, timed from its call to its future; with
    a SumCheck set (warm-up steps only, as it gathers), each bucket is also checked."""

    def __init__(self, group, reduce=True):
        self.group = group
        self.reduce = reduce
        self.intervals = []
        self.check = None

    def hook(self, state, bucket):
        import torch
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        if not self.reduce:
            fut = torch.futures.Future()
            fut.set_result(bucket.buffer())
            return fut
        check, expected = self.check, None
        if check is not None:
            # The default hook divides the bucket by the world size in place, then allreduces it.
            import torch.distributed as dist
            x = bucket.buffer().clone()
            x.div_(dist.get_world_size(self.group))
            expected = check.gather(x)
        start = time.perf_counter()
        fut = default_hooks.allreduce_hook(self.group, bucket)

        def done(f):
            self.intervals.append((start, time.perf_counter()))
            if expected is not None:
                check.compare(expected, f.value())
            return f.value()
        return fut.then(done)

    def take(self):
        """(time with at least one bucket in flight, last launch) of the step, and reset."""
        spans = sorted(self.intervals)
        self.intervals = []
        busy, end = 0.0, float("-inf")
        for a, b in spans:
            if b > end:
                busy += b - max(a, end)
                end = b
        return busy, max((a for a, _ in spans), default=None)


def train(task, args, groups, backends, batches, initial_state):
    """Trains one model per backend on the same batches, the backends' steps interleaved (step i
    runs them in the order given for even i, reversed for odd i), so the host's load, which
    varies over seconds here, falls on every backend alike."""
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    sparse = args.grad == "sparse"
    runs = {}
    for b in backends:
        model = task.model(sparse=sparse)
        model.load_state_dict(initial_state)
        ddp = DDP(model, process_group=groups[b])
        timer = CommTimer(groups[b], reduce=b != "nocomm")
        ddp.register_comm_hook(None, timer.hook)
        runs[b] = dict(ddp=ddp, timer=timer, check=SumCheck(groups["gloo"]), opt=task.optimizer(model, sparse=sparse),
                       out={"loss": [], "step": [], "backward": [], "comm": [], "exposed": []})
    cpu = {}
    for i, batch in enumerate(batches):
        if i == args_warmup(args, task):
            cpu["start"], cpu["t0"] = thread_cpu(), time.perf_counter()
        for b in (backends if i % 2 == 0 else backends[::-1]):
            r = runs[b]
            ddp, timer, opt, out = r["ddp"], r["timer"], r["opt"], r["out"]
            timer.check = r["check"] if i < args_check_steps(args, task) else None
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss = ddp(*batch)
            t1 = time.perf_counter()
            loss.backward()
            t2 = time.perf_counter()
            opt.step()
            t3 = time.perf_counter()
            busy, last_launch = timer.take()
            out["loss"].append(loss.item())
            out["step"].append(t3 - t0)
            out["backward"].append(t2 - t1)
            out["comm"].append(busy)
            out["exposed"].append(t2 - last_launch if last_launch is not None else 0.0)
    if args.threads and "start" in cpu and torch.distributed.get_rank() == 0:
        end, wall = thread_cpu(), time.perf_counter() - cpu["t0"]
        steps = len(batches) - args_warmup(args, task)
        used = sorted(((end[t][1] - cpu["start"].get(t, ("", 0.0))[1], t, end[t][0]) for t in end), reverse=True)
        print(f"threads of rank 0 over the measured steps ({wall:.1f} s wall, {steps} steps x {len(backends)} backends): "
              f"CPU ms per step, busiest first")
        for sec, tid, name in used[:12]:
            print(f"  tid {tid} {name}: {1000 * sec / steps:.1f} ms/step ({100 * sec / wall:.0f}% of a core)")
    for b in backends:
        torch.distributed.barrier(group=groups[b])
    return {b: dict(runs[b]["out"], sum_error=runs[b]["check"].worst, sums_checked=runs[b]["check"].buckets)
            for b in backends}


def args_warmup(args, task):
    return args.warmup if args.warmup is not None else PLAN[args.model]["warmup"]


def args_check_steps(args, task):
    return args.check_steps if args.check_steps is not None else args_warmup(args, task)


def rank_main(args):
    import numpy as np
    import torch
    import torch.distributed as dist
    try:
        import sparcoll_torch
    except ImportError as e:
        sys.exit(f"ddp_step_bench: cannot import sparcoll_torch ({e}); build with meson and set "
                 "PYTHONPATH=build/python (scripts/bench-ddp does)")

    window = hostload.Window()
    torch.set_num_threads(1)  # several ranks share the host's cores
    dist.init_process_group("sparcoll")
    rank, world = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    groups = {"gloo": gloo, "sparcoll": None, "nocomm": gloo}
    backends = args.backends.split(",")
    if backends[0] == "nocomm" or any(b not in groups for b in backends):
        sys.exit(f"ddp_step_bench: --backends {args.backends}: each of gloo, sparcoll, nocomm, and not nocomm first")
    compared = [b for b in backends[1:] if b != "nocomm"]

    plan = PLAN[args.model]
    steps = args.steps or plan["steps"]
    warmup = args.warmup if args.warmup is not None else plan["warmup"]
    if steps <= warmup:
        sys.exit(f"ddp_step_bench: --steps {steps} must exceed --warmup {warmup}")
    cfg = models.config(args.model, seed=args.seed, batch=args.batch or plan["batch"])
    task = models.task(args.model, cfg)
    torch.manual_seed(args.seed)
    initial_state = {k: v.clone() for k, v in task.model(sparse=False).state_dict().items()}
    rng = np.random.Generator(np.random.PCG64(args.seed * 1000 + rank + 1))
    gen = torch.Generator().manual_seed(args.seed * 1000 + rank + 1)
    batches = [task.batch(rng, gen) for _ in range(steps)]

    runs = train(task, args, groups, backends, batches, initial_state)

    # Loss curves: every rank compares its own, the verdict is shared so all ranks agree on it.
    # Curves whose sums are all correct still part when the backends add in different orders:
    # one step differs by an ulp, and training amplifies that step after step. So the verdict
    # tells "within tolerance", "rounding" (beyond it, but every checked sum within fp32's bound
    # and the first difference a rounding-sized one) and "DIFFER".
    ref = runs[backends[0]]["loss"]
    worst = {b: max(abs(a - c) - (args.atol + args.rtol * abs(a)) for a, c in zip(ref, runs[b]["loss"]))
             for b in compared}
    max_diff = {b: max(abs(a - c) for a, c in zip(ref, runs[b]["loss"])) for b in compared}
    first = [next((abs(a - c) / max(abs(a), 1e-30) for a, c in zip(ref, runs[b]["loss"]) if a != c), 0.0)
             for b in compared]
    beyond = torch.tensor([1 if any(w > 0 for w in worst.values()) else 0], dtype=torch.int32)
    dist.all_reduce(beyond, group=gloo)
    diff = torch.tensor([max(max_diff.values(), default=0.0), max(first, default=0.0)], dtype=torch.float64)
    dist.all_reduce(diff, op=dist.ReduceOp.MAX, group=gloo)
    sum_error = torch.tensor([runs[b]["sum_error"] for b in backends], dtype=torch.float64)
    dist.all_reduce(sum_error, op=dist.ReduceOp.MAX, group=gloo)
    sums_ok = all(e <= 1.0 for e in sum_error.tolist())
    if beyond.item() == 0:
        verdict = "agree"
    elif sums_ok and diff[1].item() <= 1e-5:
        verdict = "rounding"
    else:
        verdict = "DIFFER"
    failed = verdict == "DIFFER" or not sums_ok
    ms = lambda xs: 1000 * statistics.median(xs[warmup:])  # noqa: E731
    medians = torch.tensor([ms(runs[b]["step"]) for b in backends], dtype=torch.float64)
    dist.all_reduce(medians, op=dist.ReduceOp.MAX, group=gloo)
    load = window.report()

    if rank == 0:
        nparams = sum(v.numel() for v in initial_state.values())
        case = dict(model=args.model, grad=args.grad, ranks=world, steps=steps, warmup=warmup, batch=cfg["batch"],
                    params=nparams, grad_mib=round(nparams * 4 / 2**20, 1),
                    transport=sparcoll_torch.transport(), blas=os.path.basename(os.path.dirname(blas.loaded())),
                    torch=torch.__version__, **load)
        print(f"\nddp_step_bench: {args.model} ({nparams} parameters, {case['grad_mib']} MiB), {args.grad} gradients, "
              f"{world} ranks, batch {cfg['batch']} per rank, {steps} steps (medians of steps {warmup}..{steps - 1}, "
              f"rank 0); sparcoll transport {case['transport']}; {window.line()}")
        print("| backend | step ms | step ms (max rank) | comm ms (in flight) | exposed ms | backward ms | "
              "loss first -> last |")
        print("|---|---|---|---|---|---|---|")
        rows = []
        for i, b in enumerate(backends):
            r = runs[b]
            row = dict(case, backend=b, step_ms=round(ms(r["step"]), 2), step_ms_max_rank=round(medians[i].item(), 2),
                       comm_ms=round(ms(r["comm"]), 2), exposed_ms=round(ms(r["exposed"]), 2),
                       backward_ms=round(ms(r["backward"]), 2), loss_first=r["loss"][0], loss_last=r["loss"][-1],
                       losses=verdict if b != "nocomm" else "-", max_loss_diff=diff[0].item(), first_loss_diff=diff[1].item(),
                       sum_error=round(sum_error[i].item(), 3), sums_checked=r["sums_checked"], reference=backends[0])
            rows.append(row)
            print(f"| {b} | {row['step_ms']:.1f} | {row['step_ms_max_rank']:.1f} | {row['comm_ms']:.1f} | "
                  f"{row['exposed_ms']:.1f} | {row['backward_ms']:.1f} | {row['loss_first']:.4f} -> {row['loss_last']:.4f} |")
        print(f"loss curves: {verdict} (rtol {args.rtol:g}, atol {args.atol:g}; largest difference "
              f"{diff[0].item():.2e}, the first {diff[1].item():.1e} relative); sums of the first "
              f"{args_check_steps(args, task)} steps' buckets against an f64 sum, largest error / fp32 bound: "
              + ", ".join(f"{b} {e:.3f}" for b, e in zip(backends, sum_error.tolist()) if b != "nocomm")
              + ("" if sums_ok else " WRONG SUM"))
        for row in rows:
            print("json: " + json.dumps(row), flush=True)
        if args.jsonl:
            with open(args.jsonl, "a") as f:
                for row in rows:
                    f.write(json.dumps(row) + "\n")
    dist.destroy_process_group()
    return 1 if failed else 0


# ---------------------------------------------------------------- launcher

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(args, model, grad, ranks, jsonl):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(ranks),
           "--master_addr", "127.0.0.1", "--master_port", str(free_port()), "--redirects", "1", "--tee", "1",
           os.path.realpath(__file__), "--model", model, "--grad", grad, "--jsonl", jsonl,
           "--backends", args.backends, "--rtol", str(args.rtol), "--atol", str(args.atol), "--seed", str(args.seed)]
    if args.threads:
        cmd.append("--threads")
    for flag in ("steps", "warmup", "batch"):
        if getattr(args, flag) is not None:
            cmd += ["--" + flag, str(getattr(args, flag))]
    print(f"ddp_step_bench: {model} {grad} {ranks} ranks: {' '.join(cmd)}", flush=True)
    # Only rank 0's lines (torchrun prefixes them [default0]:) are worth showing.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    shown = []
    deadline = time.monotonic() + args.timeout
    try:
        for line in proc.stdout:
            shown.append(line)
            if line.startswith("[default0]:") and not line.startswith("[default0]:json: "):
                print(line[len("[default0]:"):], end="", flush=True)
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(cmd, args.timeout)
        return proc.wait(timeout=max(1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)  # torchrun and its ranks: the session started above
        print(f"ddp_step_bench: {model} {grad} {ranks} ranks: still running after {args.timeout} s, killed", flush=True)
        return 1
    finally:
        if proc.poll() not in (0, None):
            sys.stdout.write("".join(shown[-40:]))


def launcher_main(args):
    with tempfile.TemporaryDirectory() as tmp:
        jsonl = os.path.join(tmp, "rows.jsonl")
        open(jsonl, "w").close()
        failed = []
        started = time.monotonic()
        window = hostload.Window()
        for model in args.models.split(","):
            for grad in args.grads.split(","):
                for ranks in (int(r) for r in args.ranks.split(",")):
                    if launch(args, model, grad, ranks, jsonl) != 0:
                        failed.append(f"{model} {grad} {ranks} ranks")
        rows = [json.loads(line) for line in open(jsonl)]
    if args.jsonl:
        with open(args.jsonl, "a") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
    print(f"\nddp_step_bench: all launches, {time.monotonic() - started:.0f} s; {window.line()}")
    print("| model | grad | ranks | backend | step ms | comm ms | exposed ms | vs first backend | losses | sum error | load | steal % |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    ref = {}
    for r in rows:
        key = (r["model"], r["grad"], r["ranks"])
        if r["backend"] == r["reference"]:
            ref[key] = r["step_ms"]
        ratio = ref[key] / r["step_ms"] if key in ref and r["step_ms"] > 0 else float("nan")
        print(f"| {r['model']} | {r['grad']} | {r['ranks']} | {r['backend']} | {r['step_ms']:.1f} | {r['comm_ms']:.1f} | "
              f"{r['exposed_ms']:.1f} | {ratio:.2f}x | {r['losses']} | {r['sum_error']:.2f} | "
              f"{r['load_before']:.1f}/{r['load_after']:.1f} | {r['steal_pct']:.1f} |")
    if failed:
        print("ddp_step_bench: FAILED: " + "; ".join(failed), file=sys.stderr)
        return 1
    return 0


def main():
    args = parse_args()
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        if args.model is None:
            sys.exit("ddp_step_bench: under torchrun, --model is required")
        return rank_main(args)
    return launcher_main(args)


if __name__ == "__main__":
    sys.exit(main())
