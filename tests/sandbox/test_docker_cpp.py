"""C++ submissions (stdin/stdout) on the g++ image. Builds `klear-sandbox-cpp` when missing (≈ 2 min
the first time, for debootstrap; seconds after). Skipped unless that image exists or KLEAR_TEST_CPP=1."""
import os

import pytest

from sandbox import ImageConfig, JudgeConfig, Limits, PoolConfig, SandboxPool, verify_submission
from sandbox.image import image_exists, image_tag

pytestmark = [pytest.mark.docker, pytest.mark.slow]
CPP = ImageConfig(cpp=True)


@pytest.fixture(scope="module")
def pool():
    try:
        import docker

        client = docker.from_env(timeout=300)
        client.ping()
    except Exception:
        pytest.skip("no Docker engine")
    if not (os.environ.get("KLEAR_TEST_CPP") == "1" or image_exists(image_tag(CPP), client)):
        pytest.skip("no g++ image (klear sandbox build --cpp, or KLEAR_TEST_CPP=1)")
    with SandboxPool(PoolConfig(size=1, image=CPP), client=client) as pool:
        yield pool


SUM = "#include <cstdio>\nint main(){long a,b; scanf(\"%ld %ld\",&a,&b); printf(\"%ld\\n\", a+b);}"
TESTS = {"inputs": ["1 2\n", "40 2\n"], "outputs": ["3\n", "42"]}


@pytest.mark.parametrize("code, verdict", [
    (SUM, "accepted"),
    (SUM.replace("a+b", "a-b"), "wrong_answer"),
    ("int main(){ return 3; }", "runtime_error"),
    ("int main(){ int *p = 0; return *p; }", "runtime_error"),
    ("int main(){ for(;;); }", "timeout"),
    ("#include <vector>\nint main(){ std::vector<char> v(8ul << 30); return v[1]; }", "runtime_error"),
    ("int main( { }", "compile_error"),
])
def test_cpp(pool, code, verdict):
    out = verify_submission({"id": "c", "language": "cpp", "code": code, "tests": TESTS}, pool,
                            JudgeConfig(limits=Limits(time_limit_s=1.0)))
    assert out["verdict"] == verdict, out["details"]
    if verdict == "compile_error":
        assert "error" in out["details"]["reason"]


# A program that deletes or rewrites its own binary only spoils its own test: the next test runs a fresh
# copy of the compiled program (never a sandbox_error, never state carried over).
SELF_HARM = r"""
#include <cstdio>
#include <unistd.h>
#include <fcntl.h>
int main(){
    long a, b; scanf("%ld %ld", &a, &b);
    char path[4096]; ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n > 0) { path[n] = 0; MODE }
    printf("%ld\n", a + b);
}
"""


@pytest.mark.parametrize("mode", ["unlink(path);", "int fd = open(path, O_WRONLY | O_TRUNC); if (fd >= 0) close(fd);"],
                         ids=["unlink", "truncate"])
def test_a_program_that_harms_its_binary_hurts_only_itself(pool, mode):
    out = verify_submission({"id": "c", "language": "cpp", "code": SELF_HARM.replace("MODE", mode), "tests": TESTS},
                            pool, JudgeConfig(limits=Limits(time_limit_s=1.0)))
    assert out["verdict"] == "accepted", out["details"]
