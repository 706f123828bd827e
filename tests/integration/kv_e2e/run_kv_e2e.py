"""Driver of the KV index end-to-end check: starts `kvroute sim` on loopback (HTTP and both
KV event sockets on OS-chosen ports, read back from its ready line), runs kv_e2e_check
against it, and stops the sim by its pid.

The sim is small on purpose (64 GPU blocks of 16 tokens, 96 CPU blocks) so the workload
evicts from the GPU to the CPU tier and out of the CPU tier.

Usage: python3 run_kv_e2e.py <kvroute> <kv_e2e_check> [--drop-every N] [--no-replay]
  --drop-every N  the sim loses every Nth batch on the wire (kept for replay); the check
                  then also requires gaps > 0 and replayed > 0.
  --no-replay     the check subscribes without the replay endpoint (to show the test fails
                  when gaps cannot be repaired; not registered with CTest).
"""
import re
import select
import signal
import subprocess
import sys
import time


def main():
    kvroute, checker = sys.argv[1], sys.argv[2]
    rest = sys.argv[3:]
    drop_every = None
    no_replay = "--no-replay" in rest
    if "--drop-every" in rest:
        drop_every = rest[rest.index("--drop-every") + 1]
    cmd = [kvroute, "sim", "--host", "127.0.0.1", "--port", "0", "--speedup", "50",
           "--served-model-name", "m", "--num-gpu-blocks", "64", "--num-cpu-blocks", "96",
           "--kv-events-endpoint", "tcp://127.0.0.1:*",
           "--kv-events-replay-endpoint", "tcp://127.0.0.1:*", "--log-level", "warn"]
    if drop_every:
        cmd += ["--kv-events-drop-every", drop_every]
    sim = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([sim.stdout], [], [], 30)
        line = sim.stdout.readline() if ready else ""
        m = re.search(r"listening on (http://\S+) model=\S+ kv_events=(\S+) kv_replay=(\S+)", line)
        if not m:
            print(f"FAIL sim not ready: {line!r} {sim.stderr.read() if sim.poll() is not None else ''}")
            return 1
        url, events, replay = m.group(1), m.group(2), m.group(3)
        args = [checker, "--url", url, "--events", events, "--expect-cpu"]
        if not no_replay:
            args += ["--replay", replay]
        if drop_every:
            args += ["--expect-gaps"]
        print("running:", " ".join(args), flush=True)
        try:
            rc = subprocess.run(args, timeout=90).returncode
        except subprocess.TimeoutExpired:
            print("FAIL kv_e2e_check timed out")
            rc = 1
        return rc
    finally:
        sim.send_signal(signal.SIGTERM)
        try:
            sim.wait(timeout=10)
        except subprocess.TimeoutExpired:
            sim.kill()
            sim.wait(timeout=10)


if __name__ == "__main__":
    t0 = time.monotonic()
    code = main()
    print(f"exit {code} after {time.monotonic() - t0:.1f} s")
    sys.exit(code)
