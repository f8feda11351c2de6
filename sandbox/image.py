"""Build the sandbox image from Debian packages, with no container registry.

    debootstrap --variant=minbase --include=python3,python3-sortedcontainers bookworm ROOT   (cached)
    + /opt/klear/runner.py, a non-root `sandbox` user, setuid bits stripped, docs trimmed
    | docker import  ->  klear-sandbox:<recipe hash>

The tag is a hash of the recipe (this file, runner.py and the package list), so an unchanged recipe is
never rebuilt and a changed one never reuses a stale image. Users with a registry can build the
equivalent `sandbox/Dockerfile` instead and point `ImageConfig.tag` at it.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import logging
import os
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
RUNNER_PATH = HERE / "runner.py"
RUNNER_IN_IMAGE = "/opt/klear/runner.py"
RUNNER_CMD = ["/usr/bin/python3", "-I", RUNNER_IN_IMAGE, "--sandbox"]
SANDBOX_UID = 10001  # the image's default user; the pool may pick other non-root uids per container
# Paths dropped from the root filesystem: documentation and package caches nobody runs.
TRIM_PREFIXES = ("usr/share/doc/", "usr/share/man/", "usr/share/info/", "usr/share/locale/",
                 "var/cache/apt/", "var/lib/apt/lists/", "var/cache/debconf/", "var/log/")


def _default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "klear" / "sandbox"


@dataclass(frozen=True)
class ImageConfig:
    repository: str = "klear-sandbox"  # local image name; nothing is pushed or pulled
    suite: str = "bookworm"  # Debian 12: the same CPython 3.11 as the host's /usr/bin/python3 baseline
    variant: str = "minbase"  # only essential packages; everything else is a way in
    # full stdlib (python3-minimal lacks json, decimal, asyncio), and the one third-party module LeetCode's
    # Python judge offers that its solutions use: sortedcontainers (SortedList, SortedDict), pure Python
    packages: tuple[str, ...] = ("python3", "python3-sortedcontainers")
    cpp: bool = False  # add g++ for `language: cpp` rows; off by default (≈ +200 MB, slower build)
    mirror: str = field(default_factory=lambda: os.environ.get(
        "KLEAR_DEBIAN_MIRROR", "http://deb.debian.org/debian"))  # any bookworm mirror; not in the tag
    cache_dir: Path = field(default_factory=_default_cache)  # debootstrap tarballs, reused across builds
    tag: str | None = None  # set to use a prebuilt image (e.g. from the Dockerfile) instead of building

    @property
    def all_packages(self) -> tuple[str, ...]:
        return tuple(sorted(set(self.packages) | ({"g++"} if self.cpp else set())))


def recipe_hash(config: ImageConfig) -> str:
    """sha256 over everything that determines the image's content (the mirror does not)."""
    h = hashlib.sha256()
    h.update(json.dumps({"suite": config.suite, "variant": config.variant,
                         "packages": config.all_packages}, sort_keys=True).encode())
    for path in (Path(__file__).resolve(), RUNNER_PATH):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def image_repository(config: ImageConfig) -> str:
    return config.repository + ("-cpp" if config.cpp else "")


def image_tag(config: ImageConfig | None = None) -> str:
    config = config or ImageConfig()
    return config.tag or f"{image_repository(config)}:{recipe_hash(config)}"


def _client():
    import docker  # imported lazily: unit tests of the pure modules need no Docker SDK

    return docker.from_env(timeout=300)


def image_exists(tag: str, client=None) -> bool:
    import docker

    client = client or _client()
    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


@contextlib.contextmanager
def _locked(path: Path):
    """Serialise builds across processes (Dask workers, parallel test runs) on one host."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def rootfs_path(config: ImageConfig) -> Path:
    """Where the recipe's root filesystem tarball is cached: named by a hash of suite, variant, packages and
    mirror."""
    key = hashlib.sha256(json.dumps([config.suite, config.variant, config.all_packages,
                                     config.mirror]).encode()).hexdigest()[:16]
    return config.cache_dir / f"rootfs-{config.suite}-{key}.tar"


def rootfs_tarball(config: ImageConfig) -> Path:
    """The debootstrapped root as a tarball under the cache dir; created once (≈ 30 s), then reused."""
    out = rootfs_path(config)
    if out.exists():
        return out
    if shutil.which("debootstrap") is None:
        raise RuntimeError("debootstrap not found: install it (apt-get install debootstrap) or run "
                           "scripts/ensure-docker.sh, or build sandbox/Dockerfile and set ImageConfig.tag")
    if os.geteuid() != 0:
        raise RuntimeError("debootstrap needs root; run `klear sandbox build` as root once, "
                           "or build sandbox/Dockerfile and set ImageConfig.tag")
    config.cache_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="rootfs-", dir=config.cache_dir))
    try:
        root = work / "root"
        cmd = ["debootstrap", f"--variant={config.variant}", f"--include={','.join(config.all_packages)}",
               config.suite, str(root), config.mirror]
        log.info("debootstrap: %s", " ".join(cmd))
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
            raise RuntimeError(f"debootstrap failed (exit {proc.returncode}): {' | '.join(tail)}")
        tmp = work / "rootfs.tar"
        subprocess.run(["tar", "-C", str(root), "--numeric-owner", "-cf", str(tmp), "."], check=True)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def prefetch_rootfs(config: ImageConfig | None = None) -> Path | None:
    """Make the recipe's root filesystem tarball now (under the build lock, so a `build_image` started
    meanwhile waits for it instead of running its own debootstrap), unless the image is already present;
    None then. Standard library and the `docker` command only: `make` runs it with the new venv's bare
    python in the background while the project installs (scripts/sandbox-prefetch.sh), so the image build
    after the install only composes and imports."""
    config = config or ImageConfig()
    if config.tag or _listed_by_docker_cli(image_tag(config)):
        return None
    with _locked(config.cache_dir / "build.lock"):
        return rootfs_tarball(config)


def _listed_by_docker_cli(tag: str) -> bool:
    try:
        return subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode == 0
    except OSError:  # no docker command
        return False


def _user_lines(member: tarfile.TarInfo, data: bytes) -> bytes:
    name = member.name.lstrip("./")
    if name == "etc/passwd":
        data += f"sandbox:x:{SANDBOX_UID}:{SANDBOX_UID}:klear sandbox:/tmp:/usr/sbin/nologin\n".encode()
    elif name == "etc/group":
        data += f"sandbox:x:{SANDBOX_UID}:\n".encode()
    return data


def compose_image_tar(rootfs: Path, out: Path) -> None:
    """Copy the rootfs tarball, trimmed and hardened, adding the runner and the sandbox user."""
    skipped: set[str] = set()
    seen: set[str] = set()
    with tarfile.open(rootfs) as src, tarfile.open(out, "w") as dst:
        for m in src:
            name = m.name.lstrip("./")
            seen.add(name.rstrip("/"))
            if name.startswith(TRIM_PREFIXES) or (m.islnk() and m.linkname.lstrip("./") in skipped):
                skipped.add(name)
                continue
            m.mode &= ~0o6000  # no setuid/setgid binaries (no-new-privileges also blocks them)
            if m.isfile():
                data = src.extractfile(m).read()
                if name in ("etc/passwd", "etc/group"):
                    data = _user_lines(m, data)
                    m.size = len(data)
                dst.addfile(m, io.BytesIO(data))
            else:
                dst.addfile(m)
        for d in ("opt", "opt/klear"):
            if d in seen:
                continue
            info = tarfile.TarInfo("./" + d)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            dst.addfile(info)
        body = RUNNER_PATH.read_bytes()
        info = tarfile.TarInfo("." + RUNNER_IN_IMAGE)
        info.size, info.mode = len(body), 0o644
        dst.addfile(info, io.BytesIO(body))


def build_image(force: bool = False, config: ImageConfig | None = None, client=None) -> str:
    """Build the sandbox image unless one with this recipe's tag exists; return the tag."""
    config = config or ImageConfig()
    tag = image_tag(config)
    client = client or _client()
    if config.tag:
        if not image_exists(tag, client):
            raise RuntimeError(f"image {tag} (ImageConfig.tag) is not present; build sandbox/Dockerfile")
        return tag
    with _locked(config.cache_dir / "build.lock"):
        if not force and image_exists(tag, client):
            return tag
        rootfs = rootfs_tarball(config)
        with tempfile.TemporaryDirectory(dir=config.cache_dir) as tmp:
            tar = Path(tmp) / "image.tar"
            compose_image_tar(rootfs, tar)
            repo, _, version = tag.partition(":")
            changes = [f"USER {SANDBOX_UID}", "WORKDIR /tmp",
                       "ENV PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 HOME=/tmp",
                       f"CMD {json.dumps(RUNNER_CMD)}",
                       f"LABEL klear.recipe={version}"]
            log.info("docker import %s", tag)
            client.api.import_image(src=str(tar), repository=repo, tag=version, changes=changes)
        _prune_other_tags(client, image_repository(config), tag)
    return tag


def _prune_other_tags(client, repository: str, keep: str) -> None:
    """Drop images of older recipes; one still used by a container is left alone (no force)."""
    for image in client.images.list(name=repository):
        for other in image.tags:
            if other != keep and other.startswith(repository + ":"):
                try:
                    client.images.remove(other, noprune=False)
                    log.info("removed old sandbox image %s", other)
                except Exception as exc:
                    log.debug("keeping %s: %s", other, exc)


def ensure_image(config: ImageConfig | None = None, client=None) -> str:
    """The tag of a present sandbox image, building it first if needed."""
    return build_image(force=False, config=config, client=client)
