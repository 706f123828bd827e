#!/usr/bin/python3
"""Plumbing test of scripts/fidelity/run.sh (QUICK=1): both workloads run live and simulated
and the table has one complete row per workload with the same request count on both sides.

Usage: fidelity_test.py KVROUTE_BINARY RUN_SH
"""
import os
import re
import subprocess
import sys
import tempfile


def main():
    kvroute, run_sh = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="kvroute-fidelity-") as out:
        env = dict(os.environ, KVROUTE=kvroute, QUICK="1", HALF="0", S="4",
                   POLICIES="round_robin", LIMIT_S="60")
        proc = subprocess.run(["bash", run_sh, out], env=env, capture_output=True, text=True,
                              timeout=85)
        if proc.returncode != 0:
            sys.exit(f"run.sh failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        table = open(os.path.join(out, "table.md")).read()
        rows = [l for l in table.splitlines() if l.startswith("| agentic") or
                l.startswith("| shared-prefix")]
        if len(rows) != 2:
            sys.exit(f"expected 2 rows (one per workload), got:\n{table}")
        for row in rows:
            cells = [c.strip() for c in row.strip("|").split("|")]
            live_ok, sim_ok = (int(x) for x in cells[2].split(" / "))
            if live_ok == 0 or live_ok != sim_ok:
                sys.exit(f"request counts differ or are zero: {row}")
            for c in cells[3:7]:  # TTFT, ITL, throughput, hit rate: live / sim (gap)
                if not re.match(r"^\**[0-9.]+ / [0-9.]+ \([+-]?[0-9]+%\)\**$", c):
                    sys.exit(f"missing value in {row!r}: {c!r}")
        if "load average at start" not in open(os.path.join(out, "load.txt")).read():
            sys.exit("no load average recorded")
    print("ok")


if __name__ == "__main__":
    main()
