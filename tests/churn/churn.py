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

--kill: once per run, at a random cycle, memvisor is SIGKILLed at a random
moment during the evict or the reload. The program must die with it: what
it printed must be a prefix of the native output, and no process of the
run may be alive two seconds later. (This driver is a child subreaper, so
whatever memvisor's tree leaves behind becomes its child; it kills such
processes by pid.)

Seeds: each run r uses seed BASE+r, printed at its start; CHURN_SEED=BASE
replays from that seed. CHURN_SECONDS, CHURN_TIMEOUT and MEMVISOR are
read from the environment. A failure (wrong output or status, a hang past
the timeout, memvisor crashing, a process surviving) prints the seed, the
cycle count, the difference and memvisor's log, and ends the driver with
status 1 after that run.
"""

import argparse
import ctypes
import difflib
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

PR_SET_CHILD_SUBREAPER = 36
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


class Churn:
    def __init__(self, args, cmd):
        self.a = args
        self.cmd = cmd
        self.mv = os.environ.get("MEMVISOR") or os.path.join(
            os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "memvisor")
        self.totals = dict(runs=0, cycles=0, evicts=0, busy=0, gone=0, ckpt_err=0,
                           reloads=0, reload_err=0, kills=0)
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
        # In a session of its own, so that a timeout ends all of it.
        p = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, cwd=self.a.cwd, start_new_session=True)
        try:
            p.stdout_data, p.stderr_data = p.communicate(timeout=self.a.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            log(f"churn {self.a.name}: the native run took more than {self.a.timeout} s")
            sys.exit(2)
        p.stdout, p.stderr = p.stdout_data, p.stderr_data
        self.native_out, self.native_rc = p.stdout, p.returncode
        self.native_s = time.monotonic() - t0
        log(f"churn {self.a.name}: native run {self.native_s:.1f} s, exit {p.returncode}, "
            f"{len(p.stdout)} bytes of output")
        if p.returncode != 0:
            log("  native stderr: " + p.stderr.decode(errors="replace")[-2000:])

    def run(self, r, seed):
        rng = random.Random(seed)  # the choices of each cycle
        retry = random.Random(seed ^ 0x5EED)  # pauses before retries, whose number is timing
        d = tempfile.mkdtemp(prefix=f"run{r}.", dir=self.a.workdir)
        sock, outp, errp = f"{d}/ctl.sock", f"{d}/out", f"{d}/log"
        st = dict(cycles=0, evicts=0, busy=0, gone=0, ckpt_err=0, reloads=0, reload_err=0)
        kill_at = rng.randrange(0, 4) if self.a.kill else None
        kill_phase = rng.choice(["evict", "reload"]) if self.a.kill else None
        kill_delay = rng.uniform(0, 0.3)
        log(f"run {r}: seed {seed}" + (f", kill memvisor at cycle {kill_at} during the {kill_phase}, "
                                      f"{kill_delay * 1000:.0f} ms in" if self.a.kill else ""))
        t0 = time.monotonic()
        deadline = t0 + self.a.timeout
        with open(outp, "wb") as out, open(errp, "wb") as err:
            mvp = subprocess.Popen([self.mv, "run", "--socket", sock, "--"] + self.cmd,
                                   stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=self.a.cwd)
        failure = None
        killed = False
        seen = set()  # every process of the run seen, for the kill check
        images = []   # image dirs not removed yet, oldest first

        def alive():
            return mvp.poll() is None

        def remember_tree():
            seen.update(descendants(mvp.pid))

        def ending(msg):
            """An error because memvisor is ending with the program?"""
            if alive() and any(w in msg for w in ("cannot connect", "closed the connection", "cannot send")):
                try:
                    mvp.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    pass
            return not alive()

        while alive() and not os.path.exists(sock) and time.monotonic() < t0 + 10:
            time.sleep(0.01)
        k = 0
        while alive() and failure is None:
            if time.monotonic() > deadline:
                failure = f"hang: still running after {self.a.timeout} s"
                break
            k += 1
            img = f"{d}/img-{k}"
            remember_tree()
            if kill_at is not None and st["evicts"] == kill_at and not killed and kill_phase == "evict":
                killed = self.kill_during(mvp, sock, ["checkpoint", img, "--evict", "--wait"],
                                          kill_delay, remember_tree)
                break
            rc, msg = self.ctl(sock, "checkpoint", img, "--evict", "--wait")
            if rc is None:
                failure = f"hang: {msg}"
                break
            if rc != 0:
                if ending(msg):
                    shutil.rmtree(img, ignore_errors=True)
                    st["gone"] += 1
                    break
                if "busy" in msg:
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
            args = ["reload", img]
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
            elif ending(msg):
                st["gone"] += 1
            else:
                st["reload_err"] += 1
                self.note_error("reload", msg)

        # The end of the run.
        if failure is None:
            try:
                mvp.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                failure = f"hang: still running after {self.a.timeout} s"
        if failure and failure.startswith("hang"):
            log(f"  {failure}; the processes of the run:")
            for p in descendants(mvp.pid):
                log("    " + proc_desc(p))
            rc, msg = self.ctl(sock, "--json", "status", timeout=5) if alive() else (None, "")
            if msg:
                log("  status: " + msg.strip()[:3000])
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
            elif out != self.native_out or rc != self.native_rc:
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
        if failure and failure.startswith("hang"):
            status = "none (memvisor SIGKILLed by this driver after the timeout)"
        summary = (f"run {r}: seed {seed}, {elapsed:.1f} s, {st['cycles']} cycles "
                   f"({st['evicts']} evicts, {st['busy']} busy, {st['gone']} gone, "
                   f"{st['ckpt_err']} checkpoint errors, {st['reloads']} reloads, "
                   f"{st['reload_err']} reload errors), exit {status}")
        if failure is None:
            log(summary + (", memvisor killed, output a prefix of the native one" if killed else ", same as native"))
            shutil.rmtree(d, ignore_errors=True)
            return True
        log(f"FAIL churn {self.a.name}: {failure}")
        log(summary)
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
        log(f"churn {self.a.name}: {'OK' if ok else 'FAILED'}, {t['runs']} runs, {t['cycles']} cycles, "
            f"{t['evicts']} evicts, {t['busy']} busy, {t['gone']} gone, {t['ckpt_err']} checkpoint errors, "
            f"{t['reloads']} reloads, {t['reload_err']} reload errors"
            + (f", {t['kills']} kills" if self.a.kill else "")
            + f", {time.monotonic() - t0:.0f} s, seed {base}")
        return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--name", default="program")
    ap.add_argument("--seconds", type=float, default=float(os.environ.get("CHURN_SECONDS", 20)))
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--timeout", type=float, default=float(os.environ.get("CHURN_TIMEOUT", 120)))
    ap.add_argument("--kill", action="store_true")
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
