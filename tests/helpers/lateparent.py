#!/usr/bin/env python3
"""lateparent.py FIFO wait|nowait: start a child that execs `sh -c 'exit 3'`
(and so exits at once), print "child PID", read a line from FIFO, and only
then reap the child (wait: prints "reaped STATUS") or exit without reaping
it (nowait: the reaper does). Until the line comes the child is a zombie
nobody waits for; a shell would not do (bash reaps its background jobs on
SIGCHLD)."""
import os
import sys

fifo, mode = sys.argv[1], sys.argv[2]
pid = os.fork()
if pid == 0:
    os.execvp("sh", ["sh", "-c", "exit 3"])
print("child", pid, flush=True)
with open(fifo) as f:
    f.readline()
if mode == "wait":
    _, status = os.waitpid(pid, 0)
    print("reaped", os.waitstatus_to_exitcode(status), flush=True)
