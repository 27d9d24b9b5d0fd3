#!/usr/bin/env python3
"""Churn driver: run a real program under memvisor while its memory is
evicted and reloaded over and over, and check that its output and exit
status are those of a native run (docs/reliability.md, "Churn").

  churn.py [--name NAME] [--seconds S] [--runs N] [--timeout T] [--kill]
           [--workdir DIR] [--cwd DIR] -- PROGRAM [ARG]...

It runs PROGRAM natively once (its stdout and exit status are what every
supervised run must give), then supervised runs until S seconds have
passed (at least one, at most N). During a run, a cycle is:

  memvisor ctl checkpoint IMG-k --evict --wait
  a random pause of 0-300 ms
  memvisor ctl reload IMG-k  [--rate R at random] [--wait at random]

repeated until the program ends. A checkpoint refused because the program
just ended or because the last reload is still loading (busy) is expected:
it is counted and retried. Every image has its own directory; those that no
memory is evicted to any more are removed.

--live: a cycle is `memvisor ctl checkpoint IMG-k --live --wait` and a
random pause of 0-300 ms instead: the program runs on while its memory is
copied (write-protected), over and over; no evict, no reload.

--live-evict: the evict is `checkpoint IMG-k --evict --live`: the program
runs while its memory is copied and is stopped again only to drop the
pages it did not write since; the reload as usual.

--rollback: every other cycle on average is a mark and a rollback instead
of an evict and a reload (issue 26), on the program's main process:

  memvisor ctl mark --hold          (held at the mark: the driver notes the
                                     output's length and hashes every page)
  memvisor ctl rollback             (held, so nothing changed: it runs on)
  a random pause of 0-300 ms, maybe a plain checkpoint (which works while
  a mark is held) and an evict (which must be refused)
  memvisor ctl rollback --hold      (back at the mark: every readable
                                     private page must hash as at the mark,
                                     a hole as zeros, and the layout must be
                                     the mark's)
  memvisor ctl unmark               (it runs on from the mark)

The program prints again what it printed between the mark and the
rollback; the driver cuts those bytes (their offsets in the output file,
noted while the program was held) out of the output before it compares it
with the native run's. Only for programs of one process whose outcome
depends on nothing a rollback leaves alone (file contents, pipes, other
processes; docs/rollback.md, "What is not rolled back").

--kill: once per run, at a random cycle, memvisor is SIGKILLed at a random
moment during the evict or the reload. The program must die with it: what
it printed must be a prefix of the native output, and no process of the
run may be alive two seconds later. (This driver is a child subreaper, so
whatever memvisor's tree leaves behind becomes its child; it kills such
processes by pid.)

Seeds: each run r uses seed BASE+r, printed at its start; CHURN_SEED=BASE
replays from that seed. CHURN_SECONDS, CHURN_TIMEOUT and MEMVISOR are
read from the environment. A supervised run may take --timeout seconds
(CHURN_TIMEOUT), by default LIMIT_FACTOR times the native run, at least
LIMIT_FLOOR. A failure (wrong output or status, a hang past the limit,
memvisor crashing, a process surviving) prints the seed, the cycle count,
the difference and memvisor's log, and ends the driver with status 1 after
that run. Before it kills a run that hangs, it prints the program's
progress (its output and CPU time over the run) and where every thread of
the run waits: each thread's state, wchan, system call and kernel stack,
memvisor's `status` and last jobs, and memvisor's threads as gdb sees
them (its fault workers, loader and job threads).
"""

import argparse
import ctypes
import difflib
import json
import os
import random
import resource
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

PR_SET_CHILD_SUBREAPER = 36
# A supervised run's time limit, when --timeout/CHURN_TIMEOUT does not set
# one: LIMIT_FACTOR times the native run, at least LIMIT_FLOOR seconds.
# A run under churn is slower than a native one by a factor that depends on
# the program (how much memory it rewrites between evicts) and on the
# machine (each evict stops the program until its image is on disk, and
# every page comes back from the disk): node, with 80-180 MB to evict each
# cycle, took 5.7 to 29.6 times its native run on the 2-core test machine
# (27 runs, quiet and loaded), so 120 s, the fixed limit before, ended runs
# that were only slow (9 of them took 120-143 s). 60 leaves twice the worst
# ratio measured; the other programs, which move less memory, averaged 5 to
# 21 s a run in the last soak. A hang does not end at any limit, and the
# failure says whether the program's output was still growing
# (docs/reliability.md, "Churn": how long a run takes).
LIMIT_FACTOR = 60
LIMIT_FLOOR = 120


def run_limit(native_s):
    return max(LIMIT_FLOOR, LIMIT_FACTOR * native_s)


RATES = [50, 200, 1000, 4000]  # MB/s; 50 keeps a few hundred MB owed for seconds


def log(msg):
    print(msg, flush=True)


def set_subreaper():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except OSError:
        pass


def children(pid):
    """Pids whose parent is pid (every thread's children)."""
    out = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for t in tasks:
        try:
            with open(f"/proc/{pid}/task/{t}/children") as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


def descendants(pid):
    out = []
    for k in children(pid):
        out.append(k)
        out += descendants(k)
    return out


def proc_state(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("State:"):
                    return line.split()[1]
    except OSError:
        return None
    return None


def proc_desc(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            comm = f.read().strip()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
        cmd = raw.replace(b"\0", b" ").decode(errors="replace").strip()
        if raw and not raw.strip(b"\0"):
            # The kernel reads the arguments from the process's stack.
            cmd = f"[{comm}] (its arguments read as {len(raw)} zero bytes)"
        elif not cmd:
            cmd = f"[{comm}]"
    except OSError:
        cmd = "?"
    try:
        with open(f"/proc/{pid}/wchan") as f:
            wchan = f.read().strip()
    except OSError:
        wchan = "?"
    return f"pid {pid} state {proc_state(pid)} wchan {wchan}: {cmd[:120]}"


SYSCALLS = {0: "read", 7: "poll", 16: "ioctl", 23: "select", 35: "nanosleep", 61: "wait4",
            202: "futex", 219: "restart_syscall", 230: "clock_nanosleep", 232: "epoll_wait",
            270: "pselect6",
            271: "ppoll", 281: "epoll_pwait", 441: "epoll_pwait2"}


def read_text(path, limit=1 << 16):
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode(errors="replace")
    except OSError:
        return None


def thread_lines(pid):
    """Where each thread of pid is: state, wchan, the system call it is
    in (or none: /proc/TID/syscall says -1 for a thread blocked outside
    one, in a page fault for instance) and its kernel stack (root only),
    innermost first."""
    out = []
    try:
        tids = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return out
    for t in tids:
        base = f"/proc/{pid}/task/{t}"
        stat = read_text(f"{base}/stat") or ""
        comm = stat[stat.find("(") + 1:stat.rfind(")")] if ")" in stat else "?"
        state = stat[stat.rfind(")") + 2:][:1] if ")" in stat else "?"
        wchan = (read_text(f"{base}/wchan") or "?").strip() or "0"
        sc = (read_text(f"{base}/syscall") or "?").split()
        if sc and sc[0].lstrip("-").isdigit():
            n = int(sc[0])
            sc = "none (pc " + sc[-1] + ")" if n < 0 else SYSCALLS.get(n, f"#{n}")
        else:
            sc = sc[0] if sc else "?"
        stack = read_text(f"{base}/stack")
        frames = [ln.split()[1].split("+")[0] for ln in (stack or "").splitlines() if len(ln.split()) > 1]
        line = f"tid {t} ({comm}) {state} wchan {wchan}, syscall {sc}"
        if frames:
            line += ", kernel stack: " + " < ".join(frames[:10])
        out.append(line)
    return out


def user_stacks(pid, timeout=30):
    """memvisor's own threads as gdb sees them (the fault workers, the
    loader, the job threads: which lock or call each waits in)."""
    gdb = shutil.which("gdb")
    if not gdb:
        return ["(no gdb: no user-space stacks)"]
    try:
        p = subprocess.run([gdb, "-nx", "-batch", "-iex", "set debuginfod enabled off",
                            "-ex", "set pagination off", "-ex", "thread apply all bt 12",
                            "-p", str(pid)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=timeout)
    except subprocess.TimeoutExpired:
        return [f"(gdb took more than {timeout} s)"]
    keep = re.compile(r"^(Thread |#)")
    return [ln for ln in p.stdout.decode(errors="replace").splitlines() if keep.match(ln)]


def tree_cpu(pids):
    """CPU seconds used by pids and the children they waited for."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        stat = read_text(f"/proc/{pid}/stat")
        if not stat or ")" not in stat:
            continue
        f = stat[stat.rfind(")") + 2:].split()
        try:
            total += sum(int(x) for x in f[11:15])  # utime stime cutime cstime
        except ValueError:
            pass
    return total / tick


def signame(n):
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def describe_status(rc):
    """memvisor's exit status, in words (it exits like env(1))."""
    if rc is None:
        return "still running"
    if rc < 0:
        return f"memvisor itself killed by {signame(-rc)}"
    if rc == 125:
        return "memvisor failed (125)"
    if rc > 128:
        return f"{rc} (the program killed by {signame(rc - 128)})"
    return str(rc)


class Progress:
    """The program's progress over a run: its output and its CPU time,
    sampled as the driver goes. A hang stops both; a slow run does not."""

    def __init__(self, t0, outp):
        self.t0, self.outp = t0, outp
        self.samples = []  # (seconds into the run, output bytes, CPU seconds)
        self.cpu_max = 0.0

    def sample(self, pids):
        try:
            size = os.path.getsize(self.outp)
        except OSError:
            size = 0
        # The tree's CPU time falls when a process exits before its
        # parent waits for it: keep the highest seen.
        self.cpu_max = max(self.cpu_max, tree_cpu(pids))
        self.samples.append((time.monotonic() - self.t0, size, self.cpu_max))

    def classify(self, failure, limit):
        """A run past its limit whose output grew in its last tenth was
        slow rather than hung; it fails all the same."""
        if self.samples:
            now, size, _ = self.samples[-1]
            last_out = next((t for t, b, _ in self.samples if b == size), 0.0)
            if size and now - last_out < max(10.0, limit / 10):
                return (f"too slow: {failure[len('hang: '):]}, its output still growing "
                        f"{now - last_out:.0f} s before (not a hang)")
        return failure

    def report(self, native_bytes, native_cpu):
        if not self.samples:
            return ["no sample of the program's progress"]
        now, size, cpu = self.samples[-1]
        last_out = next((t for t, b, _ in self.samples if b == size), 0.0)
        lines = [f"output: {size} of the native run's {native_bytes} bytes, the last of it "
                 f"{now - last_out:.1f} s ago; CPU: {cpu:.1f} s used (the native run used "
                 f"{native_cpu:.1f} s)"]
        for window in (10, 30):
            old = [c for t, _, c in self.samples if t <= now - window]
            if old:
                lines.append(f"CPU used in the last {window} s: {cpu - old[-1]:.2f} s")
        # The output's timeline, in tenths of the run.
        marks, step = [], max(now / 10, 1e-3)
        for i in range(1, 11):
            b = [b for t, b, _ in self.samples if t <= i * step]
            marks.append(str(b[-1] if b else 0))
        lines.append(f"output bytes at each tenth of the run ({step:.1f} s): " + " ".join(marks))
        return lines


def uncut(out, cuts):
    """The output with the stretches [k, j) cut out: what the program
    printed between a mark and a rollback, which it prints again."""
    parts, at = [], 0
    for k, j in cuts:
        parts.append(out[at:k])
        at = j
    parts.append(out[at:])
    return b"".join(parts)


SPECIAL = ("[vvar]", "[vvar_vclock]", "[vdso]", "[vsyscall]")
SMALL = 16 << 20  # regions up to this keep their bytes, for the failure message
ZERO_PAGE = bytes(4096)


def mem_pages(pid, untracked, rseq=()):
    """The layout of a stopped process (its regions, adjacent ones with the
    same protections and name merged, since a rollback may leave them split
    where the mark had one) and a hash of each present page of its
    readable private regions; None if it is gone. The fields of the rseq
    areas that the kernel writes (the CPU, node and concurrency id, on
    each return to user space; not rolled back) read as zeros."""
    import hashlib
    import struct
    try:
        with open(f"/proc/{pid}/maps") as f:
            maps = f.read().splitlines()
        mem = os.open(f"/proc/{pid}/mem", os.O_RDONLY)
        pm = os.open(f"/proc/{pid}/pagemap", os.O_RDONLY)
    except OSError:
        return None
    layout, pages = [], {}
    try:
        for line in maps:
            f = line.split(None, 5)
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            name = f[5] if len(f) > 5 else ""
            if layout and layout[-1][1] == lo and layout[-1][2:] == (f[1], name):
                layout[-1] = (layout[-1][0], hi, f[1], name)
            else:
                layout.append((lo, hi, f[1], name))
            if f[1][0] != "r" or f[1][3] != "p" or name in SPECIAL:
                continue
            if any(lo < e and s < hi for s, e in untracked):
                continue
            n = (hi - lo) >> 12
            raw = os.pread(pm, n * 8, (lo >> 12) * 8)
            ents = struct.unpack(f"{len(raw) // 8}Q", raw)
            i = 0
            while i < len(ents):
                if not ents[i] >> 62:
                    i += 1
                    continue
                e = i
                while e < len(ents) and ents[e] >> 62 and e - i < 256:
                    e += 1
                try:
                    data = os.pread(mem, (e - i) << 12, lo + (i << 12))
                except OSError:
                    data = b""
                for p in range(len(data) >> 12):
                    page = data[p << 12:(p + 1) << 12]
                    at = lo + ((i + p) << 12)
                    for a in rseq:
                        if at <= a <= at + 4096 - 32:
                            o = a - at
                            page = (page[:o] + bytes(8) + page[o + 8:o + 20] + bytes(8)
                                    + page[o + 28:])
                    # Small regions keep their bytes, to say which differ.
                    pages[lo + ((i + p) << 12)] = (page if hi - lo <= SMALL else
                                                   hashlib.blake2b(page, digest_size=12).digest())
                i = e
    except OSError:
        return None
    finally:
        os.close(mem)
        os.close(pm)
    return layout, pages


def compare_pages(a, b):
    """The first difference between two mem_pages() of one process, or
    None. A page present in one only must read as zeros in it."""
    (la, pa), (lb, pb) = a, b
    if la != lb:
        ra, rb = set(la), set(lb)
        return (f"layout: at the mark only {sorted(ra - rb)[:4]}, now only {sorted(rb - ra)[:4]}")
    def zero(addr):
        return ZERO_PAGE if any(r[0] <= addr < r[1] and r[1] - r[0] <= SMALL for r in la) \
            else hashlib_zero()
    bad = [addr for addr in set(pa) | set(pb) if pa.get(addr, zero(addr)) != pb.get(addr, zero(addr))]
    if not bad:
        return None
    bad.sort()
    reg = next((r for r in la if r[0] <= bad[0] < r[1]), None)
    what = ""
    x, y = pa.get(bad[0], zero(bad[0])), pb.get(bad[0], zero(bad[0]))
    if len(x) == 4096:
        offs = [o for o in range(4096) if x[o] != y[o]]
        what = (f"; {len(offs)} bytes, at offsets {[hex(o) for o in offs[:16]]}: "
                f"{x[offs[0]:offs[0] + 16].hex()} at the mark, {y[offs[0]:offs[0] + 16].hex()} now")
    return (f"{len(bad)} pages differ, the first at {bad[0]:#x} (present at the mark "
            f"{bad[0] in pa}, now {bad[0] in pb}) in {reg}{what}")


def hashlib_zero():
    import hashlib
    return hashlib.blake2b(ZERO_PAGE, digest_size=12).digest()


class Churn:
    def __init__(self, args, cmd):
        self.a = args
        self.cmd = cmd
        self.mv = os.environ.get("MEMVISOR") or os.path.join(
            os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "memvisor")
        self.totals = dict(runs=0, cycles=0, evicts=0, busy=0, gone=0, ckpt_err=0, fallbacks=0,
                           reloads=0, reload_err=0, kills=0, marks=0, rollbacks=0, rb_busy=0,
                           rb_refused=0, hashed_mib=0, tree_rollbacks=0)
        self.errors_seen = {}

    # -- control commands, each bounded in time --------------------------
    def ctl(self, sock, *args, timeout=60):
        cmd = [self.mv, "ctl", "--socket", sock, "--timeout", str(timeout)] + list(args)
        try:
            p = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=timeout + 10)
        except subprocess.TimeoutExpired:
            return None, f"ctl {' '.join(args)}: no answer in {timeout + 10} s"
        return p.returncode, (p.stdout + p.stderr).decode(errors="replace")

    def note_error(self, what, msg):
        # Print the first two of each kind of unexpected answer (numbers
        # and paths aside).
        first = msg.strip().splitlines()[-1] if msg.strip() else "(no message)"
        k = (what, re.sub(r"\d+", "N", re.sub(r"/\S+", "PATH", first)))
        self.errors_seen[k] = self.errors_seen.get(k, 0) + 1
        if self.errors_seen[k] <= 2:
            log(f"  note: {what}: {first}")

    # -- one run ------------------------------------------------------------
    def native(self):
        t0 = time.monotonic()
        cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        # In a session of its own, so that a timeout ends all of it.
        p = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, cwd=self.a.cwd, start_new_session=True)
        try:
            p.stdout_data, p.stderr_data = p.communicate(timeout=self.a.timeout or LIMIT_FLOOR)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            log(f"churn {self.a.name}: the native run took more than {self.a.timeout or LIMIT_FLOOR} s")
            sys.exit(2)
        p.stdout, p.stderr = p.stdout_data, p.stderr_data
        self.native_out, self.native_rc = p.stdout, p.returncode
        self.native_s = time.monotonic() - t0
        cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.native_cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
        self.limit = self.a.timeout if self.a.timeout else run_limit(self.native_s)
        log(f"churn {self.a.name}: native run {self.native_s:.1f} s ({self.native_cpu:.1f} s of CPU), "
            f"exit {p.returncode}, {len(p.stdout)} bytes of output; a supervised run may take "
            f"{self.limit:.0f} s" + ("" if self.a.timeout else f" ({LIMIT_FACTOR} times, at least {LIMIT_FLOOR} s)"))
        if p.returncode != 0:
            log("  native stderr: " + p.stderr.decode(errors="replace")[-2000:])

    def run(self, r, seed):
        rng = random.Random(seed)  # the choices of each cycle
        retry = random.Random(seed ^ 0x5EED)  # pauses before retries, whose number is timing
        d = tempfile.mkdtemp(prefix=f"run{r}.", dir=self.a.workdir)
        sock, outp, errp = f"{d}/ctl.sock", f"{d}/out", f"{d}/log"
        st = dict(cycles=0, evicts=0, busy=0, gone=0, ckpt_err=0, reloads=0, reload_err=0,
                  fallbacks=0, marks=0, rollbacks=0, rb_busy=0, rb_refused=0, hashed_mib=0,
                  tree_rollbacks=0)
        cuts = []  # --rollback: output offsets [k, j) printed again after a rollback
        # Where the time goes: the program stopped by checkpoints, and the
        # faults its threads waited on (from the reload jobs' results).
        tm = dict(ckpt_s=0.0, paused_s=0.0, faults=0, fault_max_ms=0.0)
        pending = None  # a reload job started without --wait, not accounted yet
        kill_at = rng.randrange(0, 4) if self.a.kill else None
        kill_phase = rng.choice(["evict", "reload"]) if self.a.kill else None
        kill_delay = rng.uniform(0, 0.3)
        log(f"run {r}: seed {seed}" + (f", kill memvisor at cycle {kill_at} during the {kill_phase}, "
                                      f"{kill_delay * 1000:.0f} ms in" if self.a.kill else ""))
        t0 = time.monotonic()
        deadline = t0 + self.limit
        prog = Progress(t0, outp)
        with open(outp, "wb") as out, open(errp, "wb") as err:
            point = ["--until-point", self.a.until_point] if self.a.until_point else []
            mvp = subprocess.Popen([self.mv, "run", "--socket", sock] + point + ["--"] + self.cmd,
                                   stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=self.a.cwd)
        failure = None
        killed = False
        seen = set()  # every process of the run seen, for the kill check
        images = []   # image dirs not removed yet, oldest first

        def alive():
            return mvp.poll() is None

        def account(msg):
            m = re.search(r'"faults": ?(\d+)', msg)
            if m:
                tm["faults"] += int(m.group(1))
            m = re.search(r'"fault_max_ns": ?(\d+)', msg)
            if m:
                tm["fault_max_ms"] = max(tm["fault_max_ms"], int(m.group(1)) / 1e6)

        def remember_tree():
            seen.update(descendants(mvp.pid))

        def ending(msg):
            """An error because memvisor is ending with the program? A job
            that found the program gone ("exited during the checkpoint",
            a mark's too) is answered before memvisor ends: wait for it."""
            words = ("cannot connect", "closed the connection", "cannot send", "exited during")
            if alive() and any(w in msg for w in words):
                try:
                    mvp.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    pass
            return not alive()

        while alive() and not os.path.exists(sock) and time.monotonic() < t0 + 10:
            time.sleep(0.01)
        k = 0
        while alive() and failure is None:
            prog.sample(descendants(mvp.pid))
            if time.monotonic() > deadline:
                failure = f"hang: still running after {self.limit:.0f} s"
                break
            if pending is not None:
                rc, msg = self.ctl(sock, "--json", "job", str(pending), timeout=10)
                if rc is not None and '"state":"running"' not in msg:
                    account(msg)
                    pending = None
            k += 1
            img = f"{d}/img-{k}"
            remember_tree()
            if kill_at is not None and st["evicts"] == kill_at and not killed and kill_phase == "evict":
                killed = self.kill_during(mvp, sock, ["checkpoint", img, "--evict", "--wait"],
                                          kill_delay, remember_tree)
                break
            if self.a.rollback and rng.random() < 0.5:
                res = self.rollback_cycle(sock, rng, st, outp, img, cuts, ending)
                st["cycles"] += 1
                if res == "gone":
                    st["gone"] += 1
                    break
                if res is not None:
                    failure = res
                    break
                continue
            tc = time.monotonic()
            if self.a.live:
                rc, msg = self.ctl(sock, "checkpoint", img, "--live", "--wait")
                if rc is None:
                    failure = f"hang: {msg}"
                    break
                if rc == 0:
                    tm["ckpt_s"] += time.monotonic() - tc
                    m = re.search(r"paused ([\d.]+) ms", msg)
                    tm["paused_s"] += float(m.group(1)) / 1000 if m else 0
                    st["evicts"] += 1
                    st["fallbacks"] += "live copy given up" in msg
                elif ending(msg):
                    st["gone"] += 1
                    break
                elif "busy" in msg:
                    st["busy"] += 1
                else:
                    st["ckpt_err"] += 1
                    self.note_error("checkpoint", msg)
                shutil.rmtree(img, ignore_errors=True)
                st["cycles"] += 1
                time.sleep(rng.uniform(0, 0.3))
                continue
            rc, msg = self.ctl(sock, "checkpoint", img, "--evict", "--wait",
                               *(["--live"] if self.a.live_evict else []))
            if rc == 0:
                st["fallbacks"] += "live copy given up" in msg
                tm["ckpt_s"] += time.monotonic() - tc
                m = re.search(r"paused ([\d.]+) ms", msg)
                tm["paused_s"] += float(m.group(1)) / 1000 if m else 0
            if rc is None:
                failure = f"hang: {msg}"
                break
            if rc != 0:
                if ending(msg):
                    shutil.rmtree(img, ignore_errors=True)
                    st["gone"] += 1
                    break
                # busy: "a checkpoint is already running", "memory is
                # evicted to DIR: reload it first" (ctl prints no codes).
                if "already running" in msg or "is evicted to" in msg:
                    shutil.rmtree(img, ignore_errors=True)
                    st["busy"] += 1
                    m = re.search(r"evicted to (\S+): reload", msg)
                    if st["busy"] % 10 == 0 and m and os.path.isdir(m.group(1)):
                        # Memory still evicted and no reload running:
                        # bring it back (it is served on demand anyway).
                        self.ctl(sock, "reload", m.group(1), "--wait")
                    time.sleep(retry.uniform(0.01, 0.1))
                    continue
                st["ckpt_err"] += 1
                self.note_error("checkpoint", msg)
                if not os.path.isdir(img):
                    time.sleep(retry.uniform(0.01, 0.1))
                    continue
                # The image is complete but the evict failed (evict_failed):
                # the processes evicted before the failure owe pages to it.
            else:
                st["evicts"] += 1
            # Memory is evicted to img only: the older images are free.
            for old in images:
                shutil.rmtree(old, ignore_errors=True)
            images = [img]
            time.sleep(rng.uniform(0, 0.3))
            # --json: the reply (the job id) or, with --wait, the job's
            # end with its fault counts, as JSON for account().
            args = ["--json", "reload", img]
            if rng.random() < 0.5:
                args += ["--rate", str(rng.choice(RATES))]
            if rng.random() < 0.5:
                args += ["--wait"]
            remember_tree()
            if kill_at is not None and st["evicts"] - 1 == kill_at and not killed and kill_phase == "reload":
                killed = self.kill_during(mvp, sock, args, kill_delay, remember_tree)
                break
            rc, msg = self.ctl(sock, *args)
            st["cycles"] += 1
            if rc is None:
                failure = f"hang: {msg}"
                break
            if rc == 0:
                st["reloads"] += 1
                m = re.search(r'"job": ?(\d+)', msg)
                if m:
                    pending = int(m.group(1))
                account(msg)
            elif ending(msg):
                st["gone"] += 1
            else:
                st["reload_err"] += 1
                self.note_error("reload", msg)

        # The end of the run.
        if failure is None:
            end = max(deadline, time.monotonic() + 1.0)
            while alive() and time.monotonic() < end:
                prog.sample(descendants(mvp.pid))
                try:
                    mvp.wait(timeout=0.2)
                except subprocess.TimeoutExpired:
                    pass
            if alive():
                failure = f"hang: still running after {self.limit:.0f} s"
        timed_out = bool(failure and failure.startswith("hang"))
        if timed_out:
            if failure.startswith("hang: still running"):
                failure = prog.classify(failure, self.limit)
            self.dump(mvp, sock, failure, prog)
            mvp.kill()  # memvisor, by pid: its reaper ends the tree
            mvp.wait()
            killed = True
        elapsed = time.monotonic() - t0
        with open(outp, "rb") as f:
            out = f.read()
        rc = mvp.returncode

        # The checks.
        if failure is None:
            if killed:
                self.totals["kills"] += 1
                if not self.native_out.startswith(out):
                    failure = "after memvisor was killed, the program had printed what a native run does not"
            elif rc < 0 or rc == 125:
                failure = f"memvisor crashed: {describe_status(rc)}"
            elif self.a.rollback and (uncut(out, cuts) != self.native_out or rc != self.native_rc):
                failure = (f"different from the native run once the {len(cuts)} stretches printed "
                           f"again after rollbacks are cut out: exit {describe_status(rc)} "
                           f"(native {self.native_rc})")
                out = uncut(out, cuts)
            elif not self.a.rollback and (out != self.native_out or rc != self.native_rc):
                failure = f"different from the native run: exit {describe_status(rc)} (native {self.native_rc})"
                if out != self.native_out:
                    failure += ", different output"
        survivors = self.survivors(seen | set(descendants(os.getpid())) - {mvp.pid}, 2.0 if killed else 0.5)
        if survivors and failure is None:
            failure = "processes of the run survived memvisor: " + "; ".join(survivors)

        for key in st:
            self.totals[key] += st[key]
        self.totals["runs"] += 1
        status = describe_status(rc)
        if timed_out:
            status = "none (memvisor SIGKILLed by this driver after the timeout)"
        summary = (f"run {r}: seed {seed}, {elapsed:.1f} s, {st['cycles']} cycles "
                   f"({st['evicts']} evicts, {st['busy']} busy, {st['gone']} gone, "
                   f"{st['ckpt_err']} checkpoint errors, {st['reloads']} reloads, "
                   f"{st['reload_err']} reload errors"
                   + (f", {st['fallbacks']} live copies given up"
                      if self.a.live or self.a.live_evict else "")
                   + (f", {st['marks']} marks, {st['rollbacks']} rollbacks checked "
                      f"({st['tree_rollbacks']} of a tree, {st['hashed_mib']} MiB hashed), "
                      f"{st['rb_busy']} marks busy, "
                      f"{st['rb_refused']} rollbacks refused" if self.a.rollback else "")
                   + f"), exit {status}")
        timing = (f"  run {r}: {tm['ckpt_s']:.1f} s in checkpoints, the program stopped "
                  f"{tm['paused_s']:.1f} s of them; {tm['faults']} faults served (the slowest "
                  f"{tm['fault_max_ms']:.0f} ms); the program used {prog.cpu_max:.1f} s of CPU "
                  f"(native {self.native_cpu:.1f} s)")
        if failure is None:
            log(summary + (", memvisor killed, output a prefix of the native one" if killed else ", same as native"))
            log(timing)
            shutil.rmtree(d, ignore_errors=True)
            return True
        log(f"FAIL churn {self.a.name}: {failure}")
        log(summary)
        log(timing)
        log(f"  replay: CHURN_SEED={seed} (cycle {st['cycles']}, {st['evicts']} evicts)")
        self.show_diff(out)
        with open(errp, "rb") as f:
            mvlog = f.read().decode(errors="replace").splitlines()
        log(f"  memvisor log, with the program's stderr ({len(mvlog)} lines, the last 40):")
        for line in mvlog[-40:]:
            log("    " + line)
        if self.a.keep:
            log(f"  kept in {d}")
        else:
            shutil.rmtree(d, ignore_errors=True)
        return False

    def rollback_cycle(self, sock, rng, st, outp, img, cuts, ending):
        """A mark, a run, a rollback checked page by page, an unmark (see
        --rollback). None when done or refused as expected, "gone" when
        the program ended, else the failure."""

        def over(msg):  # the program ended (a kill by a rollback is a failure)
            return "was killed" not in msg and ("has exited" in msg or ending(msg))

        rc, msg = self.ctl(sock, "--json", "mark", "--hold")
        if rc is None:
            return f"hang: {msg}"
        if rc != 0:
            # A job that stops the program runs, or memory is evicted: a
            # reload (the evict cycle's, with or without --wait) first.
            if "busy" in msg or "already running" in msg or "evicted" in msg or "running" in msg:
                st["rb_busy"] += 1
                m = re.search(r"evicted to (\S+)", msg)
                if m and st["rb_busy"] % 5 == 0 and os.path.isdir(m.group(1)):
                    self.ctl(sock, "reload", m.group(1), "--wait")
                time.sleep(rng.uniform(0.01, 0.1))
                return None
            return "gone" if over(msg) else f"mark failed: {msg.strip()[-400:]}"
        try:
            res = json.loads(msg.strip().splitlines()[-1])
            res = res.get("result", res)
            # A tree's mark lists each process (the command's first, whose
            # fields are also the result's); one process's does not.
            procs = [(int(p["pid"]),
                      [(int(u["start"]), int(u["end"])) for u in p.get("untracked", [])],
                      [int(r["addr"]) for r in p.get("rseq", [])])
                     for p in [res] + res.get("processes", [])[1:]]
        except (ValueError, KeyError, IndexError, TypeError):
            return f"mark: an answer without the marked process: {msg.strip()[-400:]}"
        st["marks"] += 1
        k = os.path.getsize(outp)
        at_mark = [mem_pages(*p) for p in procs]
        if any(x is None for x in at_mark):
            return "gone"
        # Held since the mark, nothing to put back: it runs on.
        rc, msg = self.ctl(sock, "rollback")
        if rc is None:
            return f"hang: {msg}"
        if rc != 0:
            return "gone" if over(msg) else f"rollback of a held program failed: {msg.strip()[-400:]}"
        time.sleep(rng.uniform(0, 0.3))
        if rng.random() < 0.3:
            rc, msg = self.ctl(sock, "checkpoint", img + "-ev", "--evict", "--wait")
            shutil.rmtree(img + "-ev", ignore_errors=True)
            if rc == 0:
                return "an evict was let through while a mark tracks the memory"
        if rng.random() < 0.3:
            rc, msg = self.ctl(sock, "checkpoint", img + "-plain", "--wait")
            shutil.rmtree(img + "-plain", ignore_errors=True)
            if rc not in (0, None) and not ("exited" in msg or "busy" in msg or "already" in msg):
                self.note_error("checkpoint with a mark", msg)
        rc, msg = self.ctl(sock, "--json", "rollback", "--hold")
        if rc is None:
            return f"hang: {msg}"
        if rc != 0:
            # Refusals that change nothing: the program ended, ran a new
            # program, or a thread of the mark ended since. It runs on as
            # it was, and nothing is printed again.
            if over(msg):
                return "gone"
            if "since the mark" in msg and "was killed" not in msg:
                st["rb_refused"] += 1
                self.note_error("rollback refused", msg)
                self.ctl(sock, "unmark")
                return None
            return f"rollback failed: {msg.strip()[-600:]}"
        j = os.path.getsize(outp)
        for p, was in zip(procs, at_mark):
            now = mem_pages(*p)
            if now is None:
                return f"rolled back and held, process {p[0]} of the mark is gone"
            bad = compare_pages(was, now)
            if bad:
                return f"rolled back to the mark, process {p[0]} differs from it: {bad}"
            st["hashed_mib"] += len(was[1]) * 4096 >> 20
        st["rollbacks"] += 1
        st["tree_rollbacks"] += len(procs) > 1
        cuts.append((k, j))
        rc, msg = self.ctl(sock, "unmark")
        if rc is None:
            return f"hang: {msg}"
        if rc != 0:
            return "gone" if over(msg) else f"unmark of a held program failed: {msg.strip()[-400:]}"
        return None

    def dump(self, mvp, sock, failure, prog):
        """Before memvisor is killed: where every thread of the run waits
        (the program's in a page fault or an event, memvisor's fault
        workers, loader and job threads), what memvisor says of its jobs
        and evicted spaces, and the program's progress."""
        log(f"  {failure}; the program's progress:")
        for line in prog.report(len(self.native_out), self.native_cpu):
            log("    " + line)
        log("  the processes of the run and their threads (memvisor first):")
        for p in [mvp.pid] + descendants(mvp.pid):
            log("    " + proc_desc(p))
            for line in thread_lines(p):
                log("      " + line)
        if mvp.poll() is None:
            rc, msg = self.ctl(sock, "--json", "status", timeout=5)
            if msg:
                log("  status: " + msg.strip()[:6000])
            rc, msg = self.ctl(sock, "--json", "jobs", timeout=5)
            try:
                jobs = json.loads(msg.strip().splitlines()[-1])["jobs"]
                jobs.sort(key=lambda j: j["id"])
                for j in [j for j in jobs[:-3] if j["state"] == "running"] + jobs[-3:]:
                    log("  job: " + json.dumps(j)[:2000])
            except (ValueError, KeyError, IndexError, TypeError):
                log("  jobs: " + msg.strip()[:3000])
            log("  memvisor's threads in user space:")
            for line in user_stacks(mvp.pid):
                log("    " + line)

    def kill_during(self, mvp, sock, args, delay, remember_tree):
        """Start a ctl command, SIGKILL memvisor delay seconds later."""
        cmd = [self.mv, "ctl", "--socket", sock] + args
        c = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        end = time.monotonic() + delay
        while time.monotonic() < end:
            remember_tree()
            time.sleep(0.005)
        remember_tree()
        mvp.kill()
        mvp.wait()
        try:
            c.wait(timeout=10)
        except subprocess.TimeoutExpired:
            c.kill()
            c.wait()
        log(f"  killed memvisor during '{' '.join(args[:1])}' after {delay * 1000:.0f} ms")
        return True

    def survivors(self, pids, grace):
        """Processes of the run still alive after grace seconds; killed and reaped."""
        end = time.monotonic() + grace
        while True:
            self.reap()
            left = [p for p in pids if proc_state(p) not in (None, "Z", "X") and self.ours(p)]
            if not left or time.monotonic() >= end:
                break
            time.sleep(0.05)
        desc = [proc_desc(p) for p in left]
        for p in left:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.1)
        self.reap()
        return desc

    def ours(self, pid):
        """A process of the run: below this driver (a subreaper) and not a ctl."""
        p = pid
        for _ in range(64):
            try:
                with open(f"/proc/{p}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                return False
            if ppid == os.getpid():
                return True
            if ppid <= 1:
                return False
            p = ppid
        return False

    def reap(self):
        # Orphans of the run that died as this subreaper's children.
        for p in children(os.getpid()):
            if proc_state(p) == "Z":
                try:
                    os.waitpid(p, os.WNOHANG)
                except ChildProcessError:
                    pass

    def show_diff(self, out):
        a = self.native_out.decode(errors="replace").splitlines()
        b = out.decode(errors="replace").splitlines()
        diff = list(difflib.unified_diff(a, b, "native", "memvisor", lineterm="", n=1))
        if diff:
            log(f"  output difference ({len(diff)} lines, the first 30):")
            for line in diff[:30]:
                log("    " + line)

    def main(self):
        set_subreaper()
        base = int(os.environ["CHURN_SEED"]) if os.environ.get("CHURN_SEED") else random.randrange(1, 2**31)
        log(f"churn {self.a.name}: seed {base} (replay: CHURN_SEED={base}), "
            f"{self.a.seconds} s{', SIGKILL mode' if self.a.kill else ''}: {' '.join(self.cmd)}")
        self.native()
        t0 = time.monotonic()
        ok = True
        r = 0
        while r < self.a.runs and (r == 0 or time.monotonic() - t0 < self.a.seconds):
            if not self.run(r, base + r):
                ok = False
                break
            r += 1
        t = self.totals
        if ok and self.a.rollback and not t["rollbacks"]:
            log(f"FAIL churn {self.a.name}: no rollback was checked in {t['runs']} runs "
                f"({t['marks']} marks, {t['rb_busy']} refused as busy)")
            ok = False
        log(f"churn {self.a.name}: {'OK' if ok else 'FAILED'}, {t['runs']} runs, {t['cycles']} cycles, "
            f"{t['evicts']} evicts, {t['busy']} busy, {t['gone']} gone, {t['ckpt_err']} checkpoint errors, "
            f"{t['reloads']} reloads, {t['reload_err']} reload errors"
            + (f", {t['kills']} kills" if self.a.kill else "")
            + (f", {t['marks']} marks, {t['rollbacks']} rollbacks checked "
               f"({t['tree_rollbacks']} of a tree)" if self.a.rollback else "")
            + f", {time.monotonic() - t0:.0f} s, seed {base}")
        return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--name", default="program")
    ap.add_argument("--seconds", type=float, default=float(os.environ.get("CHURN_SECONDS", 20)))
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--timeout", type=float, default=float(os.environ.get("CHURN_TIMEOUT", 0)),
                    help="seconds a supervised run may take (default: from the native run)")
    ap.add_argument("--kill", action="store_true")
    ap.add_argument("--live", action="store_true", help="live checkpoints, no evict")
    ap.add_argument("--live-evict", action="store_true",
                    help="evict with checkpoint --evict --live")
    ap.add_argument("--rollback", action="store_true",
                    help="marks and rollbacks between the evicts, each checked page by page")
    ap.add_argument("--until-point", default=None, metavar="SYSCALL[:FD]",
                    help="run under memvisor run --until-point (its calls and exits notified)")
    ap.add_argument("--keep", action="store_true", help="keep a failed run's files")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--cwd", default=None)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        ap.error("no program")
    own = a.workdir is None
    if own:
        a.workdir = tempfile.mkdtemp(prefix="churn.")
    try:
        return Churn(a, cmd).main()
    finally:
        if own and not a.keep:
            shutil.rmtree(a.workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
