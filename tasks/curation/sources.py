"""The source readers, which live in tasks/records/sources.py (below curation, so verification reads with
them too); re-exported here for the curation modules that import them by this name."""
from tasks.records.sources import (MAX_DEPTH, READERS, RawRow, Reader, SourceError, check_embedded_json,  # noqa: F401
                                   check_json, check_source_file, check_value, parse_line, read_hf, read_jsonl,
                                   read_parquet, read_source, register_reader, source_kind)
