#!/usr/bin/env python3
"""Checks that README.md says what its first two commands download.

scripts/run.sh and scripts/test.sh both run scripts/setup.sh, which installs Debian packages with
apt-get and npm packages with `npm ci`. The README's text between its first ```sh block and the
next heading must name:

1. every Debian package scripts/setup.sh may install (its packages=(...) list and what it adds
   with packages+=(...));
2. every npm package a package.json under tests/ or scripts/ depends on, with its pinned version
   and its folder, and how many packages its package-lock.json installs ("N packages", or
   "1 package");
3. and the npm folders setup.sh installs are exactly those with a package.json.

A self-test first: each check rejects a README that lacks what it looks for.

Prints "ok" or the problems; exits 1 on any.
"""
import argparse
import json
import pathlib
import re
import sys


def setup_packages(setup):
    """The Debian packages setup.sh may install, in order."""
    found = []
    for block in re.findall(r"packages\+?=\(([^)]*)\)", setup):
        for line in block.splitlines():
            found += line.split("#", 1)[0].split()
    return found


def npm_folders(root):
    """{folder: [(name, version, packages in its lock file)]} for each package.json."""
    folders = {}
    for top in ("tests", "scripts"):
        for manifest in sorted((root / top).rglob("package.json")):
            if "node_modules" in manifest.parts:
                continue
            folder = manifest.parent.relative_to(root).as_posix()
            dependencies = json.loads(manifest.read_text()).get("dependencies", {})
            lock = manifest.parent / "package-lock.json"
            count = None
            if lock.exists():
                count = sum(1 for key in json.loads(lock.read_text()).get("packages", {}) if key)
            folders[folder] = [(name, version, count) for name, version in dependencies.items()]
    return folders


def downloads_section(readme):
    """The README's text from the end of its first ```sh block to the next heading."""
    start = readme.find("```sh")
    if start < 0:
        return ""
    end_of_block = readme.find("```", start + 5)
    heading = readme.find("\n#", end_of_block)
    return readme[end_of_block:heading if heading >= 0 else len(readme)]


def mentions(text, word):
    return re.search(r"(?<![\w.+@/-])" + re.escape(word) + r"(?![\w.+/-])", text) is not None


def problems_of(readme, setup, folders):
    section = downloads_section(readme)
    problems = []
    if not section.strip():
        return ["README.md has no text after its first ```sh block"]
    for package in setup_packages(setup):
        if not mentions(section, package):
            problems.append(f"the Debian package {package} (scripts/setup.sh) is not listed")
    installed = set(re.findall(r"npm ci --prefix (\S+)", setup))
    for folder, dependencies in folders.items():
        if folder not in installed:
            problems.append(f"{folder}/package.json is not installed by scripts/setup.sh")
        if not mentions(section, folder):
            problems.append(f"the npm folder {folder} is not named")
        for name, version, count in dependencies:
            at = section.find(f"`{name}`")
            if at < 0:
                problems.append(f"the npm package {name} ({folder}) is not listed")
                continue
            # Its description: up to the next package named, or the end of the list.
            following = [section.find(f"`{n}`", at + 1) for f in folders.values() for n, _, _ in f]
            end = min([i for i in following if i > at] + [len(section)])
            said = section[at:end]
            if version not in said:
                problems.append(f"the npm package {name}: its pinned version {version} is not given")
            wanted = "1 package" if count == 1 else f"{count} packages"
            if count is not None and not re.search(r"(?<!\d)" + re.escape(wanted) + r"\b", said):
                problems.append(f"the npm package {name}: {folder}/package-lock.json installs "
                                f"{wanted}, which is not said")
    for folder in installed - set(folders):
        problems.append(f"scripts/setup.sh installs {folder}, which has no package.json")
    return problems


def self_test(readme, setup, folders):
    """Each check catches a README without what it looks for."""
    failures = []
    broken = {
        "a Debian package": readme.replace(" libfuse3-dev", " "),
        "an npm package": readme.replace("`s3rver`", "s3-server"),
        "a version": re.sub(r"`s3rver`\s+\d[\w.-]*", "`s3rver`", readme),
        "a count": re.sub(r"\d+ packages with its\s+dependencies", "its dependencies", readme),
    }
    for what, text in broken.items():
        if text == readme:
            failures.append(f"self-test: could not remove {what} from the README")
        elif not problems_of(text, setup, folders):
            failures.append(f"self-test: a README without {what} passed")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=pathlib.Path, required=True, help="the repository")
    args = parser.parse_args()
    readme = (args.root / "README.md").read_text()
    setup = (args.root / "scripts" / "setup.sh").read_text()
    folders = npm_folders(args.root)
    problems = problems_of(readme, setup, folders)
    if not problems:
        problems = self_test(readme, setup, folders)
    for problem in problems:
        print("FAIL", problem)
    if not problems:
        print(f"ok: README.md lists the {len(setup_packages(setup))} Debian packages and "
              f"{sum(len(d) for d in folders.values())} npm packages scripts/setup.sh installs")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
