#!/usr/bin/python3
"""Per level, for each kvroute router of a compare folder: which worker served each turn of each
session (serve.log request lines matched to the client's per-request CSV: levels run one after
another, so the log's lines split by level counts; within a level by prompt length, ties in
completion order). Prints turns >= 1 kept on the previous turn's worker, moves per session,
mean cached fraction (router's cached_blocks x 16 / prompt tokens)."""
import csv, collections, glob, os, re, sys

out = sys.argv[1]
line_re = re.compile(r"worker=(\S+) status=(\d+).* prompt_tokens=(\d+) cached_blocks=(\d+)")
print("| router | level | turns (>=1) | same worker as previous turn | moves per session | mean cached fraction (turns >= 1) |")
print("|---|---|---:|---:|---:|---:|")
traces = {}
for d in sorted(glob.glob(os.path.join(out, "cluster", "kvroute_*"))):
    name = os.path.basename(d)
    log = os.path.join(d, name, "serve.log")
    req = os.path.join(out, name + "_requests.csv")
    if not os.path.exists(log) or not os.path.exists(req):
        continue
    lines = []
    for l in open(log):
        m = line_re.search(l)
        if m and " request " in l:
            lines.append((m.group(1), int(m.group(3)), int(m.group(4))))
    rows = list(csv.DictReader(open(req)))
    levels = []
    for r in rows:
        if not levels or levels[-1][0] != r["level"]:
            levels.append((r["level"], []))
        levels[-1][1].append(r)
    pos = 0
    for level, rs in levels:
        chunk = lines[pos:pos + len(rs)]
        pos += len(rs)
        by_len = collections.defaultdict(list)
        for w, p, cb in chunk:
            by_len[p].append((w, cb))
        rs_sorted = sorted(rs, key=lambda r: float(r["start_s"]) + float(r["e2e_s"]))
        where = {}
        for r in rs_sorted:
            q = by_len.get(int(r["prompt_tokens"]))
            if q:
                where[(int(r["session"]), int(r["turn"]))] = q.pop(0) + (int(r["prompt_tokens"]),)
        sessions = collections.defaultdict(dict)
        for (s, t), v in where.items():
            sessions[s][t] = v
        same = turns = moves = 0
        cached = []
        for s, ts in sessions.items():
            for t in sorted(ts):
                if t == 0 or (t - 1) not in ts:
                    continue
                turns += 1
                if ts[t][0] == ts[t - 1][0]:
                    same += 1
                else:
                    moves += 1
                cached.append(ts[t][1] * 16 / ts[t][2])
        traces[(name, level)] = {s: "".join(ts[t][0][-1] for t in sorted(ts)) for s, ts in sessions.items()}
        if turns:
            print(f"| {name.replace('kvroute_', 'kvroute:', 1)} | {level} | {turns} | {same/turns:.2f} | {moves/max(1,len(sessions)):.1f} | {sum(cached)/len(cached):.2f} |")
if len(sys.argv) > 2:
    for (name, level), t in traces.items():
        if level == sys.argv[2]:
            print(name, level, " ".join(f"s{s:02d}:{v}" for s, v in sorted(t.items())))
