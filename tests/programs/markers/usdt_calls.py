# Python work of known times, for python3's USDT probes (Debian's python3 is built with them): calls N
# alternates burn_a and burn_b, N of each; then 3 full collections (gc.collect, the collector otherwise
# off) and imports of json, fractions and csv. It writes "WHAT START_NS END_NS" per call, collection and
# import to TRUTH, CLOCK_MONOTONIC read just before and after it.
import gc
import sys
import time


def burn_a(n):
    s = 0
    for i in range(n):
        s += i
    return s


def burn_b(n):
    s = 0
    for i in range(n):
        s ^= i
    return s


def timed(what, f, lines):
    start = time.monotonic_ns()
    f()
    end = time.monotonic_ns()
    lines.append(f"{what} {start} {end}\n")


def main():
    calls, truth = int(sys.argv[1]), sys.argv[2]
    lines = []
    gc.disable()
    for _ in range(calls):
        timed("burn_a", lambda: burn_a(200000), lines)
        timed("burn_b", lambda: burn_b(200000), lines)
    for _ in range(3):
        timed("gc", gc.collect, lines)
    for name in ("json", "fractions", "csv"):
        timed(name, lambda: __import__(name), lines)  # the import statement's path (importlib's has no probe)
    with open(truth, "w") as out:
        out.writelines(lines)


main()
