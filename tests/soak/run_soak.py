#!/usr/bin/env python3
"""Soak and fault injection for missiled and the shim, on the driver test double (CPU only).

Runs N tenants (soak_tenant, LS and BE in turn) under the shim against one missiled for a
duration, and injects faults meanwhile: tenants killed with SIGKILL at random (each replaced by a
new one), the daemon stopped (SIGSTOP) for a while and continued, and the daemon killed (SIGKILL)
and started again. Everything stays on this machine: Unix sockets in a temporary directory and
the test double's shared memory.

At the end it checks:
  - no tenant's data was corrupted (each checks its pattern after every copy) and no driver call
    failed;
  - no tenant alive at the end waited longer in one call than MISSILE_DAEMON_TIMEOUT_MS plus a
    margin (each records the worst latency of its calls);
  - the pool leases nothing (missilectl --json status) once the tenants are gone;
  - the daemon's descriptors and threads (/proc/PID/fd, /proc/PID/task) are back to what the
    first daemon had after one warm-up tenant came and went (before the soak's tenants);
  - the daemon stops cleanly on SIGTERM.
It prints a short table and exits 1 on any violation (2 when it cannot run at all).

Example (the full run):
  run_soak.py --bin-dir BUILD --tenants 32 --seconds 600
where BUILD is the build tree, or name each program with --missiled, --missilectl, --shim,
--fakecuda and --tenant.
"""

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SIGSTOP_EXTRA_S = 3.0  # the daemon stays stopped this long past the shim's timeout
# gRPC's worker threads, by the names they carry (/proc/PID/task/TID/comm: 15 characters).
GRPC_EXECUTOR = "default-executo"
GRPC_ENGINE = "event_engine"
# Its timer manager's threads: one more starts whenever every waiting one is busy firing timers
# (a loaded machine), and the spares exit only later; it keeps a few.
GRPC_TIMER = "grpc_global_tim"
GRPC_TIMER_MAX = 4
GRPC_POOLS = (GRPC_EXECUTOR, GRPC_ENGINE, GRPC_TIMER)
WARM_UP_ID = 16777215  # the warm-up tenant's pattern id, never a soak tenant's


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin-dir", help="build tree holding the programs (default layout)")
    p.add_argument("--missiled")
    p.add_argument("--missilectl")
    p.add_argument("--shim", help="libmissile.so")
    p.add_argument("--fakecuda", help="the test double's libcuda.so.1")
    p.add_argument("--tenant", help="soak_tenant")
    p.add_argument("--tenants", type=int, default=32, help="tenants alive at once (default 32)")
    p.add_argument("--seconds", type=float, default=600, help="duration (default 600)")
    p.add_argument("--tenant-kills", type=int, default=-1,
                   help="tenants killed with SIGKILL (default: one per 15 s, at least one)")
    p.add_argument("--timeout-ms", type=int, default=2000,
                   help="MISSILE_DAEMON_TIMEOUT_MS for the tenants (default 2000)")
    p.add_argument("--margin-ms", type=int, default=3000,
                   help="allowed on top of the timeout for one call (default 3000)")
    p.add_argument("--link-bytes-per-us", default="20000",
                   help="the test double's PCIe rate (default 20000: 20 GB/s)")
    p.add_argument("--seed", type=int, default=1, help="random seed of the fault schedule")
    p.add_argument("--keep", help="directory to keep the logs in (default: a temporary one, "
                   "removed on success)")
    a = p.parse_args()
    if a.tenants < 2 or a.seconds < 20 or a.timeout_ms < 100:
        p.error("--tenants must be >= 2, --seconds >= 20, --timeout-ms >= 100")
    if a.bin_dir:
        b = a.bin_dir
        a.missiled = a.missiled or os.path.join(b, "daemon", "missiled")
        a.missilectl = a.missilectl or os.path.join(b, "cli", "missilectl")
        a.shim = a.shim or os.path.join(b, "libintercept", "libmissile.so")
        a.fakecuda = a.fakecuda or os.path.join(b, "tests", "fakecuda", "libcuda.so.1")
        a.tenant = a.tenant or os.path.join(b, "tests", "soak", "soak_tenant")
    for name in ("missiled", "missilectl", "shim", "fakecuda", "tenant"):
        path = getattr(a, name)
        if not path or not os.path.isfile(path):
            p.error("--%s: no such program: %r (give --bin-dir or the path)" % (name, path))
    if a.tenant_kills < 0:
        a.tenant_kills = max(1, int(a.seconds // 15))
    return a


def proc_counts(pid):
    """(descriptors, threads) of a live process."""
    return (len(os.listdir("/proc/%d/fd" % pid)), len(os.listdir("/proc/%d/task" % pid)))


def thread_names(pid):
    """The names of a live process's threads, counted: {'name': n}."""
    names = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                name = f.read().strip()
        except OSError:
            continue
        names[name] = names.get(name, 0) + 1
    return names


def parse_stats(text):
    """The key=value fields of the last soak_tenant line in text, or {}."""
    fields = {}
    for line in text.splitlines():
        if line.startswith("soak_tenant "):
            fields = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
    return fields


class Soak:
    def __init__(self, args, work):
        self.a = args
        self.work = work
        self.rng = random.Random(args.seed)
        self.socket = os.path.join(work, "missiled.sock")
        self.config = os.path.join(work, "missiled.toml")
        self.shm = "/fakecuda-soak-%d" % os.getpid()
        self.daemon = None
        self.daemon_log = open(os.path.join(work, "missiled.log"), "ab")
        self.tenants = {}  # id -> (Popen, class, stdout path)
        self.finished = []  # (id, class, how, stats, returncode)
        self.next_id = 0
        self.faults = {"tenant SIGKILL": 0, "daemon SIGSTOP/SIGCONT": 0,
                       "daemon SIGKILL + restart": 0}
        self.violations = []

    def fake_env(self):
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        env.update({"FAKECUDA_SHM": self.shm, "FAKECUDA_TOTAL_MEM": "2G",
                    "FAKECUDA_PCIE_BYTES_PER_US": self.a.link_bytes_per_us,
                    "FAKECUDA_STREAM_DEPTH": "64"})
        return env

    def write_config(self):
        # No block cache, so that the daemon holds no block (and no descriptor) once the tenants
        # are gone; no spinning after LS copies, which would take a core of a small machine.
        with open(self.config, "w") as f:
            f.write('[daemon]\nsocket = "%s"\nlog_level = "info"\n' % self.socket)
            f.write('[gpu]\nprofile_dir = ""\ncache_limit = 0\n')
            f.write('[pcie]\nchunk = "1MiB"\nls_spin_us = 0\nspin_us = 50\n')
        os.chmod(self.config, 0o644)

    def start_daemon(self):
        env = self.fake_env()
        env["LD_LIBRARY_PATH"] = os.path.dirname(self.a.fakecuda)
        self.daemon = subprocess.Popen([self.a.missiled, "--config", self.config], env=env,
                                       stdout=self.daemon_log, stderr=self.daemon_log)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.status() is not None:
                return
            if self.daemon.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError("missiled did not start (see %s/missiled.log)" % self.work)

    def status(self):
        """missilectl --json status as a dict, or None when the daemon does not answer."""
        try:
            r = subprocess.run([self.a.missilectl, "--socket", self.socket, "--json", "status"],
                               capture_output=True, text=True, timeout=10)
        except subprocess.TimeoutExpired:
            return None
        if r.returncode != 0:
            return None
        try:
            return json.loads(r.stdout)
        except ValueError:
            return None

    def leased(self):
        st = self.status()
        if st is None:
            return None
        return sum(int(p.get("leased_bytes", 0)) for p in st.get("pools", []))

    def tenant_env(self, cls, tid):
        env = self.fake_env()
        env.update({"LD_PRELOAD": self.a.shim, "MISSILE_REAL_LIBCUDA": self.a.fakecuda,
                    "MISSILE_SOCKET": self.socket, "MISSILE_TENANT_CLASS": cls,
                    "MISSILE_TENANT_NAME": "soak-%s-%d" % (cls, tid),
                    "MISSILE_DAEMON_TIMEOUT_MS": str(self.a.timeout_ms)})
        return env

    def warm_up(self):
        """One tenant for two seconds, gone before the baseline is taken: the daemon's lazily
        started threads (gRPC's among them) are then counted in it."""
        r = subprocess.run([self.a.tenant, str(WARM_UP_ID), "2"], env=self.tenant_env("be", 0),
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise RuntimeError("the warm-up tenant failed: %s%s" % (r.stdout, r.stderr))
        self.wait_until(lambda v: v == 0, self.leased, 15)
        time.sleep(1.0)

    def start_tenant(self, cls):
        tid = self.next_id
        self.next_id += 1
        env = self.tenant_env(cls, tid)
        out = os.path.join(self.work, "tenant-%d.out" % tid)
        stats = os.path.join(self.work, "tenant-%d.stats" % tid)
        with open(out, "wb") as f:
            # They run past the end: the soak ends them with SIGTERM.
            proc = subprocess.Popen([self.a.tenant, str(tid), str(self.a.seconds + 600), stats],
                                    env=env, stdout=f, stderr=subprocess.STDOUT)
        self.tenants[tid] = (proc, cls, out, stats)

    def reap(self, tid, how):
        proc, cls, out, stats_path = self.tenants.pop(tid)
        text = ""
        for path in (out, stats_path):
            try:
                with open(path, errors="replace") as f:
                    text += f.read()
            except OSError:
                pass
        self.finished.append((tid, cls, how, parse_stats(text), proc.returncode, text))

    def check_early_exits(self):
        """A tenant that ended by itself has failed (they run past the end); replace it."""
        for tid in list(self.tenants):
            proc, cls = self.tenants[tid][0], self.tenants[tid][1]
            if proc.poll() is not None:
                self.reap(tid, "exited early")
                self.violations.append("tenant %d (%s) exited early with status %d"
                                       % (tid, cls, proc.returncode))
                self.start_tenant(cls)

    def kill_tenant(self):
        tid = self.rng.choice(sorted(self.tenants))
        proc, cls = self.tenants[tid][0], self.tenants[tid][1]
        proc.kill()
        proc.wait()
        self.reap(tid, "killed")
        self.faults["tenant SIGKILL"] += 1
        self.start_tenant(cls)

    def stop_daemon_for_a_while(self):
        self.daemon.send_signal(signal.SIGSTOP)
        time.sleep(self.a.timeout_ms / 1000.0 + SIGSTOP_EXTRA_S)
        self.daemon.send_signal(signal.SIGCONT)
        self.faults["daemon SIGSTOP/SIGCONT"] += 1

    def kill_and_restart_daemon(self):
        self.daemon.kill()
        self.daemon.wait()
        self.faults["daemon SIGKILL + restart"] += 1
        time.sleep(0.5)
        self.start_daemon()

    def schedule(self):
        """(time, action) pairs over the run, sorted."""
        s = self.a.seconds
        events = [(s * 0.35, self.stop_daemon_for_a_while),
                  (s * 0.65, self.kill_and_restart_daemon)]
        for _ in range(self.a.tenant_kills):
            events.append((self.rng.uniform(s * 0.05, s * 0.95), self.kill_tenant))
        return sorted(events, key=lambda e: e[0])

    def wait_until(self, what, check, seconds):
        deadline = time.monotonic() + seconds
        value = check()
        while not what(value) and time.monotonic() < deadline:
            time.sleep(0.2)
            value = check()
        return value

    # long: the run from start to verdict, in the order the soak's description gives; the
    # steps share the daemon, the tenants and the figures they collect.
    def run(self):
        self.write_config()
        self.start_daemon()
        self.warm_up()
        base_fds, base_threads = proc_counts(self.daemon.pid)
        self.base_names = thread_names(self.daemon.pid)
        for i in range(self.a.tenants):
            self.start_tenant("ls" if i % 2 == 0 else "be")
        t0 = time.monotonic()
        for at, action in self.schedule():
            while time.monotonic() - t0 < at:
                self.check_early_exits()
                time.sleep(min(0.5, max(0.0, at - (time.monotonic() - t0))))
            action()
        while time.monotonic() - t0 < self.a.seconds:
            self.check_early_exits()
            time.sleep(0.5)
        self.check_early_exits()

        live = sorted(self.tenants)
        for tid in live:
            self.tenants[tid][0].send_signal(signal.SIGTERM)
        for tid in live:
            proc = self.tenants[tid][0]
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                self.violations.append("tenant %d did not end within 60 s of SIGTERM" % tid)
            self.reap(tid, "ended")

        leased = self.wait_until(lambda v: v == 0, self.leased, 15)
        settle_t0 = time.monotonic()
        fds, threads = self.wait_until(lambda v: v[0] <= base_fds and v[1] <= base_threads,
                                       lambda: proc_counts(self.daemon.pid), 30)
        self.settle_s = time.monotonic() - settle_t0
        self.end_names = thread_names(self.daemon.pid)
        self.daemon.send_signal(signal.SIGTERM)
        try:
            daemon_exit = self.daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.daemon.kill()
            daemon_exit = self.daemon.wait()
        return self.verdict(leased, (base_fds, base_threads), (fds, threads), daemon_exit)

    # long: every check of the end of the run and the table, side by side so that the table
    # shows exactly what was checked.
    def verdict(self, leased, base, end, daemon_exit):
        bound_us = (self.a.timeout_ms + self.a.margin_ms) * 1000.0
        ops = rounds = corrupt = errors = 0
        worst_us, worst_what = 0.0, "-"
        for tid, cls, how, stats, code, text in self.finished:
            ops += int(stats.get("ops", 0))
            rounds += int(stats.get("rounds", 0))
            bad = int(stats.get("corrupt", 0))
            failed = int(stats.get("errors", 0))
            corrupt += bad
            errors += failed
            lines = text.splitlines()
            corrupt_lines = [l for l in lines if l.startswith("corrupt ")]
            error_lines = [l for l in lines if l.startswith("error ")]
            if bad or corrupt_lines:
                self.violations.append("tenant %d (%s): corrupt data: %s" % (
                    tid, cls, corrupt_lines[:1]))
            if failed or error_lines:
                self.violations.append("tenant %d (%s): a driver call failed: %s" % (
                    tid, cls, error_lines[:1]))
            if how != "ended":
                continue
            if code != 0:
                self.violations.append("tenant %d (%s) ended with status %s" % (tid, cls, code))
            if not stats:
                self.violations.append("tenant %d (%s) printed no figures" % (tid, cls))
                continue
            w = float(stats.get("worst_us", 0))
            if w > worst_us:
                worst_us, worst_what = w, "%s, tenant %d (%s)" % (stats.get("worst_call"), tid, cls)
            if w > bound_us:
                self.violations.append("tenant %d (%s) waited %.0f ms in %s (bound %.0f ms)" % (
                    tid, cls, w / 1000, stats.get("worst_call"), bound_us / 1000))
        if leased != 0:
            self.violations.append("the pool still leases %s bytes" % leased)
        if end[0] > base[0]:
            self.violations.append("daemon descriptors %d, at start %d" % (end[0], base[0]))
        # gRPC's worker pools start threads on demand under load and keep them once idle: its
        # executor ("default-executor") up to 2 x cores threads, its event engine's pool
        # ("event_engine") a few more than it started with, its timer manager
        # ("grpc_global_timer") up to GRPC_TIMER_MAX (a run on a loaded machine ended with 3,
        # started with 2). They may end anywhere within those bounds. Every other thread (the
        # daemon's own and gRPC's fixed ones) must be back exactly: a leak per tenant or per
        # fault would leave dozens.
        cores = os.cpu_count() or 1
        pools_end = sum(self.end_names.get(n, 0) for n in GRPC_POOLS)
        pools_base = sum(self.base_names.get(n, 0) for n in GRPC_POOLS)
        executor_end = self.end_names.get(GRPC_EXECUTOR, 0)
        engine_grew = self.end_names.get(GRPC_ENGINE, 0) - self.base_names.get(GRPC_ENGINE, 0)
        if (end[1] - pools_end > base[1] - pools_base or
                executor_end > max(2 * cores, self.base_names.get(GRPC_EXECUTOR, 0)) or
                engine_grew > cores or
                self.end_names.get(GRPC_TIMER, 0) > max(GRPC_TIMER_MAX,
                                                        self.base_names.get(GRPC_TIMER, 0))):
            self.violations.append("daemon threads %d, at start %d (by name: %s at the end, %s "
                                   "at start)" % (end[1], base[1], self.end_names,
                                                  self.base_names))
        if daemon_exit != 0:
            self.violations.append("missiled ended with status %d on SIGTERM" % daemon_exit)

        ended = sum(1 for f in self.finished if f[2] == "ended")
        rows = [
            ("tenants (alive at once / started)", "%d / %d" % (self.a.tenants, len(self.finished))),
            ("tenants alive at the end", "%d" % ended),
            ("rounds / driver calls", "%d / %d" % (rounds, ops)),
        ]
        rows += [("fault: " + k, str(v)) for k, v in self.faults.items()]
        rows += [
            ("worst wait of a live tenant", "%.1f ms (%s); bound %.0f ms" % (
                worst_us / 1000, worst_what, bound_us / 1000)),
            ("corrupt data / failed calls", "%d / %d" % (corrupt, errors)),
            ("pool leased at the end", "%s bytes" % leased),
            ("daemon descriptors (start / end)", "%d / %d" % (base[0], end[0])),
            ("daemon threads (start / end)", "%d / %d (of which gRPC's pools %d / %d)" % (
                base[1], end[1], sum(self.base_names.get(n, 0) for n in GRPC_POOLS),
                sum(self.end_names.get(n, 0) for n in GRPC_POOLS))),
            ("missiled exit on SIGTERM", str(daemon_exit)),
        ]
        width = max(len(r[0]) for r in rows)
        print("soak: %d tenants, %.0f s, timeout %d ms" % (
            self.a.tenants, self.a.seconds, self.a.timeout_ms))
        for k, v in rows:
            print("| %s | %s |" % (k.ljust(width), v))
        for v in self.violations:
            print("VIOLATION: " + v)
        print("soak: %s" % ("FAILED" if self.violations else "passed"))
        return 1 if self.violations else 0

    def cleanup(self):
        for proc, _, _, _ in self.tenants.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if self.daemon is not None and self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGCONT)
            self.daemon.kill()
            self.daemon.wait()
        try:
            os.unlink("/dev/shm" + self.shm)
        except OSError:
            pass


def main():
    args = parse_args()
    work = args.keep or tempfile.mkdtemp(prefix="missile-soak-")
    os.makedirs(work, exist_ok=True)
    soak = Soak(args, work)
    code = 2
    try:
        code = soak.run()
    except (RuntimeError, OSError) as e:
        print("soak: cannot run: %s" % e)
    finally:
        soak.cleanup()
    if code != 0 or args.keep:
        print("soak: logs in %s" % work)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
