"""Typed curation config: the flow's parameters (a UI form) and, field by field, `klear curate`'s flags
(flows/cli_config_options.py; a field whose flag is not its name says so in `metadata["flag"]`).

It checks itself when made, so the CLI and a deployment's parameters are refused with the same one-line
message naming the field and its flag: "near_dup_threshold (--near-threshold) must be at most 1.0 (got 2.0)".
"""
from __future__ import annotations

import datetime
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from tasks.config_checks import STRICT_KEYS, ConfigError, check_choice, check_float, check_int
from tasks.curation.layouts import LAYOUTS

DOMAINS = ("math", "code")
MAPPABLE_FIELDS = ("problem", "domain", "response", "answer", "tests", "solutions", "date", "meta")  # the
#   canonical fields a source row gives (schema.py PROBLEM_SCHEMA less `id` and `source`, which curation sets)
UNDATED_RULES = ("keep", "drop")  # rows without a date under a cutoff date: kept (and counted), or dropped
MIN_MEMORY = 64 * 2**20           # below this DuckDB and one part do not fit


class FlagError(ConfigError):
    """A ConfigError naming the flag that sets the field when it is not spelled like the field."""

    def __init__(self, field: str, detail: str, flag: str):
        super().__init__(field, detail, flag)


def flag_of(cls: type, name: str) -> str:
    """The flag of field `name`: its `metadata["flag"]`, else `--` + the name with dashes."""
    for f in fields(cls):
        if f.name == name and "flag" in f.metadata:
            return f.metadata["flag"]
    return "--" + name.replace("_", "-")


class _Checked:
    """Runs `_check` when made; its ConfigError comes out naming the field's own flag."""

    def __post_init__(self) -> None:
        try:
            self._check()
        except FlagError:
            raise
        except ConfigError as e:
            raise FlagError(e.field, e.detail, flag_of(type(self), e.field)) from None

    def fields_dict(self, exclude=()) -> dict[str, Any]:
        """The fields as a plain dict, less `exclude` (versioning.py keys dataset versions on it)."""
        exclude = set(exclude)
        return {k: v for k, v in asdict(self).items() if k not in exclude}


@dataclass
class SourceSpec(_Checked):
    __pydantic_config__ = STRICT_KEYS  # a key that is no setting is refused (config_checks.py)
    name: str                             # short name, recorded in every row's `source` column
    path: str = field(metadata={"flag": "--source"})  # a .jsonl or .parquet file (local or fsspec URL),
    #   or hf:DATASET[:SPLIT]
    layout: str = "canonical"             # field layout of the rows (layouts.py); canonical: already our schema
    field_map: dict[str, str] = field(default_factory=dict, metadata={"flag": "--map"})  # extra renames
    #   {raw field: canonical field}, applied before the layout
    domain: str | None = None             # math or code, for rows that carry none; None: rows must say

    def _check(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise FlagError("name", f"must be a non-empty source name (got {self.name!r})", "--source")
        check_choice(self, "layout", LAYOUTS)
        check_choice(self, "domain", DOMAINS, optional=True)
        self._check_field_map()

    def _check_field_map(self) -> None:
        """Every --map target is a canonical field a row can give (MAPPABLE_FIELDS): a rename onto any other
        name moves the field out of every row's reach (`--map s.problem=question` would drop every row as
        malformed and still publish the empty version), so it is refused before any work."""
        if not isinstance(self.field_map, dict):
            raise FlagError("field_map", f"must map a raw field to a canonical one (got {self.field_map!r})", "--map")
        onto: dict[str, str] = {}  # canonical field → the raw field mapped onto it
        for raw, canon in self.field_map.items():
            if canon not in MAPPABLE_FIELDS:
                raise FlagError("field_map", f"{self.name}.{raw}={canon}: {canon!r} is not a canonical field "
                                             f"(one of: {', '.join(MAPPABLE_FIELDS)})", "--map")
            if canon in onto:  # one of the two would be dropped in silence
                raise FlagError("field_map", f"{self.name}.{onto[canon]}={canon} and {self.name}.{raw}={canon}: "
                                             f"two fields mapped onto {canon!r}; keep one", "--map")
            onto[canon] = raw


@dataclass
class CurateConfig(_Checked):
    """`memory_limit`, `dask`, `dask_workers` and `work_dir` say how to run, not what to compute: a version
    is the same either way, so they are not in its content key (versioning.py EXECUTION_FIELDS)."""
    __pydantic_config__ = STRICT_KEYS  # a key that is no setting is refused (config_checks.py)
    sources: list[SourceSpec] = field(metadata={"flag": "--source"})  # input sources in priority order
    #   (earlier wins ties); dicts are read as SourceSpec. klear curate builds them from --source, --layout,
    #   --map and --domain
    benchmarks: dict[str, str] = field(default_factory=dict, metadata={"flag": "--benchmark"})  # NAME →
    #   PATH of the benchmarks to decontaminate against; none: no decontamination
    near_dup_threshold: float = field(default=0.8, metadata={"flag": "--near-threshold"})  # Jaccard
    #   threshold for near duplicates (0.8: a 1-3 word lead-in on a 30-word problem still scores ≥ 0.89)
    near_dup_num_perm: int = field(default=128, metadata={"flag": "--num-perm"})  # MinHash permutations
    #   (more: tighter estimates, slower; 128 holds the 14 bands × 9 rows the LSH uses at 0.8)
    near_dup_shingle: int = field(default=5, metadata={"flag": "--shingle"})  # Words per near-duplicate
    #   shingle (5: long enough that unrelated problems share almost none)
    ngram: int = 9                        # Contamination n-gram length in words (paper: 9)
    test_overlap: float = 0.5             # Code rows whose tests share at least this fraction of a
    #   benchmark problem's test cases (of the smaller set, trivial cases left out) are contaminated (0.5:
    #   far beyond chance for distinct problems, and a partly regenerated copy is still caught)
    cutoff_date: str | None = None        # YYYY-MM-DD: drop rows dated on or after it (after_cutoff);
    #   None: no cutoff
    undated: str = "keep"                 # With --cutoff-date, rows without a date: keep (counted in the
    #   summary) or drop (keep: most sources carry no date at all)
    top_sources: int | None = None        # Keep only the K best-scoring sources (None: all)
    seed: int = 0                         # Seed for MinHash permutations
    store: str | None = None              # Store directory (None: $KLEAR_STORE or ./klear-store)
    memory_limit: str | None = None       # Curate within about this much memory (e.g. 4GB): rows in
    #   Parquet parts on disk, grouping in DuckDB; the same dataset version whatever the limit. None: a
    #   quarter of the available memory, at most 4 GiB (tasks/curation/memory.py)
    dask: str | None = None               # ADDRESS of a Dask scheduler, or 'local' for a LocalCluster of
    #   --workers: curation's per-part work (signatures, n-gram scans) runs there, out of core (and with
    #   --verify-code the sandboxes)
    dask_workers: int = field(default=2, metadata={"flag": "--workers"})  # Workers of the local Dask
    #   cluster (--dask local; with --verify-code: sandbox containers); 2: one per core of a 2-core machine
    work_dir: str | None = None           # Out of core: directory for parts and spill files (default: a
    #   temporary one; on a Dask cluster a path every worker reaches)

    def _check(self) -> None:
        """Ranges, names and rules across fields, checked once for the CLI and deployments alike."""
        self.sources = [_source(s) for s in self.sources]
        names = [s.name for s in self.sources]
        if not names:
            raise ConfigError("sources", "must name at least one source")
        if dup := sorted({n for n in names if names.count(n) > 1}):
            raise ConfigError("sources", f"names must be unique: {', '.join(dup)} given twice")
        if not isinstance(self.benchmarks, dict):
            raise ConfigError("benchmarks", f"must map NAME to PATH (got {self.benchmarks!r})")
        check_float(self, "near_dup_threshold", 0.0, 1.0, above=True)
        check_int(self, "near_dup_num_perm", 16)
        check_int(self, "near_dup_shingle", 1)
        check_int(self, "ngram", 3)
        check_float(self, "test_overlap", 0.0, 1.0, above=True)
        self.cutoff_date = _iso_date(self.cutoff_date)
        check_choice(self, "undated", UNDATED_RULES)
        check_int(self, "top_sources", 1, optional=True)
        check_int(self, "seed", 0)  # MinHash seeds are unsigned
        check_int(self, "dask_workers", 1)
        if self.memory_limit is not None:
            from tasks.curation.memory import parse_size

            try:
                size = parse_size(self.memory_limit)
            except ValueError as e:
                raise ConfigError("memory_limit", str(e)) from None
            if size < MIN_MEMORY:
                raise ConfigError("memory_limit", f"{self.memory_limit!r} is below 64MiB, too little for DuckDB "
                                                  "and one part")
        if self.work_dir is not None:
            from tasks.curation.out_of_core import check_work_dir

            try:
                check_work_dir(self.work_dir)
            except ValueError as e:
                raise ConfigError("work_dir", str(e)) from None
        if self.dask not in (None, "local") and self.work_dir is None:
            raise ConfigError("work_dir", f"must be given with --dask {self.dask}: a directory every worker of "
                                          "that cluster reaches (parts are files)")


def _source(spec: SourceSpec | dict) -> SourceSpec:
    """A SourceSpec, or one made from its dict (a deployment's or a test's parameters)."""
    if isinstance(spec, SourceSpec):
        return spec
    known = {f.name for f in fields(SourceSpec)}
    if not isinstance(spec, dict) or not {"name", "path"} <= set(spec) or set(spec) - known:
        raise FlagError("sources", f"each source needs name and path, and only {', '.join(sorted(known))} "
                                   f"(got {spec!r})", "--source")
    return SourceSpec(**spec)


def _iso_date(value: object) -> str | None:
    """A cutoff day as YYYY-MM-DD text; YAML reads `2024-08-01` as a date, which is taken too."""
    from tasks.curation.cutoff import check_cutoff_date

    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        value = value.isoformat()
    if value is None:
        return None
    try:
        return check_cutoff_date(value)
    except ValueError as e:
        raise ConfigError("cutoff_date", f"{value}: {e}") from None
