import csv,gzip,sys
w=sys.argv[1]
rows=list(csv.reader(gzip.open(f'sass-{w}.csv.gz','rt')))
h=rows[1]; data=rows[2:]
ia=h.index('Address'); isrc=h.index('Source'); isamp=h.index('Warp Stall Sampling (All Samples)'); iex=h.index('Instructions Executed'); ith=h.index('Avg. Threads Executed')
tot=sum(int(r[iex]) for r in data); ts=sum(int(r[isamp]) for r in data)
print(w,'total inst',tot,'samples',ts,'ninstr',len(data))
for i,r in enumerate(data):
    ex=int(r[iex]); s=int(r[isamp])
    if ex>0 or s>0:
        print(f"{i:5d} {ex:10d} {s:6d} {r[ith]:>5s} {r[isrc].strip()[:90]}")
