"""Image recipe hashing, the rootfs -> image tarball step on a tiny fake rootfs, and the root filesystem's
prefetch (its build lock, its standard-library imports; a present image left alone: the one test that needs
Docker)."""
import fcntl
import io
import subprocess
import sys
import tarfile
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from sandbox.image import (RUNNER_IN_IMAGE, RUNNER_PATH, SANDBOX_UID, ImageConfig, compose_image_tar, ensure_image,
                           image_tag, prefetch_rootfs, recipe_hash, rootfs_path)


def test_tag_is_a_hash_of_the_recipe(tmp_path):
    base = ImageConfig(cache_dir=tmp_path)
    assert image_tag(base) == f"klear-sandbox:{recipe_hash(base)}"
    assert recipe_hash(base) == recipe_hash(ImageConfig(cache_dir=tmp_path / "other", mirror="http://x/"))
    assert recipe_hash(base) != recipe_hash(replace(base, packages=("python3", "vim")))
    cpp = replace(base, cpp=True)
    assert image_tag(cpp).startswith("klear-sandbox-cpp:") and recipe_hash(cpp) != recipe_hash(base)
    assert image_tag(replace(base, tag="mine:1")) == "mine:1"


def _add(tar, name, data=b"", mode=0o644, kind=tarfile.REGTYPE, link=""):
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.size, info.linkname = kind, mode, len(data), link
    tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)


def test_compose_adds_runner_and_user_strips_setuid_and_trims(tmp_path):
    rootfs = tmp_path / "rootfs.tar"
    with tarfile.open(rootfs, "w") as tar:
        for d in (".", "./etc", "./usr", "./usr/bin", "./usr/share", "./usr/share/doc", "./opt"):
            _add(tar, d, kind=tarfile.DIRTYPE, mode=0o755)
        _add(tar, "./etc/passwd", b"root:x:0:0:root:/root:/bin/bash\n")
        _add(tar, "./etc/group", b"root:x:0:\n")
        _add(tar, "./usr/bin/su", b"\x7fELF", mode=0o4755)
        _add(tar, "./usr/share/doc/README", b"docs")
        _add(tar, "./usr/bin/hard", kind=tarfile.LNKTYPE, link="./usr/share/doc/README")
    out = tmp_path / "image.tar"
    compose_image_tar(rootfs, out)
    with tarfile.open(out) as tar:
        names = [m.name for m in tar]
        assert len(names) == len(set(names))  # docker import rejects duplicate paths
        members = {m.name.lstrip("./"): m for m in tar}
        assert "usr/share/doc/README" not in members and "usr/bin/hard" not in members
        assert members["usr/bin/su"].mode & 0o6000 == 0
        passwd = tar.extractfile(members["etc/passwd"]).read().decode()
        assert f"sandbox:x:{SANDBOX_UID}:{SANDBOX_UID}" in passwd and passwd.startswith("root:")
        assert "sandbox" in tar.extractfile(members["etc/group"]).read().decode()
        runner = members[RUNNER_IN_IMAGE.lstrip("/")]
        assert tar.extractfile(runner).read() == RUNNER_PATH.read_bytes() and runner.mode == 0o644
        assert members["opt/klear"].isdir()


def test_prefetch_waits_for_the_build_lock_then_gives_the_cached_rootfs(tmp_path):
    config = ImageConfig(repository="klear-sandbox-never-built", cache_dir=tmp_path)
    rootfs_path(config).write_bytes(b"a cached root filesystem")  # debootstrap would make it
    done: list = []
    with open(tmp_path / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another build holds the lock
        worker = threading.Thread(target=lambda: done.append((prefetch_rootfs(config), time.monotonic())))
        worker.start()
        worker.join(0.5)
        released = time.monotonic()
    worker.join(30)
    assert done and done[0][0] == rootfs_path(config)
    assert done[0][1] >= released  # it returned only once the lock was free


def test_prefetch_imports_nothing_but_the_standard_library():
    """make runs prefetch_rootfs with the new venv's bare python, before the project installs."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import sandbox.image; "
            "print(sorted({m.split('.')[0] for m in sys.modules}"
            " - set(sys.stdlib_module_names) - {'sandbox', '__main__'}))")
    out = subprocess.run([sys.executable, "-S", "-c", code, str(Path(__file__).resolve().parents[2])],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


@pytest.mark.docker
def test_prefetch_leaves_a_present_image_alone(tmp_path):
    config = ImageConfig(cache_dir=tmp_path / "cache")
    ensure_image(replace(config, cache_dir=ImageConfig().cache_dir))  # the suite's image
    assert prefetch_rootfs(config) is None and not (tmp_path / "cache").exists()
