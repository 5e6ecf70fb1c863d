#!/usr/bin/env python3
"""Writes the inputs of the CLI cases into DIR (the ctest fixture cli_inputs):
token files, good and broken, for --tokens, and result files that report, compare and --resume
must refuse.

    tests/cli/make_inputs.py DIR
"""
import os
import shutil
import struct
import sys

# gpt2-tiny's vocabulary, as cli.models.lists_presets checks; the token cases name ids around it.
VOCAB = 512


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_inputs.py DIR")
    d = sys.argv[1]
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)

    def write(name, fmt, ids):
        with open(os.path.join(d, name), "wb") as f:
            f.write(struct.pack("<%d%s" % (len(ids), fmt), *ids))

    def write_bytes(name, data):
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)

    # One step of the tiny sweep reads batch × (seq-len + 1) = 4 × 33 = 132 tokens.
    ok = [i % VOCAB for i in range(1000)]
    write("good.u16", "H", ok)
    write("good.u32", "I", ok)
    write("short.u16", "H", ok[:131])
    write("vocab_first.u16", "H", [VOCAB + 88] + ok[1:])
    write("vocab_target.u16", "H", ok[:131] + [VOCAB] + ok[132:])  # the last target of step 1
    write("vocab.u32", "I", [70000] + ok[1:])
    write_bytes("empty.u16", b"")
    # Lengths files as other tools save them: UTF-16 with its byte-order mark (Windows PowerShell 5's
    # `>`), carriage returns alone as line ends, a JSON array (json.dump of rows), a fractional length.
    write_bytes("utf16_lengths.txt", "12\n7\n30\n5\n".encode("utf-16"))
    write_bytes("cr_lengths.txt", b"12\r7\r30\r5\r")
    write_bytes("array_rows.json", b'[{"input_ids": [1, 2, 3]}, {"input_ids": [4, 5]}]\n')
    write_bytes("fraction_lengths.txt", b"12.5\n7\n")
    write_bytes("whole_float_lengths.txt", b"12.0\n7\n1e1\n5\n")  # whole numbers written as floats
    write_bytes("string_ids.jsonl", b'{"input_ids": "abc", "length": 4}\n')
    # Four prompt-completion rows of different lengths whose completions are 3 tokens each: the
    # step's sequences count as many labels, though the samples differ in length.
    rows = []
    for n in (8, 11, 6, 14):
        rows.append('{"input_ids": [%s], "completion_mask": [%s]}' % (
            ", ".join(str(5 + i) for i in range(n)), ", ".join(["0"] * (n - 3) + ["1"] * 3)))
    write_bytes("equal_completions.jsonl", ("\n".join(rows) + "\n").encode())
    write_bytes("blank_between_rows.jsonl", ("\n\n".join(rows) + "\n").encode())
    # As many rows whose masks keep nothing (TRL drops them) as rows that train: the rows that train
    # are the file's whole step, not "no row has a label that counts".
    half = ['{"input_ids": [%s], "completion_mask": [%s]}' % (", ".join(str(5 + i) for i in range(8)),
                                                             ", ".join(["0"] * (8 - k) + ["1"] * k)) for k in (0, 4, 0, 4)]
    write_bytes("half_masked.jsonl", ("\n".join(half) + "\n").encode())
    write_bytes("odd.u16", b"\x01\x00\x02")
    write_bytes("six.u32", b"\x00" * 6)

    write_bytes("broken.json", b'{"json_schema_version": 1, "runs": [')
    write_bytes("foreign.json", b'{"runs": []}\n')


if __name__ == "__main__":
    main()
