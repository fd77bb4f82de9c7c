"""The bridge that lets a service's forked and spawned children use it (d2k_env/service/bridge.py):
jobs go to the service's submit and results come back, a peer without the key is refused, a
closed service is an error that says so, and a temporary directory too deep for a socket path
still works. The service here is a stand-in that answers at once; tests/test_async_vector_services.py
runs the real ones in async vector envs."""

import pickle
import tempfile
from concurrent.futures import Future
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client

import pytest

from d2k_env.evaluator.protocol import EvalResult
from d2k_env.service.bridge import BridgeClient, BridgeServer
from d2k_env.service.job import EvalJob


def answering(job: EvalJob) -> Future:
    """A service's submit that answers at once: the job's mode, its source as the error."""
    future = Future()
    future.set_result(EvalResult(job.mode, "interpreter", error=f"seen: {job.source}"))
    return future


def failing(job: EvalJob) -> Future:
    raise RuntimeError("the evaluation service is closed")


@pytest.mark.parametrize("depth", [0, 120], ids=["short-path", "path-too-long-for-a-socket"])
def test_a_pickled_client_gets_the_service_s_results(tmp_path, monkeypatch, depth):
    if depth:  # else the machine's temporary directory, short enough (pytest's own is not always)
        deep = tmp_path / ("d" * depth)
        deep.mkdir()
        monkeypatch.setattr(tempfile, "tempdir", str(deep))
    server = BridgeServer(answering, "interpreter")
    try:
        assert server.address.startswith("\0") == bool(depth)
        client = pickle.loads(pickle.dumps(BridgeClient(server.address, server.authkey, "interpreter")))
        futures = [client.submit(EvalJob("fused_add_rmsnorm", f"source {i}", "test")) for i in range(3)]
        assert [f.result(timeout=60).error for f in futures] == ["seen: source 0", "seen: source 1", "seen: source 2"]
        client.close()
    finally:
        server.close()


def test_a_peer_without_the_key_is_refused_and_the_server_goes_on():
    server = BridgeServer(answering, "interpreter")
    try:
        with pytest.raises(AuthenticationError):
            Client(server.address, "AF_UNIX", authkey=b"not the key")
        client = BridgeClient(server.address, server.authkey, "interpreter")
        assert client.submit(EvalJob("fused_add_rmsnorm", "x", "test")).result(timeout=60).error == "seen: x"
    finally:
        server.close()


def test_a_service_error_and_a_closed_service_reach_the_child_as_messages():
    server = BridgeServer(failing, "interpreter")
    client = BridgeClient(server.address, server.authkey, "interpreter")
    with pytest.raises(RuntimeError, match="RuntimeError: the evaluation service is closed"):
        client.submit(EvalJob("fused_add_rmsnorm", "x", "test")).result(timeout=60)
    server.close()
    with pytest.raises(RuntimeError, match="the evaluation service this process was given is gone"):
        client.submit(EvalJob("fused_add_rmsnorm", "x", "test")).result(timeout=60)
    late = BridgeClient(server.address, server.authkey, "interpreter")
    with pytest.raises(RuntimeError, match="the evaluation service this process was given is gone"):
        late.submit(EvalJob("fused_add_rmsnorm", "x", "test"))
