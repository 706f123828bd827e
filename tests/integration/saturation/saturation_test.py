"""scripts/kv-tiers/saturation.py against a hand-computed run and a real simulate run."""
import argparse
import csv
import importlib.util
import json
import os
import shutil
import subprocess
import sys

HEADER = ["label", "level", "session", "turn", "ok", "error_kind", "start_s", "ttft_s", "e2e_s",
          "tpot_s", "itl_count", "prompt_tokens", "output_tokens", "cached_tokens"]


def load(script):
    spec = importlib.util.spec_from_file_location("saturation", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def write_run(workdir, label, gpus, requests):
    with open(os.path.join(workdir, label + ".json"), "w") as f:
        json.dump({"gpus": gpus, "levels": [{"name": "c=2"}]}, f)
    with open(os.path.join(workdir, label + "_requests.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(HEADER)
        for session, turn, start, e2e, tokens, ok in requests:
            w.writerow([label, "c=2", session, turn, ok, "", start, 0.1, e2e, 0, 0, tokens - 10, 10,
                        0])


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        sys.exit(1)


def hand_computed(mod, workdir):
    # Two sessions on 2 GPUs. Session 0 ends at 10 s, session 1 at 20 s. With full = 1.0 the
    # phase ends when the first session ends (10 s): requests done by then carry
    # 1000 + 3000 tokens -> 4000 / 10 / 2 = 200 tok/s/GPU. All tokens 4000 + 2000 = 6000 over
    # the 20 s makespan: 150 tok/s/GPU; the ideal makespan 6000 / (200 * 2) = 15 s: tail 0.75.
    # A failed request is left out everywhere.
    write_run(workdir, "hand", 2, [
        (0, 0, 0.0, 10.0, 1000, 1),
        (1, 0, 0.0, 4.0, 3000, 1),
        (1, 1, 4.0, 16.0, 2000, 1),
        (1, 2, 20.0, 1.0, 99999, 0),
    ])
    a = mod.analyse(workdir, "hand", 1.0)
    check(abs(a["goodput"] - 150) < 1e-9, f"goodput {a['goodput']} != 150")
    check(abs(a["saturated"] - 200) < 1e-9, f"saturated {a['saturated']} != 200")
    check(abs(a["phase"] - 10) < 1e-9, f"phase {a['phase']} != 10")
    check(abs(a["tail"] - 0.75) < 1e-9, f"tail {a['tail']} != 0.75")
    check(abs(a["mean_end"] - 15) < 1e-9, f"mean end {a['mean_end']} != 15")


def real_run(mod, kvroute, script, workdir):
    cmd = [kvroute, "simulate", "--workers", "2", "--num-gpu-blocks", "1500", "--concurrency", "8",
           "--sessions", "8", "--turns", "3", "--no-plots", "--no-progress", "--out", workdir,
           "--label", "real"]
    subprocess.run(cmd, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    report = json.load(open(os.path.join(workdir, "real.json")))
    reported = report["goodput"]["infera"][0]["tokens_per_s_per_gpu"]
    a = mod.analyse(workdir, "real", 0.9)
    check(abs(a["goodput"] - reported) <= 1e-6 * reported,
          f"makespan goodput {a['goodput']} != the report's {reported}")
    # Above 1 is possible: the phase's requests (early turns, short contexts) can be cheaper per
    # token than the rest; a tail far from 1 on 24 requests would be a wrong split.
    check(0.5 < a["tail"] < 1.5, f"tail {a['tail']} outside (0.5, 1.5)")
    check(a["saturated"] > 0 and a["phase"] <= a["makespan"], "phase inside the run")
    out = subprocess.run([sys.executable, script, workdir, "real"], check=True,
                         capture_output=True, text=True).stdout
    check("| real |" in out, "the table names the run")
    bad = subprocess.run([sys.executable, script, workdir, "real", "--full", "0"],
                         capture_output=True, text=True)
    check(bad.returncode != 0 and "--full" in bad.stderr, "--full 0 is refused")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kvroute", required=True)
    ap.add_argument("--script", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    mod = load(args.script)
    hand_computed(mod, args.workdir)
    real_run(mod, args.kvroute, args.script, args.workdir)
    print("ok")


if __name__ == "__main__":
    main()
