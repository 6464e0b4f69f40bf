#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Independent checks of the trace plugin's output, standard library only.

  check_trace.py perfetto DECODED.txt RAW.txt EXPECT.json [--relax-sequence-order]
      DECODED.txt is `protoc --decode=perfetto_subset.Trace` output (our own
      schema, perfetto_subset.proto), RAW.txt `protoc --decode_raw` output.
      --relax-sequence-order: timestamps need only be non-decreasing per
      track, not per packet sequence (only for the corruption tests; see
      CMakeLists.txt).
  check_trace.py chrome TRACE.json EXPECT.json
  check_trace.py mutate KIND IN OUT
      Writes a corrupted copy of IN (a trace or the schema) for the tests that
      show a broken file is caught.

EXPECT.json is what gen_trace printed: pid, process name, and per thread
its tid, name and number of calls per function. Exits 1 with a message on
the first violated rule.
"""
import codecs
import json
import re
import sys


class CheckError(Exception):
    pass


def fail(message):
    raise CheckError(message)


# ---------------------------------------------------------------------------
# protoc's text format, as --decode and --decode_raw print it
# ---------------------------------------------------------------------------

LINE = re.compile(r'^(\w+)(?:: (.*)| \{)$')


def parse_text_format(text):
    """A list of (key, value): value is a str (scalar as printed) or a list
    (a nested message). Numeric keys are fields the schema does not know."""
    root = []
    stack = [root]
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line == '}':
            if len(stack) == 1:
                fail(f'decoded text line {number}: unbalanced }}')
            stack.pop()
            continue
        m = LINE.match(line)
        if not m:
            fail(f'decoded text line {number}: cannot read {raw!r}')
        key, scalar = m.group(1), m.group(2)
        if scalar is None:
            child = []
            stack[-1].append((key, child))
            stack.append(child)
        else:
            stack[-1].append((key, scalar))
    if len(stack) != 1:
        fail('decoded text: unclosed message')
    return root


def unknown_fields(message, path):
    """Paths of fields printed by number, i.e. not in the schema."""
    found = []
    for key, value in message:
        here = f'{path}.{key}'
        if key.isdigit():
            found.append(here)
        if isinstance(value, list):
            found += unknown_fields(value, here)
    return found


def fields(message, key):
    return [v for k, v in message if k == key]


def one(message, key, path, required=True):
    values = fields(message, key)
    if len(values) > 1:
        fail(f'{path}: {key} given {len(values)} times')
    if not values:
        if required:
            fail(f'{path}: no {key}')
        return None
    return values[0]


def as_int(value, path):
    if not isinstance(value, str) or not re.fullmatch(r'-?\d+', value):
        fail(f'{path}: {value!r} is not an integer')
    return int(value)


def as_string(value, path):
    if not isinstance(value, str) or len(value) < 2 or value[0] != '"' or value[-1] != '"':
        fail(f'{path}: {value!r} is not a string')
    data = codecs.escape_decode(value[1:-1].encode('ascii', 'backslashreplace'))[0]
    return data.decode('utf-8', 'replace')


def opt_int(message, key, path):
    value = one(message, key, path, required=False)
    return None if value is None else as_int(value, f'{path}.{key}')


# ---------------------------------------------------------------------------
# Perfetto
# ---------------------------------------------------------------------------

SEQ_INCREMENTAL_STATE_CLEARED = 1
CLOCK_MONOTONIC = 3  # ClockSnapshot.Clock.BuiltinClocks
SEQ_NEEDS_INCREMENTAL_STATE = 2


def check_perfetto(decoded_path, raw_path, expect, sequence_order=True):
    with open(decoded_path, encoding='utf-8', errors='replace') as f:
        trace = parse_text_format(f.read())
    with open(raw_path, encoding='utf-8', errors='replace') as f:
        raw = parse_text_format(f.read())

    # --decode_raw: the file is a sequence of field-1 messages, one a packet.
    packets = fields(trace, 'packet')
    if len(packets) != len(trace):
        fail('Trace has fields other than packet: ' +
             ', '.join(sorted({k for k, _ in trace if k != 'packet'})))
    if [k for k, _ in raw] != ['1'] * len(raw) or any(not isinstance(v, list) for _, v in raw):
        fail('decode_raw: the top level is not only length-delimited field 1')
    if len(raw) != len(packets):
        fail(f'decode_raw sees {len(raw)} top-level messages, the schema {len(packets)} packets')
    if not packets:
        fail('the trace has no packets')

    unknown = unknown_fields(trace, 'Trace')
    if unknown:
        fail(f'{len(unknown)} fields unknown to perfetto_subset.proto (wrong number or '
             f'wire type in the writer?), first: {unknown[:5]}')

    sequences = {}   # id -> {'valid', 'names', 'last_ts', 'clock', 'track'}
    tracks = {}      # uuid -> {'kind', 'pid', 'tid', 'name', 'parent'}
    stacks = {}      # uuid -> [name]
    last_ts_track = {}
    begins = {}      # uuid -> {name: count}
    ends = {}
    for index, packet in enumerate(packets):
        path = f'packet[{index}]'
        seq_id = opt_int(packet, 'trusted_packet_sequence_id', path)
        if not seq_id:
            fail(f'{path}: no (or zero) trusted_packet_sequence_id')
        seq = sequences.setdefault(seq_id, {'valid': False, 'names': {}, 'last_ts': None,
                                            'clock': None, 'track': None})
        flags = opt_int(packet, 'sequence_flags', path) or 0
        if flags & ~3:
            fail(f'{path}: unknown sequence_flags bits {flags:#x}')
        if flags & SEQ_INCREMENTAL_STATE_CLEARED:
            seq['valid'] = True
            seq['names'] = {}
            seq['clock'] = seq['track'] = None
        if flags & SEQ_NEEDS_INCREMENTAL_STATE and not seq['valid']:
            fail(f'{path}: needs incremental state, but sequence {seq_id} never cleared it')

        # The sequence's defaults (incremental state, as Perfetto's reader
        # has it): applied before the packet's other fields.
        defaults = one(packet, 'trace_packet_defaults', path, required=False)
        if defaults is not None:
            if not seq['valid']:
                fail(f'{path}: trace_packet_defaults before the sequence cleared its state')
            dpath = path + '.trace_packet_defaults'
            seq['clock'] = opt_int(defaults, 'timestamp_clock_id', dpath)
            event_defaults = one(defaults, 'track_event_defaults', dpath, required=False)
            seq['track'] = (None if event_defaults is None else
                            opt_int(event_defaults, 'track_uuid', dpath + '.track_event_defaults'))

        ts = opt_int(packet, 'timestamp', path)
        if ts is not None:
            if sequence_order and seq['last_ts'] is not None and ts < seq['last_ts']:
                fail(f'{path}: timestamp {ts} < {seq["last_ts"]}, the previous one of '
                     f'sequence {seq_id}')
            seq['last_ts'] = ts

        interned = one(packet, 'interned_data', path, required=False)
        if interned is not None:
            if not seq['valid']:
                fail(f'{path}: interned data before the sequence cleared its state')
            for entry in fields(interned, 'event_names'):
                iid = as_int(one(entry, 'iid', path), path)
                name = as_string(one(entry, 'name', path), path)
                if iid == 0:
                    fail(f'{path}: interned event name with iid 0')
                if seq['names'].get(iid, name) != name:
                    fail(f'{path}: iid {iid} redefined from {seq["names"][iid]!r} to {name!r}')
                seq['names'][iid] = name

        descriptor = one(packet, 'track_descriptor', path, required=False)
        event = one(packet, 'track_event', path, required=False)
        if (descriptor is None) == (event is None):
            fail(f'{path}: carries {"both" if descriptor else "neither"} of track_descriptor '
                 'and track_event')

        if descriptor is not None:
            dpath = path + '.track_descriptor'
            uuid = as_int(one(descriptor, 'uuid', dpath), dpath)
            if uuid == 0 or uuid in tracks:
                fail(f'{dpath}: uuid {uuid} is zero or described twice')
            process = one(descriptor, 'process', dpath, required=False)
            thread = one(descriptor, 'thread', dpath, required=False)
            if (process is None) == (thread is None):
                fail(f'{dpath}: expected exactly one of process and thread')
            if process is not None:
                tracks[uuid] = {
                    'kind': 'process',
                    'pid': as_int(one(process, 'pid', dpath), dpath),
                    'name': as_string(one(process, 'process_name', dpath), dpath)}
            else:
                tracks[uuid] = {
                    'kind': 'thread',
                    'pid': as_int(one(thread, 'pid', dpath), dpath),
                    'tid': as_int(one(thread, 'tid', dpath), dpath),
                    'name': as_string(one(thread, 'thread_name', dpath), dpath),
                    'parent': opt_int(descriptor, 'parent_uuid', dpath)}
            continue

        epath = path + '.track_event'
        if ts is None:
            fail(f'{epath}: a track event packet without timestamp')
        clock = opt_int(packet, 'timestamp_clock_id', path)
        if clock is None:
            clock = seq['clock']
        if clock != CLOCK_MONOTONIC:
            fail(f'{path}: timestamp on clock {clock} (None: BOOTTIME, Perfetto\'s default), '
                 f'not CLOCK_MONOTONIC ({CLOCK_MONOTONIC})')
        uuid = opt_int(event, 'track_uuid', epath)
        if uuid is None:
            uuid = seq['track']
        if uuid is None:
            fail(f'{epath}: no track_uuid, and its sequence {seq_id} has no default track')
        if uuid not in tracks:
            fail(f'{epath}: track_uuid {uuid} used before any descriptor of it')
        if tracks[uuid]['kind'] != 'thread':
            fail(f'{epath}: slice on a non-thread track {uuid}')
        if last_ts_track.get(uuid, ts) > ts:
            fail(f'{epath}: timestamp {ts} goes back on track {uuid}')
        last_ts_track[uuid] = ts
        kind = one(event, 'type', epath)
        stack = stacks.setdefault(uuid, [])
        if kind == 'TYPE_SLICE_BEGIN':
            name_iid = opt_int(event, 'name_iid', epath)
            name = one(event, 'name', epath, required=False)
            if name is not None:
                name = as_string(name, epath)
            elif name_iid is not None:
                if name_iid not in seq['names']:
                    fail(f'{epath}: name_iid {name_iid} not interned on sequence {seq_id}')
                name = seq['names'][name_iid]
            else:
                fail(f'{epath}: slice begin without a name')
            stack.append(name)
            counts = begins.setdefault(uuid, {})
            counts[name] = counts.get(name, 0) + 1
        elif kind == 'TYPE_SLICE_END':
            if not stack:
                fail(f'{epath}: slice end without a begin on track {uuid}')
            name = stack.pop()
            counts = ends.setdefault(uuid, {})
            counts[name] = counts.get(name, 0) + 1
            for annotation in fields(event, 'debug_annotations'):
                if as_string(one(annotation, 'name', epath), epath) != 'unwound':
                    fail(f'{epath}: unexpected debug annotation')
        else:
            fail(f'{epath}: type {kind}, expected TYPE_SLICE_BEGIN or TYPE_SLICE_END')

    for uuid, stack in stacks.items():
        if stack:
            fail(f'track {uuid} ({tracks[uuid]["name"]!r}) ends with {len(stack)} open '
                 f'slices: {stack[-3:]}')

    # Against what the generator did.
    processes = [u for u, t in tracks.items() if t['kind'] == 'process']
    if len(processes) != 1:
        fail(f'{len(processes)} process tracks, expected 1')
    process = tracks[processes[0]]
    if process['pid'] != expect['pid'] or process['name'] != expect['process_name']:
        fail(f'process track {process}, expected pid {expect["pid"]} name '
             f'{expect["process_name"]!r}')
    by_tid = {t['tid']: (u, t) for u, t in tracks.items() if t['kind'] == 'thread'}
    if len(by_tid) != sum(1 for t in tracks.values() if t['kind'] == 'thread'):
        fail('two thread tracks for one tid')
    for want in expect['threads']:
        if want['tid'] not in by_tid:
            fail(f'no thread track for {want["name"]!r} (tid {want["tid"]})')
        uuid, track = by_tid[want['tid']]
        if track['name'] != want['name']:
            fail(f'thread {want["tid"]} is named {track["name"]!r}, expected {want["name"]!r}')
        if track['pid'] != expect['pid'] or track['parent'] != processes[0]:
            fail(f'thread track {track}: pid or parent_uuid is not the process')
        for what, got in (('begin', begins.get(uuid, {})), ('end', ends.get(uuid, {}))):
            if got != want['calls']:
                fail(f'thread {want["name"]!r}: slice {what}s per function {got}, '
                     f'expected {want["calls"]}')
    extra = set(by_tid) - {t['tid'] for t in expect['threads']}
    if extra:
        fail(f'thread tracks for unexpected tids {sorted(extra)}')
    events = sum(sum(c.values()) for c in begins.values())
    print(f'perfetto: {len(packets)} packets, {len(sequences)} sequence(s), '
          f'{len(tracks)} tracks, {events} slices, all balanced and named')


# ---------------------------------------------------------------------------
# Chrome trace-event JSON
# ---------------------------------------------------------------------------

def check_chrome(trace_path, expect):
    with open(trace_path, encoding='utf-8') as f:
        text = f.read()
    try:
        document = json.loads(text)
    except json.JSONDecodeError as e:
        fail(f'not valid JSON: {e}')
    if not isinstance(document, dict) or not isinstance(document.get('traceEvents'), list):
        fail('not the JSON object form: no traceEvents array')
    dropped = document.get('otherData', {}).get('dropped_events')
    if dropped not in (None, '0', 0):
        fail(f'otherData.dropped_events is {dropped!r}')

    process_names = {}
    thread_names = {}
    stacks, last_ts, begins, ends = {}, {}, {}, {}
    for index, event in enumerate(document['traceEvents']):
        path = f'traceEvents[{index}]'
        if not isinstance(event, dict):
            fail(f'{path}: not an object')
        ph = event.get('ph')
        pid, tid = event.get('pid'), event.get('tid')
        if not isinstance(pid, int) or not isinstance(tid, int):
            fail(f'{path}: pid/tid missing or not integers')
        if pid != expect['pid']:
            fail(f'{path}: pid {pid}, expected {expect["pid"]}')
        if ph == 'M':
            name = event.get('args', {}).get('name')
            if not isinstance(name, str):
                fail(f'{path}: metadata without args.name')
            if event.get('name') == 'process_name':
                process_names[pid] = name
            elif event.get('name') == 'thread_name':
                if tid in thread_names:
                    fail(f'{path}: thread_name of tid {tid} given twice')
                thread_names[tid] = name
            else:
                fail(f'{path}: unexpected metadata {event.get("name")!r}')
            continue
        if ph not in ('B', 'E'):
            fail(f'{path}: phase {ph!r}, expected B, E or M')
        if tid not in thread_names:
            fail(f'{path}: event of tid {tid} before its thread_name metadata')
        ts = event.get('ts')
        if isinstance(ts, bool) or not isinstance(ts, (int, float)):
            fail(f'{path}: ts missing or not a number')
        if last_ts.get(tid, ts) > ts:
            fail(f'{path}: ts {ts} goes back on tid {tid}')
        last_ts[tid] = ts
        name = event.get('name')
        if not isinstance(name, str) or not name:
            fail(f'{path}: no name')
        stack = stacks.setdefault(tid, [])
        if ph == 'B':
            stack.append(name)
            counts = begins.setdefault(tid, {})
        else:
            if not stack:
                fail(f'{path}: E of {name!r} without a B on tid {tid}')
            if stack[-1] != name:
                fail(f'{path}: E of {name!r} closes {stack[-1]!r} on tid {tid}')
            stack.pop()
            counts = ends.setdefault(tid, {})
        counts[name] = counts.get(name, 0) + 1

    for tid, stack in stacks.items():
        if stack:
            fail(f'tid {tid} ends with {len(stack)} open B events: {stack[-3:]}')
    if process_names.get(expect['pid']) != expect['process_name']:
        fail(f'process_name metadata {process_names}, expected {expect["process_name"]!r}')
    for want in expect['threads']:
        tid = want['tid']
        if thread_names.get(tid) != want['name']:
            fail(f'thread_name of tid {tid} is {thread_names.get(tid)!r}, '
                 f'expected {want["name"]!r}')
        for what, got in (('B', begins.get(tid, {})), ('E', ends.get(tid, {}))):
            if got != want['calls']:
                fail(f'thread {want["name"]!r}: {what} events per function {got}, '
                     f'expected {want["calls"]}')
    extra = set(stacks) - {t['tid'] for t in expect['threads']}
    if extra:
        fail(f'events of unexpected tids {sorted(extra)}')
    events = sum(sum(c.values()) for c in begins.values())
    print(f'chrome: {len(document["traceEvents"])} events, {len(thread_names)} named threads, '
          f'{events} B/E pairs, all balanced')


# ---------------------------------------------------------------------------
# Corruptions, for the tests that show the checks can fail
# ---------------------------------------------------------------------------

def read_varint(data, pos):
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7f) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def packet_offsets(data):
    """Start offsets of the top-level field-1 records (framing only)."""
    offsets, pos = [], 0
    while pos < len(data):
        offsets.append(pos)
        if data[pos] != 0x0a:
            fail(f'mutate: offset {pos} does not start a packet')
        length, pos = read_varint(data, pos + 1)
        pos += length
    return offsets


def drop_first_field(data, number):
    """The trace without the first length-delimited field `number` of a
    packet (the packet's length adjusted)."""
    for start in packet_offsets(data):
        length, body = read_varint(data, start + 1)
        pos, end = body, body + length
        while pos < end:
            key, value_at = read_varint(data, pos)
            if key & 7 == 0:
                _, next_pos = read_varint(data, value_at)
            elif key & 7 == 1:
                next_pos = value_at + 8
            elif key & 7 == 2:
                size, at = read_varint(data, value_at)
                next_pos = at + size
            else:
                fail(f'mutate: wire type {key & 7} at offset {pos}')
            if key >> 3 == number and key & 7 == 2:
                packet = data[body:pos] + data[next_pos:end]
                return (data[:start] + b'\x0a' + encode_varint(len(packet)) + packet +
                        data[end:])
            pos = next_pos
    fail(f'mutate: no packet has a field {number}')


def encode_varint(value):
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7f | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def mutate(kind, src, dst):
    mode = 'r' if kind == 'schema-flip' else 'rb'
    with open(src, mode) as f:
        data = f.read()
    if kind == 'truncate':            # any format: cut into the last record
        data = data[:len(data) - 3]
    elif kind == 'drop-last-packet':  # perfetto: a whole packet (an END) gone
        data = data[:packet_offsets(data)[-1]]
    elif kind == 'schema-flip':       # our schema with track_uuid renumbered
        new = data.replace('optional uint64 track_uuid = 11;', 'optional uint64 track_uuid = 14;')
        if new == data:
            fail('mutate: track_uuid = 11 not found in the schema')
        data = new
    elif kind == 'drop-defaults':     # perfetto: the first trace_packet_defaults gone
        data = drop_first_field(data, 59)
    elif kind == 'drop-end':          # chrome: the last E event of the file
        text = data.decode()
        at = text.rfind('{"ph":"E"')
        if at < 0:
            fail('mutate: no E event')
        if text[at - 2:at] != ',\n':
            fail('mutate: the E event is not preceded by ",\\n"')
        end = text.index('\n', at)
        data = (text[:at - 2] + text[end:]).encode()  # with its separator
    elif kind == 'rename-thread':     # chrome: a thread_name metadata renamed
        new = data.replace(b'"args":{"name":"trfmt-beta"}', b'"args":{"name":"trfmt-gamma"}', 1)
        if new == data:
            fail('mutate: no trfmt-beta thread_name')
        data = new
    else:
        fail(f'mutate: unknown kind {kind!r}')
    with open(dst, 'w' if mode == 'r' else 'wb') as f:
        f.write(data)


def main(argv):
    try:
        if len(argv) in (5, 6) and argv[1] == 'perfetto':
            if len(argv) == 6 and argv[5] != '--relax-sequence-order':
                print(__doc__, file=sys.stderr)
                return 2
            with open(argv[4]) as f:
                check_perfetto(argv[2], argv[3], json.load(f), sequence_order=len(argv) == 5)
        elif len(argv) == 4 and argv[1] == 'chrome':
            with open(argv[3]) as f:
                check_chrome(argv[2], json.load(f))
        elif len(argv) == 5 and argv[1] == 'mutate':
            mutate(argv[2], argv[3], argv[4])
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except CheckError as e:
        print(f'CHECK FAILED: {e}', file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
