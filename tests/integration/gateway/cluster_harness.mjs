// Starts the Python cluster harness (cluster.py: 2 sims behind `kvroute serve`) for the node
// client tests. The harness prints the gateway port and keeps everything up until its stdin
// closes; then it stops what it started, by pid.
import { spawn } from 'node:child_process';

export async function startCluster(binary) {
  const harness = spawn('/usr/bin/python3', ['-c', `
import sys
sys.path.insert(0, ${JSON.stringify(new URL('.', import.meta.url).pathname)})
from cluster import Cluster
with Cluster(sys.argv[1], n=2, speedup=50) as c:
    print("PORT", c.port, flush=True)
    sys.stdin.read()
`, binary], { stdio: ['pipe', 'pipe', 'inherit'] });
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('cluster not ready')), 60000);
    let out = '';
    harness.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/PORT (\d+)/);
      if (m) { clearTimeout(timer); resolve(Number(m[1])); }
    });
    harness.on('exit', (code) => reject(new Error(`harness exited ${code}`)));
  });
  // Closes the harness's stdin and waits (bounded) for it to stop the cluster.
  const stop = () => {
    harness.stdin.end();
    return new Promise((resolve) => {
      const t = setTimeout(() => { harness.kill('SIGKILL'); resolve(); }, 20000);
      harness.on('exit', () => { clearTimeout(t); resolve(); });
    });
  };
  return { port, stop };
}
