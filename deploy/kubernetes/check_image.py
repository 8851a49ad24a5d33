#!/usr/bin/env python3
"""Offline check of the image deploy/kubernetes/Dockerfile builds (no registry, no docker).

1. Reads the packages the Dockerfile's final stage installs (its `apt-get install` lines).
2. Takes the install tree (`cmake --install BUILD` into a temporary DESTDIR, or --install-tree).
3. For every ELF file in it, resolves each shared library with ldd and finds the Debian package
   that holds it (dpkg -S). Each such package must be in the image: the dependency closure of
   the final stage's packages and of the base image's. The base image, debian:12-slim, is
   modelled as the packages of this machine's dpkg database with Priority required or
   Essential yes (what debootstrap installs and the slim image keeps) and their dependencies.
   libcuda.so.1 is not in the image (the NVIDIA container runtime injects it) and not asked for.
4. Proves it: a throwaway root gets the files of exactly those packages (dpkg -L; their
   documentation left out) and the install tree, and each program in bin/ runs `--version` in
   it through chroot (as root, or in a user namespace through `unshare -r`). A program that
   links libcuda.so.1 runs with --libcuda-standin (the driver test double) in its stead.
Exit status 0 when all is well; 1 with one line per problem; 2 on bad usage; 77 when the
programs cannot be run (no root and no user namespaces), after the package check passed.
"""
import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

NOT_IN_IMAGE = {"libcuda.so.1"}  # injected by the NVIDIA container runtime
STANDIN_DIR = "/usr/lib/missile-check-standin"
SKIPPED_DOCS = ("/usr/share/doc/", "/usr/share/man/", "/usr/share/info/", "/usr/share/locale/",
                "/usr/share/lintian/")
SKIP = 77


def final_stage_packages(dockerfile_text):
    """The package names of every `apt-get install` in the last FROM stage."""
    text = re.sub(r"\\\n", " ", dockerfile_text)
    stages = re.split(r"^\s*FROM\s", text, flags=re.M | re.I)
    if len(stages) < 2:
        raise ValueError("no FROM line")
    packages = []
    for line in stages[-1].splitlines():
        line = line.strip()
        if not line.upper().startswith("RUN"):
            continue
        for command in re.split(r"&&|;|\|\|", line[3:]):
            words = [w for w in shlex.split(command, comments=True) if not w.startswith("-")]
            if words[:2] != ["apt-get", "install"]:
                continue
            packages += words[2:]
    return packages


class Dpkg:
    """The machine's dpkg database: packages, priorities, dependencies, files."""

    def __init__(self):
        out = subprocess.run(
            ["dpkg-query", "-W", "-f",
             "${Package}\t${db:Status-Abbrev}\t${Priority}\t${Essential}\t${Provides}\t"
             "${Pre-Depends}\t${Depends}\n"],
            capture_output=True, text=True, check=True).stdout
        self.installed, self.base, self.provides, self.deps = set(), set(), {}, {}
        for line in out.splitlines():
            name, status, priority, essential, provides, pre, deps = (line.split("\t") + [""] * 7)[:7]
            if not status.startswith("ii"):
                continue
            self.installed.add(name)
            if priority == "required" or essential == "yes":
                self.base.add(name)
            for p in filter(None, (x.strip().split(" ")[0] for x in provides.split(","))):
                self.provides.setdefault(p, name)
            self.deps[name] = [a for a in (pre + "," + deps).split(",") if a.strip()]

    def resolve(self, alternatives):
        """The installed package that satisfies 'a (>= 1) | b', or None."""
        for alt in alternatives.split("|"):
            name = alt.strip().split(" ")[0].split(":")[0]
            if name in self.installed:
                return name
            if name in self.provides:
                return self.provides[name]
        return None

    def closure(self, roots):
        seen, todo = set(), list(roots)
        while todo:
            p = todo.pop()
            if p in seen or p not in self.installed:
                continue
            seen.add(p)
            todo += [d for d in (self.resolve(a) for a in self.deps.get(p, [])) if d]
        return seen

    @staticmethod
    def owner(path):
        """The package holding a file, trying the path as given and through merged /usr."""
        candidates = [path, os.path.realpath(path)]
        for c in list(candidates):
            if c.startswith("/usr/"):
                candidates.append(c[4:])
            else:
                candidates.append("/usr" + c)
        for c in candidates:
            r = subprocess.run(["dpkg", "-S", c], capture_output=True, text=True)
            if r.returncode == 0:
                return r.stdout.split(":")[0].split(",")[0].strip()
        return None

    @staticmethod
    def files(package):
        r = subprocess.run(["dpkg", "-L", package], capture_output=True, text=True, check=True)
        return [f for f in r.stdout.splitlines() if f.startswith("/")]


def elf_files(tree):
    for dirpath, _, names in os.walk(tree):
        for n in sorted(names):
            path = os.path.join(dirpath, n)
            if os.path.isfile(path) and not os.path.islink(path):
                with open(path, "rb") as f:
                    if f.read(4) == b"\x7fELF":
                        yield path


def needed_libraries(path):
    """(soname, resolved path or None) for each library ldd lists."""
    out = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
    libs = []
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) => (not found|\S+)", line)
        if m:
            libs.append((m.group(1), None if m.group(2) == "not found" else m.group(2)))
        elif re.match(r"\s*/\S+ \(", line):  # the dynamic loader itself
            p = line.split()[0]
            libs.append((os.path.basename(p), p))
    return libs


def check_packages(tree, packages, dpkg, problems):
    """The image's package set; appends a problem per library found outside it."""
    for p in packages:
        if p not in dpkg.installed:
            problems.append(f"the final stage installs {p}, which is not installed on this machine "
                            f"(scripts/install-deps.sh installs the image's packages for this check)")
    image = dpkg.closure(set(packages) | dpkg.base)
    owners = {}
    for binary in elf_files(tree):
        rel = os.path.relpath(binary, tree)
        for soname, resolved in needed_libraries(binary):
            if soname in NOT_IN_IMAGE:
                continue
            if resolved is None:
                problems.append(f"{rel}: {soname} not found on this machine")
                continue
            if resolved not in owners:
                owners[resolved] = dpkg.owner(resolved)
            package = owners[resolved]
            if package is None:
                problems.append(f"{rel}: {soname} ({resolved}) belongs to no Debian package")
            elif package not in image:
                problems.append(f"{rel}: {soname} is in the package {package}, which the final "
                                f"stage does not install (add it to its apt-get install)")
    return image


def copy_entry(src, root):
    dest = root + src
    if os.path.lexists(dest) or os.path.isdir(src) and not os.path.islink(src):
        if os.path.isdir(src) and not os.path.islink(src):
            os.makedirs(dest, exist_ok=True)
        return
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    if os.path.islink(src):
        os.symlink(os.readlink(src), dest)
    elif os.path.isfile(src) and os.access(src, os.R_OK):  # not root: /etc/shadow-like files
        shutil.copy2(src, dest)


def build_root(root, image, dpkg, tree, standin):
    """A root holding the image's packages' files and the install tree."""
    for d in ("bin", "lib", "lib64", "sbin"):  # Debian 12's merged /usr
        os.makedirs(os.path.join(root, "usr", d), exist_ok=True)
        if os.path.islink("/" + d):
            os.symlink("usr/" + d, os.path.join(root, d))
    for package in sorted(image):
        for f in dpkg.files(package):
            if not f.startswith(SKIPPED_DOCS):
                copy_entry(f, root)
    shutil.copytree(tree, root, symlinks=True, dirs_exist_ok=True)
    if standin:
        os.makedirs(root + STANDIN_DIR, exist_ok=True)
        shutil.copy2(standin, os.path.join(root + STANDIN_DIR, "libcuda.so.1"))


def chroot_prefix():
    """How to enter a chroot here: as root directly, else in a user namespace; None if neither."""
    if os.geteuid() == 0:
        return []
    unshare = shutil.which("unshare")
    if unshare and subprocess.run([unshare, "-r", "true"], capture_output=True).returncode == 0:
        return [unshare, "-r"]
    return None


def links_libcuda(path):
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True).stdout
    return "[libcuda.so.1]" in out


def run_versions(root, tree, prefix, standin, problems):
    """Runs each program of the install tree's bin/ with --version inside the root."""
    chroot = shutil.which("chroot") or "/usr/sbin/chroot"
    subprocess.run(prefix + [chroot, root, "/sbin/ldconfig"], check=False)
    programs = [p for p in elf_files(tree) if "/bin/" in p and os.access(p, os.X_OK)]
    if not programs:
        problems.append(f"{tree}: no program in a bin/ directory")
    for program in programs:
        inside = "/" + os.path.relpath(program, tree)
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C"}
        if links_libcuda(program):
            if not standin:
                problems.append(f"{inside} links libcuda.so.1: give --libcuda-standin to run it")
                continue
            env["LD_LIBRARY_PATH"] = STANDIN_DIR
        r = subprocess.run(prefix + [chroot, root, inside, "--version"], env=env,
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0 or not r.stdout.strip():
            why = (r.stderr or r.stdout).strip().replace("\n", "; ")
            problems.append(f"{inside} --version fails in the image's files (exit {r.returncode}): "
                            f"{why}")
        else:
            print(f"check_image: {inside} --version: {r.stdout.strip().splitlines()[0]}")


def install_tree(build, destdir):
    r = subprocess.run(["cmake", "--install", build, "--prefix", "/usr/local"],
                       env=dict(os.environ, DESTDIR=destdir), capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"cmake --install {build} failed: {r.stderr.strip()}")
    return destdir


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dockerfile", default=os.path.join(here, "Dockerfile"))
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--build", help="a CMake build directory to install from")
    source.add_argument("--install-tree", help="an install tree (DESTDIR) already made")
    parser.add_argument("--libcuda-standin", help="a libcuda.so.1 for programs that link it")
    parser.add_argument("--run-anyway", action="store_true",
                        help="run the programs even when the package check found problems")
    args = parser.parse_args()
    try:
        with open(args.dockerfile, encoding="utf-8") as f:
            packages = final_stage_packages(f.read())
    except (OSError, ValueError) as e:
        print(f"check_image: cannot read {args.dockerfile}: {e}", file=sys.stderr)
        return 2
    if not packages:
        print(f"check_image: {args.dockerfile}: the final stage installs no package")
        return 1
    print(f"check_image: the final stage installs {' '.join(packages)}")
    with tempfile.TemporaryDirectory(prefix="missile-image-") as tmp:
        try:
            tree = args.install_tree or install_tree(args.build, os.path.join(tmp, "install"))
        except RuntimeError as e:
            print(f"check_image: {e}", file=sys.stderr)
            return 2
        dpkg, problems = Dpkg(), []
        image = check_packages(tree, packages, dpkg, problems)
        print(f"check_image: the image model holds {len(image)} packages "
              f"({len(dpkg.base)} of them required or essential in the base)")
        if not problems or args.run_anyway:
            prefix = chroot_prefix()
            if prefix is None:
                for p in problems:
                    print(f"check_image: {p}")
                print("check_image: SKIP running --version: neither root nor user namespaces")
                return 1 if problems else SKIP
            root = os.path.join(tmp, "root")
            build_root(root, image, dpkg, tree, args.libcuda_standin)
            run_versions(root, tree, prefix, args.libcuda_standin, problems)
    for p in problems:
        print(f"check_image: {p}")
    if not problems:
        print("check_image: every shipped ELF file's libraries are in the image, and every "
              "program runs --version there")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
