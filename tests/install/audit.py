#!/usr/bin/env python3
# The install audit: every header and library the build read, and every program and Python module
# the scripts, tests and benchmarks call, must come from a package inside the dependency closure
# (Depends and Pre-Depends, no Recommends) of the lists scripts/setup installs for that command.
"""Usage: audit.py --source DIR --build DIR [--drop PACKAGE ...] [--verbose]

Evidence read from a finished build: the compiler's dependency files (*.o.d, *.gch.d), the link lines
(link.txt), the configure cache (CMakeCache.txt paths), ldd of the built programs, the test
commands (ctest --show-only=json-v1), the shell scripts under scripts/ and tests/ (command words)
and the Python files the tests and benchmarks run (their imports). Each file is mapped to its
Debian package with dpkg's file lists; the closure of a list is computed as apt would resolve it
on a fresh root (minbase: the Essential and Priority-required packages, and apt), taking the first alternative.
--drop removes a package from its list first, to show the audit notices the gap.
"""
import argparse
import ast
import glob
import json
import os
import re
import shutil
import subprocess
import sys

LIST_NAMES = ("build", "test", "bench", "fresh-check")
# Each command installs the build list and its own (scripts/demo: build only).
INSTALLED_BY = {"build": ("build",), "test": ("build", "test"), "bench": ("build", "bench"),
                "fresh-check": ("fresh-check",)}
# Configure-cache entries made by tests/CMakeLists.txt; every other entry is the build's.
TEST_CACHE_PREFIXES = ("GTest", "GMock", "STRATA_SYSTEM_PYTHON")
BASH_WORDS = set(subprocess.run(["bash", "-c", "compgen -b; compgen -k"], capture_output=True,
                                text=True).stdout.split())
# Words that run the command after them: skipped to reach that command.
WRAPPERS = {"env", "exec", "sudo", "timeout", "nice", "setsid", "xargs", "time", "stdbuf", "nohup"}


def load_lists(source, drops):
    lists = {}
    for name in LIST_NAMES:
        path = os.path.join(source, "scripts", "packages", name)
        with open(path) as f:
            lists[name] = [l.split()[0] for l in f if l.strip() and not l.lstrip().startswith("#")]
    for d in drops:
        if not any(d in l for l in lists.values()):
            sys.exit(f"audit: --drop {d}: no list in scripts/packages holds it")
        for l in lists.values():
            if d in l:
                l.remove(d)
    return lists


def parse_stanzas(text):
    for block in text.split("\n\n"):
        fields, key = {}, None
        for line in block.splitlines():
            if line[:1] in (" ", "\t") and key:
                fields[key] += "\n" + line
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if "Package" in fields:
            yield fields


class Packages:
    """What apt knows (available) and dpkg has (installed): dependencies and providers."""

    def __init__(self):
        self.deps, self.provides, self.base = {}, {}, set()
        avail = subprocess.run(["apt-cache", "dumpavail"], capture_output=True, text=True).stdout
        with open("/var/lib/dpkg/status") as f:
            status = f.read()
        for text, installed in ((avail, False), (status, True)):
            for p in parse_stanzas(text):
                if installed and "install ok installed" not in p.get("Status", ""):
                    continue
                name = p["Package"]
                if not installed and name in self.deps:
                    continue
                groups = []
                for field in ("Pre-Depends", "Depends"):
                    for group in filter(None, (g.strip() for g in p.get(field, "").split(","))):
                        groups.append([re.sub(r"[ (].*|:any|:native", "", alt.strip()) for alt in group.split("|")])
                self.deps[name] = groups
                for prov in filter(None, (x.strip() for x in p.get("Provides", "").split(","))):
                    self.provides.setdefault(re.sub(r"[ (].*", "", prov), []).append(name)
                # What mmdebstrap's minbase variant installs: Essential and Priority required.
                if p.get("Essential") == "yes" or p.get("Priority") == "required":
                    self.base.add(name)

    def pick(self, alternatives, chosen):
        for alt in alternatives:  # one already chosen satisfies the group, as apt sees it
            if alt in chosen or any(p in chosen for p in self.provides.get(alt, [])):
                return None
        for alt in alternatives:  # else apt takes the first alternative it can install
            if alt in self.deps:
                return alt
            if self.provides.get(alt):
                return self.provides[alt][0]
        return None

    def closure(self, roots):
        chosen, todo = set(), list(roots)
        while todo:
            name = todo.pop()
            if name in chosen:
                continue
            chosen.add(name)
            for group in self.deps.get(name, []):
                p = self.pick(group, chosen)
                if p:
                    todo.append(p)
        return chosen


class Owners:
    """File -> Debian package, from dpkg's file lists (usr-merged paths tried both ways)."""

    def __init__(self):
        self.owner = {}
        for path in glob.glob("/var/lib/dpkg/info/*.list"):
            package = os.path.basename(path)[:-5].split(":")[0]
            with open(path, errors="replace") as f:
                for line in f:
                    self.owner.setdefault(line.rstrip("\n"), package)

    def of(self, path):
        real = os.path.realpath(path)
        for p in (path, real):
            for variant in (p, re.sub(r"^/usr/", "/", p), "/usr" + p):
                if variant in self.owner:
                    return self.owner[variant]
        return None


def depfile_headers(build):
    # *.o.d of each object, *.gch.d of each precompiled header (what the objects then read through it).
    for path in glob.glob(os.path.join(build, "**", "*.d"), recursive=True):
        if not path.endswith((".o.d", ".gch.d")):
            continue
        with open(path) as f:
            text = f.read().replace("\\\n", " ")
        words = text.split(":", 1)[1].split() if ":" in text else []
        for w in words:
            if w.startswith("/"):
                yield w, path


def link_libraries(build):
    for path in glob.glob(os.path.join(build, "**", "link.txt"), recursive=True):
        with open(path) as f:
            words = f.read().split()
        for w in words:
            if w.startswith("-l") and len(w) > 2:
                for suffix in (".so", ".a"):
                    found = subprocess.run(["g++", f"-print-file-name=lib{w[2:]}{suffix}"],
                                           capture_output=True, text=True).stdout.strip()
                    if os.path.isabs(found):
                        yield found, path
                        break
            elif w.startswith("/") and re.search(r"\.(so[.0-9]*|a)$", w):
                yield w, path


def cache_paths(build):
    with open(os.path.join(build, "CMakeCache.txt")) as f:
        for line in f:
            m = re.match(r"([A-Za-z_0-9]+):(FILEPATH|PATH|STRING|INTERNAL)=(.*)", line.strip())
            if not m:
                continue
            name, value = m.group(1), m.group(3)
            for v in value.split(";"):
                if v.startswith("/") and os.path.isfile(v) and not v.startswith(("/usr/local", "/work", "/tmp")):
                    yield v, name


def elf_files(build):
    for path in glob.glob(os.path.join(build, "**", "*"), recursive=True):
        if os.path.isfile(path) and os.access(path, os.X_OK) and not path.endswith((".sh", ".py")):
            with open(path, "rb") as f:
                if f.read(4) == b"\x7fELF":
                    yield path


def ldd_libraries(binary):
    out = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
    for line in out.splitlines():
        m = re.search(r"=> (/\S+)", line) or re.match(r"\s*(/\S+)", line)
        if m:
            yield m.group(1)


def shell_code(text):
    """The script with what is data blanked: comments, quoted text (a command substitution inside
    double quotes is kept, it runs) and here-document bodies (a Python snippet is not commands)."""
    out, i, n, pending = [], 0, len(text), []
    while i < n:
        c = text[i]
        if c == "\\":
            out.append(" ")
            i += 2
        elif c == "'":
            end = text.find("'", i + 1)
            out.append("''")
            i = n if end < 0 else end + 1
        elif c == '"':
            j, kept = i + 1, []
            while j < n and text[j] != '"':
                if text[j] == "\\":
                    j += 2
                    continue
                if text.startswith("$(", j):
                    depth, k = 1, j + 2
                    while k < n and depth:
                        depth += {"(": 1, ")": -1}.get(text[k], 0)
                        k += 1
                    kept.append(" ; " + shell_code(text[j + 2:k - 1]) + " ; ")
                    j = k
                    continue
                j += 1
            out.append('""' + "".join(kept))
            i = j + 1
        elif c == "#" and (i == 0 or text[i - 1] in " \t\n;(|&"):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("<<", i) and not text.startswith("<<<", i):
            m = re.match(r"<<(-?)\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2", text[i:])
            if m:
                pending.append((m.group(3), m.group(1) == "-"))
                i += m.end()
            else:
                out.append("<<")
                i += 2
        elif c == "\n" and pending:
            out.append("\n")
            i += 1
            for delimiter, strip_tabs in pending:  # the bodies follow this line, in order
                while i < n:
                    end = text.find("\n", i)
                    end = n if end < 0 else end
                    line = text[i:end]
                    i = end + 1
                    if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                        break
            pending = []
        else:
            out.append(c)
            i += 1
    return "".join(out)


def command_words(text):
    """Programs a shell script runs: the first word of each command (wrappers skipped), a name or
    an absolute path."""
    functions = set(re.findall(r"^\s*([A-Za-z_][A-Za-z0-9_-]*)\s*\(\)", text, re.M))
    for line in shell_code(text).splitlines():
        for segment in re.split(r"\|\||&&|;;|[|;&`{}]|\$\(|\(|\bthen\b|\bdo\b|\belse\b", line):
            words = segment.split()
            while words and (words[0] in ("if", "while", "until", "!", "elif", "exec", "time")
                             or words[0].endswith(")")  # a case pattern
                             or re.match(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=", words[0])):
                words.pop(0)
            while words and words[0] in WRAPPERS:
                words.pop(0)
                while words and (words[0].startswith("-") or "=" in words[0] or words[0].isdigit()):
                    words.pop(0)
            if not words:
                continue
            w = words[0]
            if re.fullmatch(r"/(usr/)?s?bin/[\w.+-]+", w):
                yield w
            elif re.fullmatch(r"[a-z][a-z0-9_.+-]*", w) and w not in BASH_WORDS and w not in functions:
                yield w


def python_imports(text):
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0]


def module_origins(modules, path_dirs):
    code = ("import importlib.util, json, sys\nsys.path[:0] = json.loads(sys.argv[1])\nout = {}\n"
            "for m in json.loads(sys.argv[2]):\n"
            "    try:\n        s = importlib.util.find_spec(m)\n    except Exception:\n        s = None\n"
            "    out[m] = (s.origin if s and s.origin else '') if s else None\nprint(json.dumps(out))")
    out = subprocess.run(["/usr/bin/python3", "-c", code, json.dumps(path_dirs), json.dumps(sorted(modules))],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def list_of_source(rel):
    """Which list's command runs the file at this path (relative to the source tree)."""
    if rel.startswith("bench/") or rel == "scripts/bench":
        return ("bench",)
    if rel == "scripts/cluster":  # the virtual cluster: its tests run under scripts/test
        return ("test",)
    if rel.startswith("tests/") or rel == "scripts/test":
        return ("test",)
    if rel == "scripts/fresh-check":
        return ("fresh-check",)
    return ("build",)


def list_of_build_file(build, path):
    rel = os.path.relpath(path, build)
    if rel.startswith("tests"):
        return ("test",)
    if rel.startswith("bench"):
        return ("bench",)
    return ("build",)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--drop", action="append", default=[])
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    source, build = os.path.realpath(args.source), os.path.realpath(args.build)
    lists = load_lists(source, args.drop)
    packages = Packages()
    base = packages.closure(sorted(packages.base) + ["apt"])
    closures = {name: packages.closure(list(base) + [p for l in INSTALLED_BY[name] for p in lists[l]])
                for name in LIST_NAMES}
    owners = Owners()

    # evidence: (file on this machine, what used it, lists whose command needs it)
    evidence = []
    for header, depfile in depfile_headers(build):
        if not header.startswith((source, build)):
            evidence.append((header, os.path.relpath(depfile, build), list_of_build_file(build, depfile)))
    for lib, linkfile in link_libraries(build):
        evidence.append((lib, os.path.relpath(linkfile, build), list_of_build_file(build, linkfile)))
    for path, name in cache_paths(build):
        lst = ("test",) if name.startswith(TEST_CACHE_PREFIXES) else ("build",)
        evidence.append((path, f"CMakeCache.txt {name}", lst))
    for binary in elf_files(build):
        for lib in ldd_libraries(binary):
            evidence.append((lib, f"ldd {os.path.relpath(binary, build)}", list_of_build_file(build, binary)))

    path_env = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    programs = {}  # program name -> (used by, lists)
    tests = json.loads(subprocess.run(["ctest", "--show-only=json-v1"], cwd=build, capture_output=True,
                                      text=True, check=True).stdout)["tests"]
    for t in tests:
        for word in t.get("command", []):
            if os.path.isabs(word) and not word.startswith((source, build)) and os.access(word, os.X_OK) \
               and os.path.isfile(word):
                programs.setdefault(word, (f"ctest {t['name']}", ("test",)))
    scripts = [f for f in glob.glob(os.path.join(source, "scripts", "*")) if os.path.isfile(f)]
    scripts += glob.glob(os.path.join(source, "tests", "**", "*.sh"), recursive=True)
    snippets = []
    for path in scripts:
        rel = os.path.relpath(path, source)
        with open(path, errors="replace") as f:
            text = f.read()
        if not text.startswith("#!") and not path.endswith(".sh"):
            continue
        for word in command_words(text):
            programs.setdefault(word if word.startswith("/") else word, (rel, list_of_source(rel)))
        snippets += [(m, rel) for m in re.findall(r"^\s*(?:import|from)\s+([A-Za-z_]\w*)", text, re.M)]
    for name, (used_by, lst) in programs.items():
        found = name if name.startswith("/") else shutil.which(name, path=path_env)
        if found:
            evidence.append((found, f"{used_by} runs {os.path.basename(name)}", lst))
        elif args.verbose:
            print(f"audit: note: '{name}' ({used_by}) is not a program on this machine")

    py_files = glob.glob(os.path.join(source, "tests", "**", "*.py"), recursive=True) + \
        glob.glob(os.path.join(source, "bench", "*.py"))
    wanted = {}
    for path in py_files:
        rel = os.path.relpath(path, source)
        with open(path) as f:
            for m in python_imports(f.read()):
                wanted.setdefault(m, (rel, list_of_source(rel)))
    for m, rel in snippets:
        wanted.setdefault(m, (rel, list_of_source(rel)))
    local_dirs = sorted({os.path.dirname(p) for p in py_files})
    for m, origin in module_origins(wanted, local_dirs).items():
        rel, lst = wanted[m]
        if origin is None:
            evidence.append((f"python module {m}", f"{rel} imports it", lst))
        elif origin.startswith("/") and not origin.startswith(source):
            evidence.append((origin, f"{rel} imports {m}", lst))

    problems, checked = {}, 0
    for path, used_by, needed_by in evidence:
        if path.startswith("python module "):
            problems.setdefault((path, None, needed_by), used_by)
            continue
        package = owners.of(path)
        checked += 1
        for lst in needed_by:
            if package is None or package not in closures[lst]:
                problems.setdefault((path, package, (lst,)), used_by)
    if args.verbose:
        print(f"audit: {checked} files checked; closures: " +
              ", ".join(f"{n} {len(c)} packages" for n, c in closures.items()))
    if not problems:
        print(f"audit: every one of {checked} files the build, tests and benchmarks use comes from the closure "
              f"of its command's lists ({', '.join(f'{n}: {len(lists[n])} packages' for n in LIST_NAMES)})")
        return 0
    by_package = {}
    for (path, package, lst), used_by in problems.items():
        by_package.setdefault((package, lst), []).append((path, used_by))
    # A package missing from the build list is missing for every command: named once, there.
    missing_for_build = {package for (package, lst) in by_package if lst == ("build",)}
    for (package, lst), files in sorted(by_package.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        if package is not None and package in missing_for_build and lst != ("build",):
            continue
        path, used_by = files[0]
        more = f" (and {len(files) - 1} more files)" if len(files) > 1 else ""
        if package is None and path.startswith("python module "):
            print(f"audit: {path} ({used_by}) cannot be imported by /usr/bin/python3: no package provides it")
        elif package is None:
            print(f"audit: {path} ({used_by}) belongs to no Debian package: a fresh machine will not have it{more}")
        else:
            print(f"audit: {path} ({used_by}) is in package {package}, outside the closure of the {lst[0]} list: "
                  f"add {package} to scripts/packages/{lst[0]}{more}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
