"""Records, below curation and verification so that every stage reads rows the same way: the source readers
(sources.py: every input row numbered, a bad one carrying its reason), the one reader of rows taken as
given with its one bad-row rule (reader.py), and the `dropped` row (schema.py)."""
