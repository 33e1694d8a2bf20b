"""The provider client (``apps.llm.client``) against the scripted provider on 127.0.0.2: chat with tool
calls in the answer, the typed results, resolution of a capability to a provider and model, and every
failure mapped to one ProviderError that names the status and the endpoint's message, never the key."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest

from apps.llm import client as client_module
from apps.llm.client import ChatResult, ProviderClient, ProviderError, ToolCall, Usage, client_for
from apps.llm.selectors import ProviderUnavailable, resolve
from apps.tenants.models import Tenant
from tests.llm.conftest import MakeProvider
from tests.llm.fake_provider import HEADER_SECRET, KEY, PUBLIC_IP, FakeProvider, chat_answer
from tests.local_http import serving

pytestmark = pytest.mark.django_db

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def test_chat_returns_tool_calls_usage_and_the_model(tenant_a, fake, make_provider):
    make_provider(tenant_a)
    fake.chat = lambda request: chat_answer(
        "",
        tool_calls=[
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            },
            {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}},
        ],
    )
    client, model = client_for(tenant_a, "chat")
    result = client.chat(
        [{"role": "user", "content": "Weather in Paris?"}], tools=[WEATHER_TOOL], model=model, temperature=0
    )
    assert result == ChatResult(
        content="",
        tool_calls=(
            ToolCall(id="call_1", name="get_weather", arguments='{"city": "Paris"}'),
            ToolCall(id="call_2", name="get_weather", arguments="{}"),
        ),
        usage=Usage(prompt_tokens=11, completion_tokens=7, total_tokens=18),
        finish_reason="tool_calls",
        model="fake-chat-2026",
    )
    assert result.tool_calls[0].parsed_arguments() == {"city": "Paris"}
    request = fake.last_json("chat/completions")
    assert request == {
        "temperature": 0,
        "model": "fake-chat",
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [WEATHER_TOOL],
    }
    hit = fake.last("chat/completions")
    assert hit.headers["authorization"] == f"Bearer {KEY}"
    assert hit.headers["openai-organization"] == HEADER_SECRET
    assert hit.headers["content-type"] == "application/json"


def test_chat_text_answers_and_malformed_tool_arguments(tenant_a, fake, make_provider):
    make_provider(tenant_a)
    client, _ = client_for(tenant_a, "chat")
    assert client.chat([{"role": "user", "content": "hi"}]).content == "answer to: hi"
    fake.chat = lambda request: chat_answer(
        "", tool_calls=[{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{not json"}}]
    )
    call = client.chat([{"role": "user", "content": "hi"}]).tool_calls[0]
    with pytest.raises(ProviderError, match="the model's arguments for f are not JSON"):
        call.parsed_arguments()


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda h: h.reply(500, b'{"error": {"message": "overloaded"}}', "application/json"), "HTTP 500"),
        (lambda h: h.reply(429, b'{"error": {"message": "slow down"}}'), "rate limit or quota was reached"),
        (lambda h: h.reply(404, b"<html>nope</html>"), "HTTP 404 to chat/completions (check the base URL"),
        (lambda h: h.reply(200, b"not json"), "answer to chat/completions is not JSON"),
        (lambda h: h.reply(200, b'{"choices": []}'), "chat answer has no choices"),
        (lambda h: h.reply(200, b"{}", content_encoding="gzip"), "only identity is read"),
        (
            lambda h: h.reply(
                200,
                json.dumps(
                    chat_answer("", tool_calls=[{"id": "c", "function": {"arguments": "{}"}}])
                ).encode(),
            ),
            "malformed tool call",
        ),
    ],
)
def test_bad_answers_become_one_provider_error(tenant_a, fake, make_provider, answer, message):
    make_provider(tenant_a)
    fake.server.routes["/v1/chat/completions"] = answer
    client, _ = client_for(tenant_a, "chat")
    with pytest.raises(ProviderError, match=re.escape(message)):
        client.chat([{"role": "user", "content": "hi"}])


def test_an_oversized_answer_is_cut_off(tenant_a, fake, make_provider, monkeypatch):
    monkeypatch.setattr(client_module, "MAX_JSON_BYTES", 1000)
    make_provider(tenant_a)
    fake.server.routes["/v1/models"] = lambda h: h.reply(200, b'{"data": [' + b'{"id": "m"},' * 500 + b"]}")
    with pytest.raises(ProviderError, match="answer is larger than 1000 bytes"):
        client_for(tenant_a, "chat")[0].list_models()


def test_a_slow_provider_times_out_within_its_timeout(tenant_a, fake, make_provider):
    make_provider(tenant_a, timeout_seconds=1)
    fake.server.routes["/v1/chat/completions"] = lambda h: time.sleep(2.5)
    client, _ = client_for(tenant_a, "chat")
    started = time.monotonic()
    with pytest.raises(ProviderError, match="did not answer within 1 s"):
        client.chat([{"role": "user", "content": "hi"}])
    assert time.monotonic() - started < 2.2


def test_the_key_is_redacted_from_errors_and_reprs(tenant_a, fake, make_provider):
    provider = make_provider(tenant_a, api_key="sk-not-the-right-one-5566")
    client = ProviderClient(provider)
    with pytest.raises(ProviderError) as raised:
        client.list_models()
    assert raised.value.status == 401
    assert "sk-not-the-right-one-5566" not in str(raised.value)
    assert "Incorrect API key provided: [redacted]" in str(raised.value)
    assert "sk-not-the-right-one-5566" not in repr(client)
    assert set(client.secrets) == {"sk-not-the-right-one-5566", HEADER_SECRET}


def test_private_and_metadata_addresses_are_refused_before_any_request(tenant_a, settings):
    from apps.llm.models import Provider

    settings.TOOLGATE_SSRF_ALLOW_NETS = ""
    with serving("127.0.0.1") as internal:
        for url in (
            internal.url("/v1"),
            "http://169.254.169.254/v1",
            "http://[::1]:9/v1",
            "http://10.0.0.1/v1",
        ):
            provider = Provider(tenant=tenant_a, name="x", base_url=url, api_key=KEY)
            with pytest.raises(ProviderError, match=r"is refused .*blocked"):
                ProviderClient(provider).chat([{"role": "user", "content": "hi"}], model="m")
        assert internal.hits == []


def test_a_name_resolving_to_a_private_address_is_refused_at_connect_time(tenant_a, settings):
    from apps.llm.models import Provider
    from apps.toolkit.ssrf import AddressPolicy

    settings.TOOLGATE_SSRF_ALLOW_NETS = ""
    with serving("127.0.0.1") as internal:
        provider = Provider(tenant=tenant_a, name="x", base_url=f"http://llm.evil.test:{internal.port}/v1")
        policy = AddressPolicy(resolver=lambda host, port: ["127.0.0.1"])
        with pytest.raises(ProviderError, match=re.escape("llm.evil.test resolves to 127.0.0.1")):
            ProviderClient(provider, policy=policy).list_models()
        assert internal.hits == []


def test_media_calls_return_typed_files(tenant_a, fake, make_provider):
    make_provider(tenant_a)
    client, _ = client_for(tenant_a, "image")
    images = client.images("a fox", n=3)
    assert [(i.media_type, i.extension) for i in images] == [("image/png", "png")] * 3
    speech = client.speech("hello")
    assert (speech.media_type, speech.extension) == ("audio/mpeg", "mp3")
    job = client.video_start("waves")
    assert (job.id, job.status, job.done) == ("video_123", "queued", False)
    done = client.wait_for_video(job, wait_seconds=5, sleep=lambda s: None)
    assert done.done is True
    assert client.video_content(done.id).media_type == "video/mp4"
    text = client.transcription(b"ID3 audio", filename="a.mp3", media_type="audio/mpeg")
    assert text == "hello from the recording"


# --- resolution -------------------------------------------------------------------------------------------


def test_resolve_prefers_the_default_then_any_provider_with_the_capability(tenant_a, make_provider):
    main = make_provider(tenant_a, "main", models={"chat": "main-chat"})
    images = make_provider(tenant_a, "images", models={"image": "img", "chat": "images-chat"})
    assert resolve(tenant_a, "chat") == (main, "main-chat")
    assert resolve(tenant_a, "image") == (images, "img")
    assert resolve(tenant_a, "chat", "images") == (images, "images-chat")
    assert resolve(tenant_a, "document") == (main, "main-chat")  # falls back to the chat model
    with pytest.raises(ProviderUnavailable, match="no provider with a speech model is configured"):
        resolve(tenant_a, "speech")
    with pytest.raises(ProviderUnavailable, match="the provider main has no image model"):
        resolve(tenant_a, "image", "main")
    with pytest.raises(ProviderUnavailable, match="no provider named 'zzz'; configured: images, main"):
        resolve(tenant_a, "chat", "zzz")


def test_resolve_stays_inside_the_tenant(tenant_a, tenant_b, make_provider):
    make_provider(tenant_b, "b-provider", models={"chat": "b-chat"})
    with pytest.raises(ProviderUnavailable, match="no provider with a chat model"):
        resolve(tenant_a, "chat")
    with pytest.raises(ProviderUnavailable, match="no provider named 'b-provider'"):
        resolve(tenant_a, "chat", "b-provider")


def test_a_provider_without_a_chat_model_cannot_chat(tenant_a: Tenant, make_provider: MakeProvider) -> None:
    provider = make_provider(tenant_a, models={"image": "img"})
    with pytest.raises(ProviderError, match="has no chat model"):
        ProviderClient(provider).chat([{"role": "user", "content": "hi"}])


def test_a_http_base_url_outside_the_test_networks_is_refused(settings: Any, fake: FakeProvider) -> None:
    from apps.llm.validation import base_url_error

    assert base_url_error(fake.base_url) is None
    settings.TOOLGATE_SSRF_ALLOW_NETS = ""
    assert "blocked" in str(base_url_error(f"http://{PUBLIC_IP}:1/v1"))


def test_a_kind_without_a_client_is_a_clear_error(tenant_a: Tenant) -> None:
    from apps.llm.client import make_client
    from apps.llm.models import Provider

    provider = Provider(tenant=tenant_a, name="x", kind="anthropic", base_url="https://api.llm.invalid/v1")
    with pytest.raises(ProviderError, match="of kind 'anthropic', which this Toolgate cannot call"):
        make_client(provider)
