// Starts `kvroute sim` on a free loopback port and reads the address from its ready line.
// Every wait is bounded; the process is stopped by its pid only.
import { spawn } from 'node:child_process';

export function startSim(binary, extraArgs = [], { readyTimeoutMs = 20000 } = {}) {
  const args = ['sim', '--host', '127.0.0.1', '--port', '0',
                '--kv-events-endpoint', 'tcp://127.0.0.1:*', ...extraArgs];
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const ready = new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`sim not ready in ${readyTimeoutMs} ms: ${stderr}`)),
                             readyTimeoutMs);
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on http:\/\/([^\s]+):(\d+) model=(\S+)/);
      if (m) {
        clearTimeout(timer);
        resolve({ host: m[1], port: Number(m[2]), model: m[3] });
      }
    });
    exited.then(({ code }) => reject(new Error(`sim exited early (${code}): ${stderr}`)));
  });
  return {
    child, exited, ready,
    stderr: () => stderr,
    // Bounded wait for exit; kills (by pid) if it overruns.
    async waitExit(timeoutMs) {
      let timer;
      const overrun = new Promise((resolve) => {
        timer = setTimeout(() => { child.kill('SIGKILL'); resolve({ code: null, signal: 'timeout' }); },
                           timeoutMs);
      });
      const r = await Promise.race([exited, overrun]);
      clearTimeout(timer);
      return r;
    },
  };
}

export function check(cond, message) {
  if (!cond) throw new Error(`check failed: ${message}`);
}

// Runs named async cases in order; prints one line per case; exits 1 on any failure or when
// cleanup returns false.
export async function runCases(cases, cleanup) {
  let failed = 0;
  for (const [name, fn] of cases) {
    try {
      await fn();
      console.log(`ok   ${name}`);
    } catch (e) {
      failed++;
      console.log(`FAIL ${name}: ${e.stack || e}`);
    }
  }
  if (cleanup && (await cleanup()) === false) failed++;
  process.exit(failed ? 1 : 0);
}
