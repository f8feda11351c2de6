"""The pipeline's logic, importable without Prefect (flows/ runs it).

On import, before any torch: OpenMP threads spin only briefly at a barrier before they sleep
(GOMP_SPINCOUNT, tasks/cpu_threads.py's `brief_spin`), unless the user chose a wait policy.
tasks/cpu_threads.py says why.
"""
from tasks.cpu_threads import brief_spin as _brief_spin

_brief_spin()
