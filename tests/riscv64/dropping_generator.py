#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# A code generator that goes away in the middle of an attach: started by a
# riscv64 test process as its FTJIT_GENERATOR (runtime/c_api_remote.cpp:
# `generator --isa riscv64 --fd 3`), it relays the first FTJIT_DROP_AFTER
# requests to the real one (FTJIT_REAL_GENERATOR, the host's ftjit) and
# their answers back, then closes the connection at the next request
# without answering, as a CLI that was killed would.
#
# Frames (runtime/control/wire.cpp): u32 length (payload + 2), u16 type,
# payload.
import os
import socket
import struct
import subprocess
import sys


def read_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def read_frame(sock):
    head = read_exact(sock, 4)
    if head is None:
        return None
    (length,) = struct.unpack("<I", head)
    body = read_exact(sock, length)
    return None if body is None else head + body


def main():
    args = sys.argv[1:]
    fd = int(args[args.index("--fd") + 1])
    isa = args[args.index("--isa") + 1]
    guest = socket.socket(fileno=fd)
    ours, theirs = socket.socketpair()
    real = subprocess.Popen([os.environ["FTJIT_REAL_GENERATOR"], "generator", "--isa", isa, "--fd",
                             str(theirs.fileno())], pass_fds=[theirs.fileno()])
    theirs.close()
    left = int(os.environ["FTJIT_DROP_AFTER"])
    while True:
        request = read_frame(guest)
        if request is None or left == 0:
            break
        ours.sendall(request)
        answer = read_frame(ours)
        if answer is None:
            break
        guest.sendall(answer)
        left -= 1
    guest.close()
    ours.close()
    real.wait()


main()
