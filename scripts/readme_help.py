#!/usr/bin/env python3
"""Rewrites every `$ accumbench CMD --help` block of README.md with what the built binary prints,
so the README's option lists cannot drift from the help (which prints the defaults from the code).

    scripts/readme_help.py [build/accumbench] [README.md]
"""
import re
import subprocess
import sys

binary = sys.argv[1] if len(sys.argv) > 1 else "build/accumbench"
readme = sys.argv[2] if len(sys.argv) > 2 else "README.md"
text = open(readme, encoding="utf-8").read()
block = re.compile(r"```\n\$ accumbench ([\w-]+) --help\n(.*?)```", re.S)


def render(match):
    command = match.group(1)
    help_text = subprocess.run([binary, command, "--help"], capture_output=True, text=True, check=True).stdout
    return "```\n$ accumbench %s --help\n%s\n```" % (command, help_text.rstrip("\n"))


updated, count = block.subn(render, text)
open(readme, "w", encoding="utf-8").write(updated)
print("rewrote %d help blocks in %s" % (count, readme))
