#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`ftjit run --args` end to end: runs the fixture (args_target.c) under
ftjit with the trace plugin and checks each format against the oracle the
fixture wrote with its own printf of the same values.

  check_args.py --ftjit CLI --target EXE --work DIR --format text|chrome|perfetto
                [--proto DIR] [--when COND]... [--expect-calls NAME=N,...]
                [--strip debuglink]

text:     every oracle line is a line of the trace (after its `| ` columns
          and indentation), in order.
chrome:   every oracle call is a B event whose args (minus "caller") and
          E event's "return", shown as text shows them, give the line.
perfetto: the same from the slices' debug annotations, decoded by protoc
          with perfetto_subset.proto (an oracle independent of our encoder).
--by-arg: `--plugin count|latency --format text|json --by-arg NAME`: one
          row per (function, value of NAME) with the oracle's number of
          calls, one row per function without NAME.
--when:   only the oracle lines of calls the conditions accept are in the
          trace (--expect-calls: how many of each function), and nothing else.
"""
import argparse
import json
import os
import re
import subprocess
import sys


def fail(message):
    print('FAIL: ' + message)
    sys.exit(1)


def oracle_calls(path):
    """[(name, args_text, return_text)] from the fixture's oracle lines."""
    calls = []
    for line in open(path, encoding='utf-8'):
        line = line.rstrip('\n')
        m = re.match(r'^(.*?)\((.*)\) = (.*);$', line)
        if not m:
            fail(f'oracle line not understood: {line!r}')
        calls.append((m.group(1), m.group(2), m.group(3)))
    return calls


def text_calls(path):
    """The leaf calls of the function-graph text: (name, args, return)."""
    calls = []
    for line in open(path, encoding='utf-8', errors='replace'):
        if line.startswith('#'):
            continue
        parts = line.rstrip('\n').split('| ', 2)
        if len(parts) < 3:
            continue
        body = parts[2].strip()
        m = re.match(r'^(.*?)\((.*)\) = (.*);$', body)
        if m:
            calls.append((m.group(1), m.group(2), m.group(3)))
    return calls


def bare(name):
    """A demangled C++ name without its parameter list, as text shows it
    when the values take the list's place."""
    return re.sub(r'\(.*\)$', '', name)


def shown(value):
    """A JSON or protoc-decoded value as the text format shows it."""
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, float) and value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def chrome_calls(path):
    data = json.load(open(path, encoding='utf-8'))
    open_calls = {}
    calls = []
    for e in data['traceEvents']:
        if e.get('ph') == 'B':
            args = {k: v for k, v in e.get('args', {}).items() if k != 'caller'}
            open_calls.setdefault(e['tid'], []).append((e['name'], args))
        elif e.get('ph') == 'E':
            name, args = open_calls[e['tid']].pop()
            ret = e.get('args', {}).get('return')
            text = ', '.join(f'{k}={shown(v)}' for k, v in args.items())
            calls.append((bare(name), text, None if ret is None else shown(ret)))
    return calls


def perfetto_calls(trace, proto_dir, work):
    decoded = subprocess.run(
        ['protoc', '-I', proto_dir, '--decode=perfetto_subset.Trace',
         os.path.join(proto_dir, 'perfetto_subset.proto')],
        stdin=open(trace, 'rb'), capture_output=True, text=True)
    if decoded.returncode != 0:
        fail('protoc --decode failed: ' + decoded.stderr)
    open(os.path.join(work, 'decoded.txt'), 'w').write(decoded.stdout)
    # Walk the text format: per packet, its sequence's interned names, the
    # event's type, name iid and annotations.
    names = {}
    open_calls = {}
    calls = []
    packet = None
    depth = 0
    annotation = None
    for raw in decoded.stdout.splitlines():
        line = raw.strip()
        if line.endswith('{'):
            key = line[:-1].strip()
            depth += 1
            if key == 'packet':
                packet = {'annotations': [], 'seq': None, 'iid': None, 'type': None, 'names': []}
            elif key == 'debug_annotations':
                annotation = {}
            elif key == 'event_names':
                packet['names'].append({})
            continue
        if line == '}':
            depth -= 1
            if annotation is not None and depth == 2:
                packet['annotations'].append(annotation)
                annotation = None
            if depth == 0 and packet is not None:
                seq = packet['seq']
                for n in packet['names']:
                    names[(seq, int(n['iid']))] = n['name']
                if packet['type'] == 'TYPE_SLICE_BEGIN':
                    name = names.get((seq, int(packet['iid'])), '?')
                    open_calls.setdefault(seq, []).append((name, packet['annotations']))
                elif packet['type'] == 'TYPE_SLICE_END':
                    name, args = open_calls[seq].pop()
                    ret = [a['value'] for a in packet['annotations'] if a.get('name') == 'return']
                    text = ', '.join(f"{a['name']}={a['value']}" for a in args)
                    calls.append((bare(name), text, ret[0] if ret else None))
                packet = None
            continue
        key, _, value = line.partition(': ')
        if annotation is not None:
            if key == 'name':
                annotation['name'] = decode_protoc_string(value)
            elif key == 'string_value':
                annotation['value'] = decode_protoc_string(value)
            elif key in ('int_value', 'uint_value'):
                annotation['value'] = value
            elif key == 'pointer_value':
                annotation['value'] = hex(int(value))
            elif key == 'double_value':
                annotation['value'] = shown(float(value))
            elif key == 'bool_value':
                annotation['value'] = value
            continue
        if packet is None:
            continue
        if key == 'trusted_packet_sequence_id':
            packet['seq'] = int(value)
        elif key == 'type':
            packet['type'] = value
        elif key == 'name_iid':
            packet['iid'] = value
        elif key == 'iid' and packet['names']:
            packet['names'][-1]['iid'] = value
        elif key == 'name' and packet['names']:
            packet['names'][-1]['name'] = decode_protoc_string(value)
    return calls


def decode_protoc_string(value):
    """protoc's text format string: C escapes of the bytes, quoted."""
    inner = value[1:-1]
    out = bytearray()
    i = 0
    while i < len(inner):
        c = inner[i]
        if c != '\\':
            out += c.encode('utf-8')
            i += 1
            continue
        n = inner[i + 1]
        if n in '01234567':
            j = i + 1
            while j < len(inner) and j < i + 4 and inner[j] in '01234567':
                j += 1
            out.append(int(inner[i + 1:j], 8))
            i = j
            continue
        out += {'n': b'\n', 't': b'\t', 'r': b'\r', '"': b'"', "'": b"'", '\\': b'\\'}.get(n, n.encode())
        i += 2
    return out.decode('utf-8', errors='replace')


def split_args(text):
    """name=value pairs of an oracle line's argument list, split at the
    top-level commas (not inside quotes or braces)."""
    parts, depth, quote, cur, i = [], 0, None, '', 0
    while i < len(text):
        c = text[i]
        if quote:
            cur += c
            if c == '\\' and i + 1 < len(text):
                cur += text[i + 1]
                i += 1
            elif c == quote:
                quote = None
        elif c in '"\'':
            quote = c
            cur += c
        elif c == '{':
            depth += 1
            cur += c
        elif c == '}':
            depth -= 1
            cur += c
        elif c == ',' and depth == 0 and text[i:i + 2] == ', ':
            parts.append(cur)
            cur = ''
            i += 1
        else:
            cur += c
        i += 1
    if cur:
        parts.append(cur)
    pairs = {}
    for part in parts:
        if '=' in part:
            name, value = part.split('=', 1)
            pairs[name] = value
    return pairs


def by_arg_rows(a, out_path):
    """{(function, value or None): calls} from a count or latency report."""
    rows = {}
    text = open(out_path, encoding='utf-8', errors='replace').read()
    label = re.compile(r'^(.*?) \[' + re.escape(a.by_arg) + r'=(.*)\]$')

    def add(name, calls):
        m = label.match(name)
        key = (bare(m.group(1)), m.group(2)) if m else (bare(name), None)
        if key in rows:
            fail(f'two rows for {key}')
        rows[key] = calls

    if a.format == 'json':
        doc = json.loads(text)
        if doc.get('by_arg') != a.by_arg:
            fail(f'json by_arg {doc.get("by_arg")!r}, want {a.by_arg!r}')
        for f in doc['functions']:
            calls = f['calls'] if a.plugin == 'count' else f['count']
            if 'arg' in f:
                if f['arg'] != a.by_arg:
                    fail(f'json arg {f["arg"]!r}')
                # The typed value agrees with the text.
                v = f['value']
                if isinstance(v, bool):
                    if ('true' if v else 'false') != f['text']:
                        fail(f'json value {v!r} vs text {f["text"]!r}')
                elif isinstance(v, int):
                    if str(v) != f['text']:
                        fail(f'json value {v!r} vs text {f["text"]!r}')
                key = (bare(f['name']), f['text'])
            else:
                key = (bare(f['name']), None)
            if key in rows:
                fail(f'two rows for {key}')
            rows[key] = calls
    elif a.plugin == 'count':
        lines = text.splitlines()
        if not lines or not re.match(r'^\s*CALLS  FUNCTION \[' + re.escape(a.by_arg) + r'=VALUE\]$', lines[0]):
            fail(f'count header: {lines[:1]!r}')
        for line in lines[1:]:
            m = re.match(r'^\s*([0-9]+)  (.*)$', line)
            if m:
                add(m.group(2), int(m.group(1)))
    else:  # latency text: "@NAME [ARG=VALUE]:" ... "count N, ..."
        name = None
        for line in text.splitlines():
            m = re.match(r'^@(.*):$', line)
            if m:
                name = m.group(1)
                continue
            m = re.match(r'^count ([0-9]+), ', line)
            if m and name is not None:
                add(name, int(m.group(1)))
                name = None
    return rows


def check_by_arg(a, oracle):
    out_path = os.path.join(a.work, 'report.' + a.format)
    cmd = [a.ftjit, 'run', '--plugin', a.plugin, '--format', a.format, '--by-arg', a.by_arg,
           '--filter', 'args_*', '--filter', '*Counter*', '-o', out_path]
    for e in a.exclude:
        cmd += ['--exclude', e]
    cmd += ['--', a.target, oracle]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    if a.expect_error:
        if r.returncode == 0:
            fail(f'{" ".join(cmd)}: exit 0, want an error')
        if not re.search(a.expect_error, r.stderr):
            fail(f'stderr {r.stderr!r} lacks /{a.expect_error}/')
        print(f'ok: refused: {r.stderr.strip()}')
        return
    if r.returncode != 0:
        fail(f'{" ".join(cmd)}: exit {r.returncode}: {r.stderr}')
    want = {}
    for name, args_text, _ in oracle_calls(oracle):
        value = split_args(args_text).get(a.by_arg)
        want[(name, value)] = want.get((name, value), 0) + 1
    # Excluded functions are not traced: not expected either.
    import fnmatch
    want = {k: v for k, v in want.items() if not any(fnmatch.fnmatchcase(k[0], e) for e in a.exclude)}
    names = {name for name, _ in want}
    got = {k: v for k, v in by_arg_rows(a, out_path).items() if k[0] in names}
    if got != want:
        for k in sorted(set(got) | set(want), key=str):
            if got.get(k) != want.get(k):
                print(f'  {k}: got {got.get(k)}, want {want.get(k)}')
        fail(f'{a.plugin} {a.format} --by-arg {a.by_arg}: the rows are not the oracle\'s')
    grouped = sum(1 for _, v in want if v is not None)
    if grouped == 0:
        fail(f'no oracle call has {a.by_arg}: the test tests nothing')
    print(f'ok: {len(want)} rows ({grouped} by {a.by_arg}) match the oracle in {a.plugin} {a.format}')


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--ftjit', required=True)
    p.add_argument('--target', required=True)
    p.add_argument('--work', required=True)
    p.add_argument('--format', required=True, choices=['text', 'chrome', 'perfetto', 'json'])
    p.add_argument('--plugin', default='trace', choices=['trace', 'count', 'latency'])
    p.add_argument('--by-arg', help='count/latency --by-arg NAME: the rows against the oracle')
    p.add_argument('--exclude', action='append', default=[], help='with --by-arg: ftjit --exclude GLOB')
    p.add_argument('--expect-error', help='with --by-arg: ftjit must fail, stderr matching this')
    p.add_argument('--proto')
    p.add_argument('--when', action='append', default=[])
    p.add_argument('--expect-calls', default='')
    p.add_argument('--strip', choices=['debuglink'],
                   help='trace a stripped copy whose DWARF is in a .debug file beside it')
    a = p.parse_args()
    os.makedirs(a.work, exist_ok=True)
    if a.strip == 'debuglink':
        # objcopy --only-keep-debug, strip, --add-gnu-debuglink: what
        # distributions ship (the .debug file beside the program here).
        stripped = os.path.join(a.work, 'args_target')
        debug = stripped + '.debug'
        for c in (['objcopy', '--only-keep-debug', a.target, debug],
                  ['strip', '--strip-debug', '--remove-section=.gnu_debuglink', '-o', stripped, a.target],
                  ['objcopy', '--add-gnu-debuglink=' + debug, stripped]):
            r = subprocess.run(c, capture_output=True, text=True)
            if r.returncode != 0:
                fail(f'{" ".join(c)}: {r.stderr}')
        if subprocess.run(['readelf', '-S', stripped], capture_output=True, text=True).stdout.count('.debug_info'):
            fail('the stripped copy still has .debug_info')
        a.target = stripped
    oracle = os.path.join(a.work, 'oracle.txt')
    if a.by_arg:
        check_by_arg(a, oracle)
        return
    trace = os.path.join(a.work, 'trace.' + a.format)
    cmd = [a.ftjit, 'run', '--plugin', 'trace', '--format', a.format, '--args',
           '--filter', 'args_*', '--filter', '*Counter*', '-o', trace]
    for w in a.when:
        cmd += ['--when', w]
    cmd += ['--', a.target, oracle]
    env = dict(os.environ)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=240)
    if r.returncode != 0:
        fail(f'{" ".join(cmd)}: exit {r.returncode}: {r.stderr}')
    want = oracle_calls(oracle)
    if a.format == 'text':
        got = text_calls(trace)
    elif a.format == 'chrome':
        got = chrome_calls(trace)
    else:
        got = perfetto_calls(trace, a.proto, a.work)
    # Calls the oracle does not speak of (args_method_call, which makes
    # Counter::add's call) are not compared.
    # The typed formats carry the named values only: a variadic's `...`
    # is text's.
    if a.format != 'text':
        want = [(n, re.sub(r'(^|, )\.\.\.$', '', t), r) for n, t, r in want]
    names = {name for name, _, _ in want}
    got = [call for call in got if call[0] in names]
    # The oracle's calls, in order, each once; a call the trace shows that
    # the oracle has not is only allowed when --when left the oracle's out.
    if a.expect_calls:
        counts = {}
        for name, _, _ in got:
            counts[name] = counts.get(name, 0) + 1
        for item in a.expect_calls.split(','):
            name, n = item.split('=')
            if counts.get(name, 0) != int(n):
                fail(f'{name}: {counts.get(name, 0)} calls recorded, want {n} ({a.when})')
        # Each recorded call must be the oracle's call with those values.
        oracle_set = set(want)
        for call in got:
            if call not in oracle_set:
                fail(f'recorded call not in the oracle: {call}')
        print(f'ok: {len(got)} calls, as --when {a.when} selects')
        return
    if len(got) != len(want):
        print('\n'.join(map(str, got)))
        fail(f'{len(got)} calls in the {a.format} trace, {len(want)} in the oracle')
    for g, w in zip(got, want):
        if g != w:
            fail(f'{a.format}: got {g}\n      want {w}')
    print(f'ok: {len(got)} calls match the oracle in {a.format}')


if __name__ == '__main__':
    main()
