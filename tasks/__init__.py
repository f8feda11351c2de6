"""The pipeline's logic, importable without Prefect (flows/ runs it).

On import, before any torch: OpenMP threads wait at a barrier by sleeping, not spinning
(OMP_WAIT_POLICY=PASSIVE), unless the user chose a policy. tasks/cpu_threads.py says why.
"""
import os as _os

_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
