"""Build the compose stack's images on this host from Debian packages, with no container registry.

    klear-compose-base:local  bookworm minbase + python3, python3-venv      debootstrap | docker import
    klear-compose-deps:local  base + /opt/venv holding the project's dependencies (pip, this host's indexes)
    klear-app:local           deps + this checkout at /opt/klear, installed editable (`klear`, flows, tasks)
    klear-postgres:local      bookworm minbase + postgresql + scripts/compose/postgres-entrypoint.sh

The Debian roots come from sandbox/image.py (`rootfs_tarball`: debootstrap, cached as a tarball), the same
recipe the sandbox image uses. Derived images are made by running one command in a container of the parent
image and committing it. Every image carries LABEL klear.recipe=<hash of what it is made of>, and one whose
recipe is unchanged is not rebuilt: a source edit redoes klear-app only (seconds), a dependency edit the venv.

pip in the build container is configured like pip on this host (`pip config list`, PIP_* variables): the
same index URLs, find-links and constraint files, with every local folder or file among them (file:// index
trees, wheel folders) mounted read-only at the same path. The container gets the network only when some
index is not local; its pip cache lives under ~/.cache/klear/compose/pip so rebuilds download nothing.

    python scripts/compose/images.py            # build what is missing or stale; print the tags
    python scripts/compose/images.py --force    # rebuild the derived images
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import logging
import os
import shlex
import subprocess
import sys
import tarfile
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from sandbox.image import ImageConfig, _client, _locked, rootfs_tarball  # noqa: E402

log = logging.getLogger("compose-images")

BASE, DEPS, APP, POSTGRES = ("klear-compose-base:local", "klear-compose-deps:local", "klear-app:local",
                             "klear-postgres:local")
BASE_PACKAGES = ("python3", "python3-venv")  # venv brings ensurepip; the rest comes from the indexes
POSTGRES_PACKAGES = ("postgresql",)  # Debian 12's PostgreSQL 15 (server, client, pg_isready)
RECIPE_LABEL = "klear.recipe"
BUILD_VERSION = 2  # bump when the way images are made changes (it is part of every recipe hash)
SRC_IN_IMAGE = "/opt/klear"
VENV = "/opt/venv"
PATH_ENV = f"PATH={VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "klear" / "compose"
# pip options that name indexes or files; their local paths are mounted into the build container
PIP_KEYS = ("index-url", "extra-index-url", "find-links", "constraint", "cert", "no-index")


def _hash(*parts) -> str:
    h = hashlib.sha256(str(BUILD_VERSION).encode())
    for p in parts:
        h.update(p if isinstance(p, bytes) else json.dumps(p, sort_keys=True).encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def recipe_of(client, tag: str) -> str | None:
    import docker

    try:
        return (client.images.get(tag).labels or {}).get(RECIPE_LABEL)
    except docker.errors.ImageNotFound:
        return None


# ------------------------------------------------------------------------------------------------ pip

def host_pip_options() -> dict[str, str]:
    """This host's pip settings that decide where packages come from, as {key: value}."""
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    opts: dict[str, str] = {}
    for line in out.splitlines():  # e.g.  global.extra-index-url='file:///a file:///b'   :env:.find-links='/w'
        key, _, value = line.partition("=")
        name = key.rpartition(".")[2]
        if name in PIP_KEYS:
            opts[name] = value.strip().strip("'\"")  # later lines (env) win, as in pip
    return opts


def _local_path(value: str) -> Path | None:
    path = value[len("file://"):] if value.startswith("file://") else value
    return Path(path) if path.startswith("/") and Path(path).exists() else None


def pip_setup(opts: dict[str, str]) -> tuple[dict[str, str], dict[str, dict], str]:
    """(PIP_* environment, read-only mounts, network mode) for a build container using `opts`."""
    env, mounts, remote = {}, {}, "index-url" not in opts and opts.get("no-index", "").lower() not in ("1", "true")
    for key, value in opts.items():
        env["PIP_" + key.upper().replace("-", "_")] = value
        if key == "no-index":
            continue
        for item in value.split():
            local = _local_path(item)
            if local is not None:
                top = local if local.is_dir() else local.parent
                if key in ("index-url", "extra-index-url"):
                    top = top.parent  # simple/ pages link to ../../files/: mount the index's root
                mounts[str(top)] = {"bind": str(top), "mode": "ro"}
            elif key in ("index-url", "extra-index-url", "find-links"):
                remote = True  # an index on the network (a missing local folder is only skipped by pip)
    return env, mounts, ("bridge" if remote else "none")


# ------------------------------------------------------------------------------------------ building

def import_rootfs(client, packages: tuple[str, ...], tag: str, changes: list[str]) -> str:
    """`docker import` a debootstrapped bookworm root with `packages` (the sandbox image's recipe)."""
    config = ImageConfig(packages=packages)
    recipe = _hash("rootfs", config.suite, config.variant, config.all_packages, changes)
    if recipe_of(client, tag) == recipe:
        return tag
    tar = rootfs_tarball(config)
    repo, _, version = tag.partition(":")
    log.info("docker import %s (%s)", tag, ", ".join(packages))
    client.api.import_image(src=str(tar), repository=repo, tag=version,
                            changes=changes + [f"LABEL {RECIPE_LABEL}={recipe}"])
    return tag


def derive(client, parent: str, tag: str, script: str, *, inputs: tuple = (), files: bytes | None = None,
           mounts: dict | None = None, env: dict | None = None, network: str = "none",
           changes: list[str] = (), force: bool = False) -> str:
    """Run `script` (sh) in a container of `parent` (after unpacking the tar `files` at /) and commit it,
    unless `tag` exists with the same recipe: the parent's recipe, `inputs` (what `files` and the script
    are made from), the script, `env` and `changes`. `env` is exported by the script, not set on the
    container, so the image does not keep it."""
    recipe = _hash(tag, recipe_of(client, parent), *inputs, script, sorted((env or {}).items()), list(changes))
    if not force and recipe_of(client, tag) == recipe:
        return tag
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in (env or {}).items())
    c = client.containers.create(parent, ["/bin/sh", "-ec", exports + script], volumes=mounts or {},
                                 network_mode=network, labels={"klear.compose.build": tag})
    try:
        if files is not None:
            c.put_archive("/", files)
        started = time.monotonic()
        log.info("building %s from %s", tag, parent)
        c.start()
        status = c.wait()["StatusCode"]
        if status != 0:
            tail = c.logs(tail=30).decode(errors="replace")
            raise RuntimeError(f"building {tag}: exit {status}\n{tail}")
        repo, _, version = tag.partition(":")
        c.commit(repository=repo, tag=version, changes=list(changes) + [f"LABEL {RECIPE_LABEL}={recipe}"])
        log.info("built %s in %.0fs", tag, time.monotonic() - started)
    finally:
        c.remove(force=True)
    return tag


def project_files() -> list[str]:
    """The checkout's files as git sees them (tracked + untracked-not-ignored), else a walk without caches."""
    try:
        out = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "-co", "--exclude-standard"],
                             capture_output=True, check=True).stdout
        names = [n for n in out.decode().split("\0") if n]
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", "klear-store", "__pycache__", ".pytest_cache", "build", "dist"}
        names = [str(p.relative_to(REPO)) for p in REPO.rglob("*")
                 if p.is_file() and not skip & set(p.relative_to(REPO).parts)
                 and not any(part.endswith(".egg-info") for part in p.parts)]
    return sorted(n for n in names if (REPO / n).is_file())


def tar_of(entries: dict[str, bytes], modes: dict[str, int] | None = None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in entries.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), (modes or {}).get(name, 0o644), 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def build_deps(client, force: bool) -> str:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    deps = pyproject["project"]["dependencies"] + pyproject["build-system"]["requires"]
    env, mounts, network = pip_setup(host_pip_options())
    pip_cache = CACHE / "pip"
    pip_cache.mkdir(parents=True, exist_ok=True)
    reqs = "".join(d + "\n" for d in deps).encode()
    script = (f"python3 -m venv {VENV}\n"
              f"{VENV}/bin/pip install -q --upgrade pip\n"
              f"{VENV}/bin/pip install -q -r /tmp/klear-requirements.txt\n"
              f"rm /tmp/klear-requirements.txt\n")
    return derive(client, BASE, DEPS, script, inputs=(deps,), files=tar_of({"tmp/klear-requirements.txt": reqs}),
                  force=force, mounts={**mounts, str(pip_cache): {"bind": "/root/.cache/pip", "mode": "rw"}},
                  env=env, network=network, changes=[f"ENV {PATH_ENV}", "ENV PYTHONUNBUFFERED=1"])


def build_app(client, force: bool) -> str:
    names = project_files()
    entries = {f"{SRC_IN_IMAGE.lstrip('/')}/{n}": (REPO / n).read_bytes() for n in names}
    modes = {f"{SRC_IN_IMAGE.lstrip('/')}/{n}": 0o755 for n in names if os.access(REPO / n, os.X_OK)}
    script = (f"{VENV}/bin/pip install -q --no-deps --no-build-isolation --no-index -e {SRC_IN_IMAGE}\n"
              "mkdir -p /data\n")  # PREFECT_HOME and the store live under /data (a volume on the worker)
    contents = tuple(k.encode() + b"\0" + v for k, v in entries.items()) + (json.dumps(modes, sort_keys=True),)
    return derive(client, DEPS, APP, script, inputs=contents, files=tar_of(entries, modes), force=force,
                  changes=[f"WORKDIR {SRC_IN_IMAGE}", 'CMD ["python3"]'])  # not the build script


def build_postgres(client, force: bool) -> str:
    root = "klear-postgres-root:local"
    import_rootfs(client, POSTGRES_PACKAGES, root, ["ENV LANG=C.UTF-8"])
    entry = (HERE / "postgres-entrypoint.sh").read_bytes()
    files = tar_of({"usr/local/bin/klear-postgres": entry}, {"usr/local/bin/klear-postgres": 0o755})
    return derive(client, root, POSTGRES, "true", inputs=(entry,), files=files, force=force,
                  changes=["ENV LANG=C.UTF-8 PGDATA=/var/lib/postgresql/data", "EXPOSE 5432",
                           'CMD ["/usr/local/bin/klear-postgres"]'])


def build_all(force: bool = False) -> list[str]:
    client = _client()
    CACHE.mkdir(parents=True, exist_ok=True)
    with _locked(CACHE / "build.lock"):
        import_rootfs(client, BASE_PACKAGES, BASE, ["ENV LANG=C.UTF-8"])
        return [BASE, build_deps(client, force), build_app(client, force), build_postgres(client, force)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--force", action="store_true", help="rebuild the derived images even if unchanged")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    started = time.monotonic()
    try:
        tags = build_all(args.force)
    except RuntimeError as exc:
        print(f"compose images: {exc}", file=sys.stderr)
        return 1
    for tag in tags:
        print(tag)
    log.info("images ready in %.0fs", time.monotonic() - started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
