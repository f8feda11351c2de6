"""Records: the one reader of input rows (sources.py), below curation and verification so both read with it."""
