"""The largest functions of a WebAssembly module, by the size of their code:

    python3 tests/bench/wasm_funcs.py FILE.wasm [N]

Prints the function count, the code section's bytes, then the N (default 25) largest bodies
with their names from the `name` section when the module keeps one (rustc's output does;
wasm-bindgen drops it unless --keep-debug, wasm-opt keeps what it is given). V8 tiers up a
whole function at a time, so one giant hot function is costly to optimize (BENCHMARKS.md,
"The worker's wasm without wasm-opt").
"""

import sys


def leb(b, i):
    """An unsigned LEB128 at b[i]: (value, the index after it)."""
    r = s = 0
    while True:
        x = b[i]
        i += 1
        r |= (x & 0x7F) << s
        s += 7
        if x < 0x80:
            return r, i


def limits(b, j):
    """Skips a limits record (a flag byte, a minimum, a maximum when the flag says so)."""
    f = b[j]
    _, j = leb(b, j + 1)
    return leb(b, j)[1] if f & 1 else j


def main():
    b = open(sys.argv[1], "rb").read()
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    i, imported, sizes, names = 8, 0, [], {}
    while i < len(b):
        sid = b[i]
        n, i = leb(b, i + 1)
        end = i + n
        if sid == 2:  # imports: imported functions come first in the index space
            c, j = leb(b, i)
            for _ in range(c):
                for _ in range(2):  # module and field names
                    l, j = leb(b, j)
                    j += l
                kind = b[j]
                j += 1
                if kind == 0:
                    _, j = leb(b, j)
                    imported += 1
                elif kind == 1:
                    j = limits(b, j + 1)
                elif kind == 2:
                    j = limits(b, j)
                elif kind == 3:
                    j += 2
        elif sid == 10:  # code
            c, j = leb(b, i)
            for _ in range(c):
                l, j = leb(b, j)
                sizes.append(l)
                j += l
        elif sid == 0:  # custom: the `name` section's function names
            l, j = leb(b, i)
            if b[j : j + l] == b"name":
                j += l
                while j < end:
                    sub = b[j]
                    sl, j = leb(b, j + 1)
                    if sub == 1:
                        c, k = leb(b, j)
                        for _ in range(c):
                            idx, k = leb(b, k)
                            l2, k = leb(b, k)
                            names[idx] = b[k : k + l2].decode("utf8", "replace")
                            k += l2
                    j += sl
        i = end
    print(f"functions {len(sizes)}, code bytes {sum(sizes)}, named {len(names)}")
    for k in sorted(range(len(sizes)), key=lambda k: -sizes[k])[:top]:
        print(sizes[k], names.get(k + imported, "?")[:140])


if __name__ == "__main__":
    main()
