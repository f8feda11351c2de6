"""`klear curate`: its flags are CurateConfig's fields (cli_config_options.py), plus the ones that build the
sources (--source, --layout, --map, --domain), --benchmark, --store and the --verify-code stage's.

Before any work it refuses, in one line, an empty source and a --map whose field no row has
(tasks/curation/source_fields.py); it warns, as `klear pipeline` does (tasks/pipeline/data_alarms.py), of a
source read with the canonical layout whose rows are a raw dataset's (before the run), and after it of a
source that kept no row and of kept math rows without an answer (`klear: warning: ...` on stderr, exit 0)."""
from __future__ import annotations

import sys
from typing import Optional

import typer
from rich.table import Table

from flows.cli_checks import check_dask, check_source_path, check_work_dir, store_root
from flows.cli_common import StoreOpt, UserError, checked, console, parse_pairs, quiet_prefect_defaults, run_flow
from flows.cli_config_options import build_config, with_config_options
from tasks.curation.config import CurateConfig
from tasks.curation.layouts import LAYOUTS
from tasks.verification.strength import StrengthConfig


def build_curate_config(sources: dict[str, str], benchmarks: dict[str, str], layouts: dict[str, str],
                        maps: list[str], domains: dict[str, str], **settings) -> CurateConfig:
    """The config from the parsed source flags and the generated ones (`settings`); every file is
    checked first, then the config checks itself."""
    field_maps: dict[str, dict[str, str]] = {}
    for m in maps:
        lhs, ok, canon = m.partition("=")
        src, field = split_map_field(lhs, sources)
        if not (ok and src and field and canon):
            raise UserError(f"--map {m!r}: expected SOURCE.FIELD=CANONICAL_FIELD")
        given = field_maps.setdefault(src, {})
        if given.get(field, canon) != canon:  # the last would win, and the first rename be lost in silence
            raise UserError(f"--map {m!r}: {src}.{field} is already mapped to {given[field]!r}")
        given[field] = canon
    for flag, d in (("--layout", layouts), ("--map", field_maps), ("--domain", domains)):
        for src in d:
            if src not in sources:
                raise UserError(f"{flag} names source {src!r}, which no --source defines")
    for name, path in sources.items():
        check_source_path("--source", name, path)
    for name, path in benchmarks.items():
        check_source_path("--benchmark", name, path)
    specs = [{"name": n, "path": p, "layout": layouts.get(n, "canonical"), "field_map": field_maps.get(n, {}),
              "domain": domains.get(n)} for n, p in sources.items()]
    return checked(lambda: build_config(CurateConfig, {**settings, "sources": specs, "benchmarks": benchmarks}))


def split_map_field(lhs: str, sources: dict[str, str]) -> tuple[str, str]:
    """`SOURCE.FIELD` of a --map → (source, field). FIELD may be a dotted path into nested objects
    (`mine.data.question`: layouts.field_at), and a source name may hold dots itself: the longest source
    name given with --source that `lhs` starts with wins, else the text before the first dot."""
    named = [n for n in sources if lhs.startswith(n + ".")]
    src = max(named, key=len) if named else lhs.partition(".")[0]
    return src, lhs[len(src) + 1:]


def check_sources_before_work(config: CurateConfig) -> dict:
    """The sources' own checks (tasks/curation/source_fields.py) as one line naming the flag; returns each
    source's first row (the layout alarm reads it)."""
    from tasks.curation.source_fields import EmptySource, UnmatchedMap, check_sources
    from tasks.records.sources import SourceError

    try:
        return check_sources(config.sources)
    except EmptySource as e:  # as `klear eval` refuses an empty benchmark
        raise UserError(f"--source {e.name}={e.path}: has no rows (nothing to curate)") from None
    except UnmatchedMap as e:
        raise UserError(f"--map {e}") from None
    except SourceError as e:  # a file that cannot be read past some line
        raise UserError(f"--source {e}") from None


def warn(lines: list[str]) -> None:
    """Data alarms (tasks/pipeline/data_alarms.py), one `klear: warning:` line each on stderr."""
    for line in lines:
        print(f"klear: warning: {line}", file=sys.stderr, flush=True)


def curation_alarms(version: dict, store_root: str) -> list[str]:
    """What a curated version lost or cannot use, in `klear pipeline`'s words: a source that kept no row, and
    kept math rows without an answer (all of a source's, or some: data_alarms.unanswered_math_alarms)."""
    from storage.store import Store
    from tasks.pipeline.data_alarms import lost_source_alarms, math_answers_by_source, unanswered_math_alarms

    kept = Store(store_root).read_table(version["id"], "problems", columns=["source", "domain", "answer"])
    return (lost_source_alarms(version["inputs"].get("by_source", {}))
            + unanswered_math_alarms(math_answers_by_source(kept), some=True))


def print_curation_summary(version: dict, store_root: str) -> None:
    from tasks.curation.pipeline import ALL_REASONS

    counts, by_source = version["counts"], version["inputs"].get("by_source", {})
    scores = version["inputs"].get("source_scores", {})
    reasons = [r for r in ALL_REASONS if r in counts] + sorted(k for k in counts if k != "kept" and k not in ALL_REASONS)
    table = Table(title=f"dataset {version['id']}: rows in = kept + dropped")
    for col in ["source", "score", "rows in", "kept", *reasons]:
        table.add_column(col, justify="left" if col == "source" else "right")
    for src, c in by_source.items():
        table.add_row(src, f"{scores.get(src, 0):.2f}", str(c["rows_in"]), str(c["kept"]), *(str(c.get(r, 0)) for r in reasons))
    table.add_row("TOTAL", "", str(version["rows_in"]), str(counts["kept"]), *(str(counts[r]) for r in reasons), style="bold")
    console.print(table)
    if version["inputs"].get("undated_kept") is not None:
        console.print(f"undated rows kept under the cutoff date: {version['inputs']['undated_kept']}")
    print_catalog_line(store_root)


def print_catalog_line(store_root: str) -> None:
    """Where the catalog is and what a user can query there: its tables and the views published so far."""
    from storage.catalog import Catalog
    from storage.store import Store

    path = Store(store_root).catalog_path
    views = Catalog(path).views()
    console.print(f"catalog: {path}  (tables: datasets, checkpoints, evaluations"
                  + (f"; views: {', '.join(views)})" if views else ")"), soft_wrap=True)


@with_config_options(CurateConfig, skip=("sources", "benchmarks"))
def curate(
    source: list[str] = typer.Option(..., "--source", help="NAME=PATH (.jsonl, .parquet or hf:DATASET[:SPLIT]); repeat"),
    benchmark: Optional[list[str]] = typer.Option(None, "--benchmark", help="NAME=PATH of a benchmark to decontaminate against; repeat"),
    store: Optional[str] = StoreOpt,
    layout: Optional[list[str]] = typer.Option(None, "--layout", help="NAME=LAYOUT field layout of a source (one of: " + ", ".join(sorted(LAYOUTS)) + ")"),
    map_: Optional[list[str]] = typer.Option(None, "--map", help="SOURCE.FIELD=CANONICAL rename a source field, e.g. mydata.question=problem (a nested one by its dotted path: mydata.data.question=problem)"),
    domain: Optional[list[str]] = typer.Option(None, "--domain", help="NAME=math|code default domain of a source's rows"),
    verify_code: bool = typer.Option(False, "--verify-code", help="Then run code references against their tests in the sandbox"),
    min_tests: int = typer.Option(16, "--min-tests", help="With --verify-code: code problems with fewer tests are dropped (paper: 16)"),
    mutants: int = typer.Option(StrengthConfig.mutants, "--mutants", help="With --verify-code: mutants of each passing reference run against its tests, to find tests that accept wrong programs (0: off)"),
    max_survival: float = typer.Option(StrengthConfig.max_survival, "--max-survival", help="With --verify-code: weak_tests when the tests accept more than this fraction of the mutants shown to behave differently"),
    weak_tests: str = typer.Option(StrengthConfig.weak_tests, "--weak-tests", help="With --verify-code: drop problems with weak tests, or tag them (kept, flagged in verifications)"),
    mutant_seed: int = typer.Option(StrengthConfig.mutant_seed, "--mutant-seed", help="With --verify-code: seed for the mutants, probe inputs and screening tests"),
    **settings,
) -> None:
    """Ingest sources into one schema; drop malformed, duplicate, near-duplicate and contaminated rows (a
    benchmark's statement or, for code, its tests), rows dated on/after --cutoff-date (and, with
    --verify-code, code problems with too few tests, a failing reference or weak tests)."""
    if min_tests < 0:
        raise UserError(f"--min-tests must be at least 0 (got {min_tests})")
    strength = checked(lambda: StrengthConfig(mutants=mutants, max_survival=max_survival, weak_tests=weak_tests,
                                              mutant_seed=mutant_seed))
    config = build_curate_config(
        parse_pairs(source, "--source"), parse_pairs(benchmark, "--benchmark"), parse_pairs(layout, "--layout"),
        list(map_ or []), parse_pairs(domain, "--domain"), store=store_root(store), **settings)
    if config.work_dir is not None:
        check_work_dir(config.work_dir)
    first_rows = check_sources_before_work(config)
    from tasks.curation.steps import check_benchmarks
    from tasks.records.sources import SourceError

    try:  # before any work: an empty benchmark would otherwise be found after ingest and dedup
        check_benchmarks(config.benchmarks)
    except SourceError as e:
        raise UserError(f"--benchmark {e}") from None
    if verify_code and config.dask in (None, "local"):  # the sandboxes run here: a Docker engine must answer
        from flows.verify_cli import docker_client

        docker_client()
    if config.dask not in (None, "local"):  # before Prefect starts: a refused address fails in a second, not twenty
        check_dask(config.dask)
    from tasks.pipeline.data_alarms import layout_alarms

    warn(layout_alarms(first_rows, {s.name: s.layout for s in config.sources}))
    quiet_prefect_defaults()
    from flows.curate import curate as curate_flow
    from tasks.dask_client import DaskError
    from tasks.records.sources import SourceError

    version = run_flow(curate_flow, config, user_errors=(SourceError, DaskError))
    if verify_code:
        version = _run_verify(config.store, min_tests, config.dask_workers,
                              None if config.dask == "local" else config.dask, strength)
    print_curation_summary(version, config.store)
    warn(curation_alarms(version, config.store))


def _run_verify(store: str, min_tests: int, workers: int, dask: str | None, strength: StrengthConfig) -> dict:
    from flows.verify import verify as verify_flow
    from sandbox.container import SandboxFault

    try:
        return verify_flow(store=store, min_tests=min_tests, workers=workers, dask_address=dask,
                           test_strength=strength)
    except SandboxFault as e:
        raise UserError(f"--verify-code: {e} (is the Docker engine running? see scripts/ensure-docker.sh)") from None
