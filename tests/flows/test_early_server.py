"""A command's temporary Prefect server starts while the command imports its flow (flows/cli_prefect.py:
start_temporary_server / wait_for_temporary_server): in a thread of its own, waited for before the flow
runs, its failure raised there; never with an API configured. The server class is a stand-in here; the
real server's start through these functions runs in every `klear` subprocess test without PREFECT_API_URL
(tests/flows/test_faults_cli.py among them)."""
import threading

import pytest

import flows.cli_prefect as cli_prefect


class _Server:
    """Stands in for Prefect's SubprocessASGIServer: its start blocks until released, or fails."""

    fail: Exception | None = None

    def __init__(self):
        self.release = threading.Event()
        self.started_in: str | None = None
        self.starts = 0

    def start(self):
        self.starts += 1
        self.started_in = threading.current_thread().name
        assert self.release.wait(10)
        if self.fail:
            raise self.fail


@pytest.fixture
def server(monkeypatch):
    from prefect.server.api import server as prefect_server

    fake = _Server()
    monkeypatch.setattr(prefect_server, "SubprocessASGIServer", lambda: fake)
    monkeypatch.setattr(cli_prefect, "api_url", lambda: None)
    monkeypatch.setattr(cli_prefect, "tie_temporary_server", lambda: None)
    yield fake
    fake.release.set()
    try:
        cli_prefect.wait_for_temporary_server()  # leave no start behind for the next test
    except RuntimeError:
        pass


def test_the_server_starts_in_a_thread_and_the_flow_waits_for_it(server):
    cli_prefect.start_temporary_server()  # returns while the server is still starting
    cli_prefect.start_temporary_server()  # a second call starts nothing more
    waited = threading.Thread(target=cli_prefect.wait_for_temporary_server)
    waited.start()
    waited.join(0.2)
    assert waited.is_alive()  # the flow's side waits ...
    server.release.set()
    waited.join(10)
    assert not waited.is_alive()  # ... until the server answers
    assert server.started_in == "klear-prefect-server" and server.starts == 1


def test_a_failed_start_is_raised_where_the_flow_would_run(server):
    server.fail = RuntimeError("Timed out while attempting to connect to ephemeral Prefect API server.")
    cli_prefect.start_temporary_server()
    server.release.set()
    with pytest.raises(RuntimeError, match="Timed out"):
        cli_prefect.wait_for_temporary_server()
    cli_prefect.wait_for_temporary_server()  # raised once; nothing left to wait for


def test_a_command_whose_server_failed_to_start_says_so_in_one_line_and_runs_no_flow(server):
    from flows.cli_common import UserError, run_flow

    server.fail = RuntimeError("Timed out while attempting to connect to ephemeral Prefect API server.\nstdout: …")
    cli_prefect.start_temporary_server()
    server.release.set()
    ran = []
    with pytest.raises(UserError) as err:
        run_flow(lambda: ran.append(1))
    assert str(err.value) == ("Prefect's temporary server did not start: RuntimeError: Timed out while attempting "
                              "to connect to ephemeral Prefect API server.")
    assert ran == []


def test_no_server_starts_with_an_api_configured(monkeypatch):
    from prefect.server.api import server as prefect_server

    made = []
    monkeypatch.setattr(prefect_server, "SubprocessASGIServer", lambda: made.append(1))
    monkeypatch.setattr(cli_prefect, "api_url", lambda: "http://127.0.0.1:4200/api")
    cli_prefect.start_temporary_server()
    cli_prefect.wait_for_temporary_server()  # nothing to wait for
    assert made == []
