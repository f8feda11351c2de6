"""A --store that `klear sft`, `klear rl`, `klear ablate` and `klear eval` only record in: a path with no store
yet is said in one warning line (a misspelt one would otherwise become a new store in silence)."""
from flows.cli_checks import recording_store_root
from storage.store import Store


def test_a_record_store_that_does_not_exist_yet_is_said_to_be_new(tmp_path, capsys):
    new = tmp_path / "nostore"
    assert recording_store_root(str(new), "its evaluations") == str(new)
    err = capsys.readouterr().err.splitlines()
    assert err == [f"klear: warning: --store {new}: no store there yet; this run creates one to record its evaluations"]
    assert not new.exists()  # created by the run's first write, not by the check


def test_an_existing_store_is_taken_without_a_word(tmp_path, capsys):
    import duckdb

    root = tmp_path / "store"
    root.mkdir()
    duckdb.connect(Store(str(root)).catalog_path).close()
    assert recording_store_root(str(root), "the checkpoint") == str(root)
    assert capsys.readouterr().err == ""
