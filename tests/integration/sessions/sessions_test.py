"""scripts/kv-tiers/sessions.py against a hand-made run and a real simulate run."""
import argparse
import csv
import importlib.util
import os
import shutil
import subprocess
import sys

REQUESTS = ["label", "level", "session", "turn", "ok", "error_kind", "start_s", "ttft_s", "e2e_s",
            "tpot_s", "itl_count", "prompt_tokens", "output_tokens", "cached_tokens"]
DECISIONS = ["level", "request", "worker", "at_s", "prompt_tokens"]


def load(script):
    spec = importlib.util.spec_from_file_location("sessions", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        sys.exit(1)


def write_run(workdir, label, turns):
    """turns: (session, start, e2e, prompt, worker); a second level follows that must be ignored."""
    with open(os.path.join(workdir, label + "_requests.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(REQUESTS)
        for level in ("c=2", "c=4"):
            for s, start, e2e, prompt, _ in turns:
                w.writerow([label, level, s, 0, 1, "", start, 0.1, e2e, 0, 0, prompt, 10, 0])
    with open(os.path.join(workdir, label + "_decisions.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(DECISIONS)
        for level in ("c=2", "c=4"):
            for i, (_, start, _, prompt, worker) in enumerate(turns):
                w.writerow([level, i, worker if level == "c=2" else 7, start, prompt])


def hand_made(mod, script, workdir):
    # Session a: w0 [0, 10), w0 [10, 20), w1 [20, 30) -> one move. Session b: w1 [0, 5), then
    # w2 [5, 40) -> one move. At t = 7: a on w0, b on w2. At t = 25: a on w1, b on w2. At
    # t = 35: a has ended, b on w2. The second level (everything on worker 7) is ignored.
    turns = [("a", 0, 10, 100, 0), ("b", 0, 5, 200, 1), ("a", 10, 10, 300, 0),
             ("b", 5, 35, 400, 2), ("a", 20, 10, 500, 1)]
    write_run(workdir, "hand", turns)
    r = mod.analyse(workdir, "hand")
    check(r["moves"] == 2, f"moves {r['moves']} != 2")
    check(r["workers"] == 3, f"workers {r['workers']} != 3")
    for t, want in ((7, [1, 0, 1]), (25, [0, 1, 1]), (35, [0, 0, 1])):
        got = mod.per_worker_at(r, t)
        check(got == want, f"t={t}: {got} != {want}")
    out = subprocess.run([sys.executable, script, workdir, "hand", "--at", "25"], check=True,
                         capture_output=True, text=True).stdout
    check("2 sessions, 2 moves" in out and "0 / 1 / 1" in out, f"printed: {out}")
    # A decisions file that does not belong to the requests file is refused.
    write_run(workdir, "bad", turns)
    rows = open(os.path.join(workdir, "bad_decisions.csv")).read().replace(",100\n", ",101\n")
    open(os.path.join(workdir, "bad_decisions.csv"), "w").write(rows)
    bad = subprocess.run([sys.executable, script, workdir, "bad"], capture_output=True, text=True)
    check(bad.returncode != 0 and "does not match" in bad.stderr, "mismatched join refused")


def real_run(mod, kvroute, workdir):
    # 8 sessions of 3 turns on 2 workers: every session is somewhere while it runs, and the
    # per-worker counts add up to the sessions running at that time.
    cmd = [kvroute, "simulate", "--workers", "2", "--num-gpu-blocks", "1500", "--concurrency", "8",
           "--sessions", "8", "--turns", "3", "--no-plots", "--no-progress", "--out", workdir,
           "--label", "real"]
    subprocess.run(cmd, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    r = mod.analyse(workdir, "real")
    check(len(r["sessions"]) == 8, f"sessions {len(r['sessions'])} != 8")
    check(all(len(v) == 3 for v in r["sessions"].values()), "3 turns per session")
    check(0 <= r["moves"] <= 16, f"moves {r['moves']}")
    first_end = min(v[-1][1] for v in r["sessions"].values())
    check(sum(mod.per_worker_at(r, first_end / 2)) == 8, "every session placed mid-run")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kvroute", required=True)
    ap.add_argument("--script", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.workdir, ignore_errors=True)
    os.makedirs(a.workdir)
    mod = load(a.script)
    hand_made(mod, a.script, a.workdir)
    real_run(mod, a.kvroute, a.workdir)
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
