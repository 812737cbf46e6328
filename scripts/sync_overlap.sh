#!/usr/bin/env bash
# scripts/sync_overlap.sh [BIN]: strace the ledger members' sync threads for 3 s of a 4x64 run and
# report whether their long syncs overlap in time (a device-wide stall) or not.
cd "$(dirname "$0")/.."
bin=${1:-target/release/basalt}
out=$(mktemp -d /tmp/synccorr.XXXX)
( BENCH_CONSUME=0 CLIENT_BIN=${CLIENT_BIN:-target/release/basalt} BASALT_BIN=$bin scripts/bench.sh ledger3 --threads 4 --window 64 -s 1024 -d 7 > $out/bench.log 2>&1 ) &
bp=$!
sleep 3
k=0
for p in $(pgrep -f "broker -c ${TMPDIR:-/tmp}/basalt-bench"); do
  k=$((k+1))
  for tdir in /proc/$p/task/*; do c=$(cat $tdir/comm); case $c in ledger-io*|ledger-ckpt*)
    timeout 3 strace -T -tt -e trace=msync,fdatasync,fsync -p $(basename $tdir) -o $out/s.m$k.$c.$(basename $tdir) 2>/dev/null & ;; esac; done
done
wait $bp; wait
python3 - $out <<'PY'
import sys,glob,re,collections
iv=collections.defaultdict(list)
for f in glob.glob(sys.argv[1]+'/s.*'):
    m=f.split('/')[-1].split('.')[1]
    for l in open(f):
        a=re.match(r'(\d+):(\d+):([\d.]+) .*<([\d.]+)>$',l.strip())
        if a:
            t=int(a[1])*3600+int(a[2])*60+float(a[3]); d=float(a[4])
            iv[m].append((t,t+d,d))
members=sorted(iv)
for th in (5,10,20):
    longs={m:[x for x in iv[m] if x[2]*1000>=th] for m in members}
    tot=sum(len(v) for v in longs.values())
    ov=0
    for m in members:
        for (s,e,d) in longs[m]:
            if any(s2<e and s<e2 for m2 in members if m2!=m for (s2,e2,d2) in longs[m2]): ov+=1
    print(f">= {th:2d} ms: {tot} syncs over {len(members)} members; {ov} overlap a long sync of another member")
for m in members:
    d=sorted(x[2]*1000 for x in iv[m]); n=len(d)
    print(f"{m}: n={n} p50={d[n//2]:.2f} p99={d[int(n*.99)]:.2f} max={d[-1]:.2f} ms")
PY
grep -E 'total|latency' $out/bench.log
