"""Docker sandbox for untrusted code: image build, warm container pool, in-container runner, verdicts.

    from sandbox import SandboxPool, verify_submission
    with SandboxPool() as pool:
        verify_submission({"id": "a", "code": "print(int(input()) * 2)",
                           "tests": {"inputs": ["2\\n"], "outputs": ["4\\n"]}}, pool)
    # {'id': 'a', 'verdict': 'accepted', 'passed': 1, 'total': 1, 'reward': 1.0, 'details': {...}}

No Prefect here; stdlib logging only. Docker is imported lazily, so the pure parts (tests parsing,
comparison, verdicts) work without it.
"""
from sandbox.config import ContainerConfig, JudgeConfig, Limits, PoolConfig
from sandbox.image import ImageConfig, build_image, ensure_image, image_tag
from sandbox.judge import prepare, verify_submission
from sandbox.pool import SandboxPool, SandboxUnavailable
from sandbox.reaper import reap
from sandbox.submission import Submission
from sandbox.testcases import InvalidTests, TestSuite, count_tests, parse_test_suite, sample_indices
from sandbox.verdicts import VERDICTS

__all__ = ["ContainerConfig", "ImageConfig", "InvalidTests", "JudgeConfig", "Limits", "PoolConfig",
           "SandboxPool", "SandboxUnavailable", "Submission", "TestSuite", "VERDICTS", "build_image", "ensure_image",
           "count_tests", "image_tag", "parse_test_suite", "prepare", "reap", "sample_indices", "verify_submission"]
