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


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--ftjit', required=True)
    p.add_argument('--target', required=True)
    p.add_argument('--work', required=True)
    p.add_argument('--format', required=True, choices=['text', 'chrome', 'perfetto'])
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
