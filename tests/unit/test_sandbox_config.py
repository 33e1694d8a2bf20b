"""The sandbox settings: defaults of SPEC B §6.3, validation, merging and when they apply."""

from __future__ import annotations

import pytest

from apps.runtime import config as runtime_config
from apps.runtime.sandbox.config import SandboxConfig, validate


@pytest.fixture(autouse=True)
def images(settings):
    settings.TOOLGATE_SANDBOX_IMAGE = "toolgate-sandbox:bookworm-slim"
    settings.TOOLGATE_SANDBOX_IMAGES = ["toolgate-sandbox:bookworm-slim", "toolgate-sandbox:busybox"]


def test_defaults_are_upstreams():
    config = SandboxConfig.of({})
    assert config.as_dict() == {
        "mode": "off",
        "scope": "session",
        "workspace_access": "rw",
        "image": "toolgate-sandbox:bookworm-slim",
        "memory_mb": 512,
        "cpus": 1.0,
        "pids_limit": 256,
        "timeout_seconds": 300,
        "network": False,
        "read_only_root": True,
        "tmpfs_size_mb": 64,
    }


@pytest.mark.parametrize(
    ("mode", "agent", "applies"),
    [
        ("off", "bot", False),
        ("all", "main", True),
        ("non-main", "bot", True),
        ("non-main", "main", False),
        ("non-main", "default", False),
    ],
)
def test_which_agents_run_sandboxed(mode, agent, applies):
    assert SandboxConfig.of({"mode": mode}).applies_to(agent) is applies


def test_an_unreadable_stored_mode_sandboxes_everything():
    assert SandboxConfig.of({"mode": "sometimes"}).applies_to("main") is True


def test_unreadable_stored_values_take_the_defaults():
    config = SandboxConfig.of({"memory_mb": "lots", "cpus": True, "network": "yes", "image": "evil:latest"})
    assert (config.memory_mb, config.cpus, config.network) == (512, 1.0, False)
    assert config.image == "toolgate-sandbox:bookworm-slim"


def test_the_agent_overrides_the_tenant_key_by_key():
    effective = runtime_config.effective(
        {"sandbox": {"mode": "all", "memory_mb": 1024, "scope": "agent"}}, {"sandbox": {"scope": "session"}}
    )
    assert effective["sandbox"] == {"mode": "all", "memory_mb": 1024, "scope": "session"}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([], "Must be an object"),
        ({"mode": "sometimes"}, '"mode" must be one of off, non-main, all.'),
        ({"scope": "global"}, '"scope" must be one of session, agent, shared.'),
        ({"workspace_access": "write"}, '"workspace_access" must be one of rw, ro, none.'),
        ({"memory_mb": 8}, '"memory_mb" must be a whole number from 16 to 16384.'),
        ({"memory_mb": 512.5}, '"memory_mb" must be a whole number'),
        ({"cpus": 0}, '"cpus" must be a number from 0.1 to 16.'),
        ({"pids_limit": True}, '"pids_limit" must be a whole number'),
        ({"timeout_seconds": 3601}, '"timeout_seconds" must be a whole number from 1 to 3600.'),
        ({"network": "no"}, '"network" must be true or false.'),
        ({"image": "alpine:latest"}, '"image" must be one of the images this server allows'),
        ({"privileged": True}, "Unknown keys: privileged."),
    ],
)
def test_invalid_values_are_refused_with_what_to_do(value, message):
    errors = validate(value)
    assert any(message in error for error in errors), errors
    assert runtime_config.validate({"sandbox": value})["sandbox"] == errors


def test_valid_values_pass():
    assert validate({"mode": "all", "cpus": 2, "image": "toolgate-sandbox:busybox", "network": True}) == []


def test_the_fingerprint_follows_what_the_container_is_made_of():
    base = SandboxConfig.of({"mode": "all"})
    assert base.fingerprint() == SandboxConfig.of({"mode": "non-main", "timeout_seconds": 30}).fingerprint()
    assert base.fingerprint() != SandboxConfig.of({"mode": "all", "memory_mb": 256}).fingerprint()
    assert base.fingerprint() != SandboxConfig.of({"mode": "all", "workspace_access": "ro"}).fingerprint()
