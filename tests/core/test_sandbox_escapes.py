"""The escape corpus (tests/core/escapes/, written for Argus): arbitrary Python run in the OS
sandbox exactly as untrusted code runs (`sandbox.run_isolated`), with no static check in the
way. Each attempt tries to leave a marker outside scratch, damage the store, read a secret,
signal the parent, reach the network or outlive its limit; the test observes the effects
from outside (files, processes, listeners) and asserts there are none, and that the next
run works."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from argus_core import sandbox

ESCAPES = sorted((Path(__file__).parent / "escapes").glob("*.py"))
TIMEOUT_S = 4.0

pytestmark = pytest.mark.skipif(
    sandbox.isolation_problem() is not None, reason=f"{sandbox.isolation_problem()}"
)


class Listener:
    """TCP (all interfaces) and unix-socket listeners that count connections."""

    def __init__(self, unix_path: str):
        self.hits: list[str] = []
        self.tcp = socket.create_server(("0.0.0.0", 0))
        self.port = self.tcp.getsockname()[1]
        self.unix = socket.socket(socket.AF_UNIX)
        self.unix.bind(unix_path)
        self.unix.listen()
        for s in (self.tcp, self.unix):
            s.settimeout(0.2)
            threading.Thread(target=self._serve, args=(s,), daemon=True).start()
        self.stop = False

    def _serve(self, s: socket.socket) -> None:
        while not getattr(self, "stop", False):
            try:
                conn, _ = s.accept()
            except (TimeoutError, OSError):
                continue
            self.hits.append(str(s.family))
            conn.close()

    def close(self) -> None:
        self.stop = True
        self.tcp.close()
        self.unix.close()


def _host_ip() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))
            return s.getsockname()[0]
        except OSError:
            return "127.0.0.1"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("escape-world")
    marker = root / "markers"
    marker.mkdir()
    store = root / "store" / "mlflow.db"
    store.parent.mkdir()
    store.write_bytes(b"SQLite format 3\x00" + b"\x01" * 4096)
    secret_value = "argus-secret-" + secrets.token_hex(8)
    secret_file = root / "home" / ".secret"
    secret_file.parent.mkdir()
    secret_file.write_text(secret_value)
    os.environ["ARGUS_TEST_API_KEY"] = secret_value
    sentinel = subprocess.Popen(["sleep", "3600"], start_new_session=True)
    listener = Listener(str(root / "sock"))
    yield {
        "marker": marker,
        "store": store,
        "store_bytes": store.read_bytes(),
        "secret": secret_value,
        "secret_file": secret_file,
        "sentinel": sentinel,
        "listener": listener,
        "unix": str(root / "sock"),
    }
    listener.close()
    sentinel.kill()
    sentinel.wait()
    os.environ.pop("ARGUS_TEST_API_KEY", None)


def _token_processes(token: str) -> list[int]:
    found = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{p}/cmdline").read_bytes()
        except OSError:
            continue
        if token.encode() in cmd:
            found.append(int(p))
    return found


def attack(world, path: Path, token: str) -> sandbox.IsolatedRun:
    """Run one corpus file as arbitrary Python in the sandbox, its targets given as globals."""
    prelude = "\n".join(
        f"{k} = {v!r}"
        for k, v in {
            "MARKER_DIR": str(world["marker"]),
            "STORE_FILE": str(world["store"]),
            "SECRET_FILE": str(world["secret_file"]),
            "PARENT_PID": os.getpid(),
            "SENTINEL_PID": world["sentinel"].pid,
            "PORT": world["listener"].port,
            "HOST_IP": _host_ip(),
            "UNIX_SOCK": world["unix"],
            "TOKEN": token,
        }.items()
    )
    code = prelude + "\n" + path.read_text()
    return sandbox.run_isolated(
        [sys.executable, "-c", code], b"", TIMEOUT_S, what=f"escape test {path.name}"
    )


def test_the_corpus_has_at_least_30_attempts():
    assert len(ESCAPES) >= 30


@pytest.mark.parametrize("path", ESCAPES, ids=[p.stem for p in ESCAPES])
def test_escape_attempt_fails(world, path):
    token = "argusesc" + secrets.token_hex(6)
    run = attack(world, path, token)
    output = run.stdout.decode(errors="replace") + run.stderr
    assert run.isolated
    # no secret read
    assert world["secret"] not in output
    # no network, no unix socket of the host
    assert "NET-OK" not in output and world["listener"].hits == []
    # no resource limit beaten
    assert "MEM-OK" not in output and "DISK-OK" not in output
    # the parent and an unrelated process are alive
    os.kill(os.getpid(), 0)
    assert world["sentinel"].poll() is None
    # nothing outlives the run (now, and after the delayed markers would have appeared)
    assert _token_processes(token) == []
    time.sleep(0.1 if "outlive" not in path.stem else 3.5)
    assert _token_processes(token) == []
    # no file outside scratch written, the store intact
    assert list(world["marker"].iterdir()) == []
    assert not Path(f"/tmp/argus-escape-{token}").exists()
    assert world["store"].read_bytes() == world["store_bytes"]
    assert world["store"].stat().st_mode & 0o600 == 0o600
    import argus_core

    assert not list(Path(argus_core.__file__).parent.glob(f"*{token}*"))
    assert not list(Path(sys.prefix).rglob(f"argus_escape_{token}*"))
    assert not Path(f"/etc/cron.d/argus-{token}").exists()
    # the next untrusted run works as usual
    ok = sandbox.run_isolated([sys.executable, "-c", "print(6 * 7)"], b"", 10, what="next run")
    assert ok.returncode == 0 and ok.stdout.strip() == b"42"


def test_a_timeout_kills_the_whole_tree_and_reports_it(world):
    token = "argusesc" + secrets.token_hex(6)
    run = attack(world, Path(__file__).parent / "escapes" / "30_outlive_nohup_timeout.py", token)
    assert run.timed_out  # killed at its limit, not when it chose to stop
    assert _token_processes(token) == []


def test_untrusted_code_is_refused_without_isolation_unless_sandbox_none(monkeypatch):
    monkeypatch.setenv("ARGUS_BWRAP", "/nonexistent/bwrap")  # isolation unavailable
    monkeypatch.setattr(sandbox, "_configured", None)
    monkeypatch.setenv(sandbox.SANDBOX_ENV, "auto")
    with pytest.raises(sandbox.SandboxError, match="refusing to run .*not installed.*sandbox=none"):
        sandbox.run_isolated([sys.executable, "-c", "print(1)"], b"", 10, what="a test")
    monkeypatch.setenv(sandbox.SANDBOX_ENV, "none")
    run = sandbox.run_isolated([sys.executable, "-c", "print(1)"], b"", 10, what="a test")
    assert run.returncode == 0 and not run.isolated


def test_an_unknown_sandbox_mode_names_the_valid_ones(monkeypatch):
    with pytest.raises(sandbox.SandboxError, match="'docker'.*auto, bwrap, none"):
        sandbox.configure("docker")
    monkeypatch.setattr(sandbox, "_configured", None)
    monkeypatch.setenv(sandbox.SANDBOX_ENV, "off")
    with pytest.raises(sandbox.SandboxError, match="ARGUS_SANDBOX='off'.*auto, bwrap, none"):
        sandbox.sandbox_mode()


def test_untrusted_text_is_truncated():
    cut = sandbox.truncate("x" * (20 << 20))
    assert len(cut) < 2 * sandbox.OUTPUT_TAIL_BYTES and "characters cut" in cut
    assert sandbox.truncate("short") == "short"


def test_the_parent_survives_a_signal_storm_from_the_sandbox(world):
    code = "import os, signal\nfor pid in range(1, 100000):\n    try: os.kill(pid, signal.SIGKILL)\n    except OSError: pass"
    run = sandbox.run_isolated([sys.executable, "-c", code], b"", 20, what="signal storm")
    assert run.isolated
    os.kill(os.getpid(), 0)
    assert world["sentinel"].poll() is None


@pytest.mark.parametrize(
    ("name", "effect"),
    [("01_write_marker_open", "marker"), ("11_read_env_secret", "secret")],
)
def test_the_harness_sees_an_escape_when_nothing_isolates(world, monkeypatch, name, effect):
    """The checks above can fail: run unisolated (sandbox=none), a harmless attempt's effect
    is seen."""
    monkeypatch.setattr(sandbox, "_configured", "none")
    run = attack(world, Path(__file__).parent / "escapes" / f"{name}.py", "argusescnone")
    assert not run.isolated
    try:
        if effect == "marker":
            assert [p.name for p in world["marker"].iterdir()] == ["m"]
        else:
            assert world["secret"] in run.stdout.decode()
    finally:
        for p in world["marker"].iterdir():
            p.unlink()
