"""Which of a running server's code is resident, by crate (#18's idle-memory row).

Reads /proc/PID/pagemap (as root) for the binary's executable mapping and shares
each resident 4 KiB page among the crates whose functions lie on it, by the
symbol table (release builds keep it). Approximate: generic code is counted
under the crate its symbol names first, and the kernel maps up to 64 KiB around
each page touched (fault-around), so a crate touched once shows 16 pages.

    switchyard serve & python3 loadtest/resident-code.py $! target/release/switchyard
"""
import bisect, collections, re, struct, subprocess, sys
pid, binary = sys.argv[1], sys.argv[2]
PAGE = 4096
# LOAD segments: vaddr <-> file offset
segs = []
for line in subprocess.run(["readelf", "-lW", binary], capture_output=True, text=True).stdout.splitlines():
    p = line.split()
    if p and p[0] == "LOAD":
        off, vaddr, filesz = int(p[1], 16), int(p[2], 16), int(p[4], 16)
        segs.append((off, vaddr, filesz))
syms = []
for line in subprocess.run(["nm", "-S", "-n", "-C", "--defined-only", binary], capture_output=True, text=True).stdout.splitlines():
    p = line.split(" ", 3)
    if len(p) == 4 and p[2] in "tTwW":
        syms.append((int(p[0], 16), int(p[1], 16), p[3]))
syms.sort()
starts = [s[0] for s in syms]
def crate(name):
    n = name.lstrip("<&*( ")
    n = re.sub(r"^(dyn |impl |mut |const )", "", n)
    # `<T as tokio::...>`: a generic type is named by the trait it implements.
    if re.match(r"^[A-Z]\w*( as |,)", n) and " as " in n:
        n = n.split(" as ", 1)[1]
    m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)", n)
    return m.group(1) if m else "?"
resident = collections.Counter()
total_pages = 0
with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/pagemap", "rb") as pm:
    for line in maps:
        p = line.split()
        if len(p) < 6 or not p[5].endswith(binary.split("/")[-1]) or "x" not in p[1]:
            continue
        lo, hi = (int(x, 16) for x in p[0].split("-"))
        off = int(p[2], 16)
        for addr in range(lo, hi, PAGE):
            pm.seek(addr // PAGE * 8)
            entry = struct.unpack("<Q", pm.read(8))[0]
            if not entry >> 63 & 1:
                continue
            total_pages += 1
            fo = off + (addr - lo)
            va = next((v + fo - o for o, v, fs in segs if o <= fo < o + fs), None)
            if va is None:
                continue
            # The symbols starting before the page's end, back to 64 KiB
            # before it (longer functions are rare enough to miss).
            seen = collections.Counter()
            near = slice(bisect.bisect_left(starts, va - (1 << 16)), bisect.bisect_right(starts, va + PAGE))
            for a, size, n in syms[near]:
                overlap = min(a + size, va + PAGE) - max(a, va)
                if overlap > 0:
                    seen[crate(n)] += overlap
            tot = sum(seen.values()) or 1
            for c, b in seen.items():
                resident[c] += PAGE * b / tot
attributed = sum(resident.values())
print(f"resident code: {total_pages * PAGE / 2**20:.1f} MiB, "
      f"{(total_pages * PAGE - attributed) / 2**20:.1f} MiB of it on no symbol the table names")
for c, b in resident.most_common(40):
    print(f"{b / 2**20:7.2f} MiB  {c}")
