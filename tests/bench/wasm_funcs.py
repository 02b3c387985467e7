#!/usr/bin/env python3
"""What a wasm module's code is made of: bytes of code (function bodies) by crate, by module path
and by function, from the module's code section and name section (rustc keeps the names;
wasm-bindgen drops them unless --keep-debug, wasm-opt keeps what it is given).

    python3 tests/bench/wasm_funcs.py FILE.wasm [N] [--grep TEXT] [--readers]

N (default 25) rows per list. V8 tiers up a whole function at a time, so one giant hot function
is costly to optimize (BENCHMARKS.md, "The worker's wasm without wasm-opt"). Built with
`RUSTFLAGS="-C symbol-mangling-version=v0"` (names keep their generic arguments), `--readers`
sums serde's deserializers by the `serde_json` reader they were made for (`SliceRead`,
`StrRead`, `serde_json::Value`): every reader instantiates the whole tree of `Deserialize`
impls it reads again (BENCHMARKS.md, "What the page's wasm is made of").
"""
import argparse
import collections
import re


def leb(b, i):
    r = s = 0
    while True:
        x = b[i]
        i += 1
        r |= (x & 0x7F) << s
        s += 7
        if x < 0x80:
            return r, i


def sections(b):
    if b[:4] != b'\0asm':
        raise SystemExit('not a wasm module')
    i = 8
    while i < len(b):
        sid = b[i]
        n, i = leb(b, i + 1)
        yield sid, b[i:i + n]
        i += n


def functions(path):
    """(code bytes, name) of every function defined in the module."""
    b = open(path, 'rb').read()
    imported, sizes, names = 0, [], {}
    for sid, body in sections(b):
        if sid == 2:  # imports: functions imported take the first indices
            cnt, j = leb(body, 0)
            for _ in range(cnt):
                for _ in range(2):
                    n, j = leb(body, j)
                    j += n
                kind = body[j]
                j += 1
                if kind == 0:
                    _, j = leb(body, j)
                    imported += 1
                elif kind == 1:
                    j += 1
                    flags, j = leb(body, j)
                    _, j = leb(body, j)
                    if flags & 1:
                        _, j = leb(body, j)
                elif kind == 2:
                    flags, j = leb(body, j)
                    _, j = leb(body, j)
                    if flags & 1:
                        _, j = leb(body, j)
                elif kind == 3:
                    j += 2
        elif sid == 10:  # code
            cnt, j = leb(body, 0)
            for _ in range(cnt):
                n, k = leb(body, j)
                sizes.append(n)
                j = k + n
        elif sid == 0:
            n, j = leb(body, 0)
            if body[j:j + n] != b'name':
                continue
            j += n
            while j < len(body):
                sub = body[j]
                n, j = leb(body, j + 1)
                end = j + n
                if sub == 1:  # function names
                    cnt, k = leb(body, j)
                    for _ in range(cnt):
                        idx, k = leb(body, k)
                        n, k = leb(body, k)
                        names[idx] = body[k:k + n].decode('utf8', 'replace')
                        k += n
                j = end
    return [(sz, names.get(i + imported, '?')) for i, sz in enumerate(sizes)]


def path_of(name):
    """The path of a legacy-mangled name (`_ZN…E`), its hash dropped; else the name."""
    if not name.startswith('_ZN'):
        return [name]
    parts, s = [], name[3:]
    while s and s[0].isdigit():
        digits = re.match(r'\d+', s).group(0)
        n = int(digits)
        parts.append(s[len(digits):len(digits) + n])
        s = s[len(digits) + n:]
    return [p for p in parts if not re.fullmatch(r'h[0-9a-f]{16}', p)] or [name]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('wasm')
    ap.add_argument('top', type=int, nargs='?', default=25, help='rows per list')
    ap.add_argument('--grep', help='only functions whose name holds this text')
    ap.add_argument('--readers', action='store_true', help='serde deserializers by reader (v0 names)')
    a = ap.parse_args()
    fns = functions(a.wasm)
    if a.grep:
        fns = [(s, n) for s, n in fns if a.grep in n]
    print(f'{len(fns)} functions, {sum(s for s, _ in fns):,} bytes of code (function bodies)')
    by_crate, by_module = collections.Counter(), collections.Counter()
    for s, n in fns:
        p = path_of(n)
        by_crate[p[0]] += s
        by_module['::'.join(p[:3])] += s
    for title, c in (('crate (or impl)', by_crate), ('module', by_module)):
        print(f'\nby {title}:')
        for k, v in c.most_common(a.top):
            print(f'{v:>12,}  {k[:140]}')
    print('\nlargest functions:')
    for s, n in sorted(fns, reverse=True)[:a.top]:
        print(f'{s:>12,}  {"::".join(path_of(n))[:140]}')
    if a.readers:
        c = collections.Counter()
        for s, n in fns:
            if 'serde' in n and 'eserializ' in n:
                hits = sorted(set(re.findall(r'StrRead|SliceRead|IoRead|5value|serde_wasm_bindgen', n)))
                c[' + '.join(hits) or 'no reader named'] += s
        print('\nserde deserializers by reader:')
        for k, v in c.most_common():
            print(f'{v:>12,}  {k}')


if __name__ == '__main__':
    main()
