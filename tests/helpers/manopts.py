#!/usr/bin/env python3
"""Do the man pages document exactly the options `--help` prints?

  manopts.py MEMVISOR MANDIR [PENDING]

For each page, the long options its commands' --help print (option rows,
and the usage lines) must each be defined in the page (the tag line of a
.TP), and each option the page defines must be printed by one of those
--help. For memvisor-ctl(1), the commands too: those `ctl --help` lists
against the page's COMMANDS. Which --help goes with which page:

  memvisor.1         memvisor --help, memvisor policy --help, memvisor check --help
  memvisor-run.1     memvisor run --help
  memvisor-ctl.1     memvisor ctl --help, and ctl CMD --help for each command
  memvisor-image.1   memvisor image --help

PENDING (default: manopts-pending beside this script) lists what the pages
document before --help has it ("PAGE --option" or "PAGE command NAME"):
those are reported, not failed; one that --help already prints is a
failure, so the list goes down to nothing as branches are merged.

Prints each problem and exits 1, or exits 0 (notes on pending lines on
stdout either way).
"""
import os
import re
import subprocess
import sys

PAGES = {
    "memvisor.1": [[], ["policy"], ["check"]],
    "memvisor-run.1": [["run"]],
    "memvisor-ctl.1": [["ctl"]],
    "memvisor-image.1": [["image"]],
    "memvisor-agent.1": [["agent"], ["oci-profile"]],
}
ROW = re.compile(r"^\s+(?:-[A-Za-z0-9], )?--([a-z0-9][a-z0-9-]*)")
TOKEN = re.compile(r"(?<![\w-])--([a-z][a-z0-9-]*)")


def helptext(memvisor, words):
    r = subprocess.run([memvisor, *words, "--help"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"manopts: {' '.join(['memvisor', *words, '--help'])} exited {r.returncode}")
    return r.stdout


def help_options(text):
    opts = set()
    for line in text.splitlines():
        m = ROW.match(line)
        if m:
            opts.add(m.group(1))
        elif re.match(r"^(Usage:)?\s*memvisor\b", line.strip()) and "memvisor" in line:
            opts.update(TOKEN.findall(line))
    return opts


def ctl_commands(text):
    """The command names of `ctl --help`: the lowercase words of each row
    of its Commands section ("policy set FILE" -> "policy set")."""
    names, inside = [], False
    for line in text.splitlines():
        if line.startswith("Commands:"):
            inside = True
            continue
        if inside and not line.strip():
            break
        m = inside and re.match(r"^  ([a-z]+(?: [a-z]+)*)", line)
        if m:
            names.append(m.group(1))
    return names


def man_lines(path):
    with open(path) as f:
        return f.read().splitlines()


def unroff(s):
    s = re.sub(r"\\f[BIRP]", "", s).replace("\\-", "-").replace("\\&", "")
    if s.startswith((".B ", ".I ", ".BR ", ".IR ", ".BI ")):
        s = s.split(" ", 1)[1]
    return s.replace('"', "").strip()


def man_options(lines):
    """Long options defined by the page: in the tag line of each .TP."""
    opts = set()
    for i, line in enumerate(lines[:-1]):
        if line.startswith(".TP"):
            opts.update(re.findall(r"\\-\\-([a-z0-9](?:[a-z0-9]|\\-)*)", lines[i + 1]))
    return {o.replace("\\-", "-") for o in opts}


def man_commands(lines):
    """The commands of a COMMANDS section: each top-level .TP's bold words."""
    names, inside, depth = [], False, 0
    for i, line in enumerate(lines[:-1]):
        if line.startswith(".SH"):
            inside = line.strip() == ".SH COMMANDS"
        depth += line.startswith(".RS") - line.startswith(".RE")
        if inside and depth == 0 and line.startswith(".TP"):
            tag = lines[i + 1]
            m = re.match(r"^(?:\.B (.*)|\\fB(.*?)\\f[RP])", tag)
            if m:
                names.append(unroff(m.group(1) or m.group(2)))
    return names


def pending_list(path):
    items = set()
    if path and os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.split("#", 1)[0].strip()
                if line:
                    page, what = line.split(None, 1)
                    items.add((page, what))
    return items


def main():
    memvisor, mandir = sys.argv[1], sys.argv[2]
    here = os.path.dirname(os.path.abspath(__file__))
    pending = pending_list(sys.argv[3] if len(sys.argv) > 3 else os.path.join(here, "manopts-pending"))
    bad, notes, used = [], [], set()

    def compare(page, what, in_help, in_man, helpname):
        for x in sorted(in_help - in_man):
            bad.append(f"{page}: {what}{x} is in {helpname} but the page does not document it")
        for x in sorted(in_man - in_help):
            if (page, what + x) in pending:
                used.add((page, what + x))
                notes.append(f"{page}: {what}{x}: documented, not in --help yet (pending)")
            else:
                bad.append(f"{page}: {what}{x} is documented but no --help of it prints it")
        for x in sorted(in_help & in_man):
            if (page, what + x) in pending:
                used.add((page, what + x))
                bad.append(f"{page}: {what}{x} is in --help now: remove it from the pending list")

    for page, commands in PAGES.items():
        lines = man_lines(os.path.join(mandir, page))
        opts, names = set(), []
        for words in commands:
            text = helptext(memvisor, words)
            opts |= help_options(text)
            if words == ["ctl"]:
                names = ctl_commands(text)
                for name in names:
                    opts |= help_options(helptext(memvisor, ["ctl", *name.split()]))
        helpname = "the --help of " + ", ".join("memvisor " + " ".join(w) for w in commands)
        compare(page, "--", opts, man_options(lines), helpname)
        if names:
            compare(page, "command ", set(names), set(man_commands(lines)), "memvisor ctl --help")
    for page, what in sorted(pending - used):
        bad.append(f"{page}: pending '{what}' is neither documented nor in --help")
    print("\n".join(notes))
    if bad:
        print("\n".join(bad), file=sys.stderr)
        sys.exit(1)


main()
