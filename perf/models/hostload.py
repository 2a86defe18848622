"""How busy the machine was around a measurement: the load average and the CPU time stolen by
the hypervisor (from /proc/stat), printed next to every figure because these 2 cores are shared."""
import os


def _cpu_times():
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    values = [int(v) for v in fields]
    return sum(values[:8]), values[7]   # user..steal (guest time is already in user)


class Window:
    """Load average at the start and end, and the share of CPU time stolen in between."""

    def __init__(self):
        self.load_before = os.getloadavg()[0]
        self.total0, self.steal0 = _cpu_times()

    def report(self):
        total, steal = _cpu_times()
        dt = total - self.total0
        return {"load_before": round(self.load_before, 2), "load_after": round(os.getloadavg()[0], 2),
                "steal_pct": round(100.0 * (steal - self.steal0) / dt, 2) if dt > 0 else 0.0}

    def line(self):
        r = self.report()
        return f"load average {r['load_before']:.2f} -> {r['load_after']:.2f}, steal {r['steal_pct']:.1f}%"
