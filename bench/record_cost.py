#!/usr/bin/env python3
"""What `fxprof record` costs the user against `perf record` (issue 36 item 7), at load 0 and with two busy
loops (`yes >/dev/null`, started and stopped here): for a short program (rec_busy spin 60, ~60 ms of CPU),
python3 running a stdlib script (json.tool over 1 MB of JSON) and gzip of 8 MB of base64 text, each
recorded by `fxprof record --save-only` (DWARF stacks, off-CPU, symbols baked), `perf record --call-graph
dwarf` and `perf record -g` (1 kHz both), and run bare:

  wall       the recorder's wall time, start to end (bare: the program's)
  after      the recorder's CPU after the program's exit (ms; the recorder's own, not the program's)
  during     the recorder's CPU while the program ran (ms)
  prog       the program's own CPU (ms: perf and fxprof slow it down by what they make the kernel do)
  rss        the peak RSS of the recorder, the program and this script's fork (MB: wait4's; bare: the
             program's or the fork's, ~10 MB)

The program is wrapped as `sh -c 'PROG; times; cat /proc/$PPID/stat'`: at its exit the recorder's own CPU so
far (/proc/PID/stat, 10 ms ticks) and the program's (`times`); the recorder's whole CPU comes from wait4 less
the wrapper's. Medians of RUNS runs (default 3), the recorders alternated. This VM is shared: the load average
is printed with each table.

  bench/record_cost.py [BUILD_DIR] [RUNS]
"""
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
RUNS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
TICK_MS = 1000.0 / os.sysconf("SC_CLK_TCK")


def die(msg):
    print("bench/record_cost.py: " + msg, file=sys.stderr)
    sys.exit(1)


def programs_dir():
    with open(os.path.join(BUILD, "CMakeCache.txt")) as f:
        for line in f:
            if line.startswith("FXPROF_TEST_PROGRAMS_BINARY_DIR:PATH="):
                return line.split("=", 1)[1].strip()
    die("no FXPROF_TEST_PROGRAMS_BINARY_DIR in " + BUILD + "/CMakeCache.txt")


FXPROF = os.path.join(BUILD, "fxprof")
BUSY = os.path.join(programs_dir(), "rec_busy")
for f in (FXPROF, BUSY):
    if not os.access(f, os.X_OK):
        die(f + " is missing (build the fxprof and fxprof_test_programs targets)")
for tool in ("perf", "gzip", "python3", "yes"):
    if not shutil.which(tool):
        die(tool + " is missing (apt-get install linux-perf gzip python3 coreutils)")

TMP = tempfile.mkdtemp(prefix="fxprof-cost-")


def prepare_inputs():
    # In a process of its own: this one stays small, since a recorder's peak RSS as wait4 gives it is at
    # least what this process had when it forked it.
    code = """
import base64, json, os, random, sys
rnd = random.Random(36)
doc = [{"id": i, "name": "item%d" % i, "tags": [rnd.random() for _ in range(8)]} for i in range(6000)]
with open(os.path.join(sys.argv[1], "in.json"), "w") as f:
    json.dump(doc, f)
with open(os.path.join(sys.argv[1], "in.txt"), "wb") as f:
    f.write(base64.encodebytes(os.urandom(6 * 1024 * 1024)))
"""
    subprocess.run([sys.executable, "-c", code, TMP], check=True)


PROGRAMS = [
    ("short (spin 60)", [BUSY, "spin", "60"]),
    ("python3 json.tool 1 MB", ["python3", "-m", "json.tool", os.path.join(TMP, "in.json")]),
    ("gzip 8 MB", ["gzip", "-c", os.path.join(TMP, "in.txt")]),
]

RECORDERS = [
    ("bare", []),
    ("fxprof record -s", [FXPROF, "record", "--save-only", "-q", "-o", os.path.join(TMP, "x.json.gz"), "--"]),
    ("perf --call-graph dwarf", ["perf", "record", "-q", "-F", "1000", "--call-graph", "dwarf", "-o",
                                 os.path.join(TMP, "perf.data"), "--"]),
    ("perf -g", ["perf", "record", "-q", "-F", "1000", "-g", "-o", os.path.join(TMP, "perf.data"), "--"]),
]


def seconds(text):  # `times`' "0m0.012s"
    m, s = text.rstrip("s").split("m")
    return float(m) * 60 + float(s)


def one(recorder, prog):
    """One run: (wall s, CPU after exit ms, CPU during ms, program CPU ms, peak RSS MB)."""
    marks = os.path.join(TMP, "marks")
    quoted = " ".join("'" + a.replace("'", "'\\''") + "'" for a in prog)
    wrapper = ["sh", "-c", quoted + " >/dev/null; times > %s; cat /proc/$PPID/stat >> %s" % (marks, marks)]
    if os.path.exists(marks):
        os.unlink(marks)
    t0 = time.monotonic()
    child = subprocess.Popen(recorder + wrapper if recorder else wrapper, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(child.pid, 0)
    wall = time.monotonic() - t0
    child.returncode = status
    if not os.path.exists(marks):
        die("the program did not run under " + " ".join(recorder[:2] or ["sh"]))
    with open(marks) as f:
        lines = f.read().splitlines()
    shell = [seconds(x) for x in lines[0].split()]  # the wrapper's own user, system
    progcpu = [seconds(x) for x in lines[1].split()]  # the program's
    stat = lines[2][lines[2].rindex(")") + 2:].split()
    total = (ru.ru_utime + ru.ru_stime) * 1000
    waited = (sum(shell) + sum(progcpu)) * 1000
    if not recorder:
        return wall, 0.0, 0.0, sum(progcpu) * 1000, ru.ru_maxrss / 1024
    during = (int(stat[11]) + int(stat[12])) * TICK_MS  # utime, stime: the recorder's own, at the exit
    return wall, max(0.0, total - waited - during), during, sum(progcpu) * 1000, ru.ru_maxrss / 1024


def table(load):
    loadavg = " ".join(open("/proc/loadavg").read().split(" ", 3)[:3])
    print("%s; load average %s; medians of %d runs" % (load, loadavg, RUNS))
    print("  %-24s %-24s %8s %9s %9s %9s %8s" % ("program", "recorder", "wall s", "after ms", "during ms",
                                                 "prog ms", "rss MB"))
    for label, prog in PROGRAMS:
        rows = {name: [] for name, _ in RECORDERS}
        for _ in range(RUNS):
            for name, rec in RECORDERS:
                rows[name].append(one(rec, prog))
        for name, _ in RECORDERS:
            cols = [statistics.median(c) for c in zip(*rows[name])]
            print("  %-24s %-24s %8.3f %9.0f %9.0f %9.0f %8.1f" % (label, name, *cols))
    sys.stdout.flush()


def main():
    prepare_inputs()
    try:
        table("idle (no load of ours)")
        spinners = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(2)]
        try:
            table("two busy loops (yes >/dev/null, twice)")
        finally:
            for s in spinners:
                s.send_signal(signal.SIGTERM)
                s.wait()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)


main()
