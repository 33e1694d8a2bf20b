"""The provider-backed tools through POST /api/v1/runtime/execute, against the scripted provider on
127.0.0.2: files land in the call's workspace, the provider gets the configured model, the key and the
expected body, and every failure (no provider, a refused file, a too-big file, a refusing provider) is an
error result that says what to do. The key never appears in a result, the audit log or a log line."""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from apps.audit.models import AuditEvent, ToolCall
from apps.llm import agent_tools, services
from apps.llm.models import Provider
from apps.tenants.actors import Actor
from apps.tenants.models import Agent, Tenant
from apps.toolkit.workspace import workspace_for
from tests.llm.fake_provider import HEADER_SECRET, KEY, MP3, MP4, PNG, VIDEO_ID, WAV, FakeProvider
from tests.local_http import serving

pytestmark = pytest.mark.django_db


def call(client: Any, tool: str, args: dict[str, Any], **extra: Any) -> dict[str, Any]:
    response = client.post(
        "/api/v1/runtime/execute", {"agent": "bot", "tool": tool, "args": args, **extra}, format="json"
    )
    assert response.status_code == 200, response.content
    body: dict[str, Any] = response.json()
    assert KEY not in json.dumps(body)
    assert HEADER_SECRET not in json.dumps(body)
    return body


def workspace(tenant: Tenant, agent: Agent) -> Path:
    return workspace_for(tenant=tenant, agent=agent, user_id="")


def sent_headers_ok(fake: FakeProvider, path: str) -> None:
    hit = fake.last(path)
    assert hit.headers["authorization"] == f"Bearer {KEY}"
    assert hit.headers["openai-organization"] == HEADER_SECRET


# --- generation -------------------------------------------------------------------------------------------


def test_create_image_saves_the_images_and_sends_the_image_model(
    member_a, agent, tenant_a, fake, make_provider
):
    make_provider(tenant_a)
    body = call(
        member_a, "create_image", {"prompt": "a red fox", "size": "512x512", "n": 2, "path": "art/fox.png"}
    )
    assert body["is_error"] is False, body
    assert fake.last_json("images/generations") == {
        "model": "fake-image",
        "prompt": "a red fox",
        "n": 2,
        "response_format": "b64_json",
        "size": "512x512",
    }
    sent_headers_ok(fake, "images/generations")
    root = workspace(tenant_a, agent)
    assert (root / "art/fox-1.png").read_bytes() == PNG + b"\x00"
    assert (root / "art/fox-2.png").read_bytes() == PNG + b"\x01"
    assert "art/fox-1.png" in body["for_llm"]
    assert "Revised prompt: a red fox, watercolour" in body["for_llm"]


def test_create_image_without_a_path_saves_under_media(member_a, agent, tenant_a, fake, make_provider):
    make_provider(tenant_a)
    body = call(member_a, "create_image", {"prompt": "a fox"})
    assert body["is_error"] is False, body
    saved = list((workspace(tenant_a, agent) / "media").iterdir())
    assert len(saved) == 1
    assert saved[0].name.startswith("create_image-")
    assert saved[0].suffix == ".png"
    assert f"media/{saved[0].name} ({len(PNG) + 1} bytes, image/png)" in body["for_llm"]


def test_tts_saves_the_speech(member_a, agent, tenant_a, fake, make_provider):
    make_provider(tenant_a)
    body = call(
        member_a, "tts", {"text": "Hello there", "voice": "nova", "format": "mp3", "path": "hello.mp3"}
    )
    assert body["is_error"] is False, body
    assert fake.last_json("audio/speech") == {
        "model": "fake-tts",
        "input": "Hello there",
        "voice": "nova",
        "response_format": "mp3",
    }
    sent_headers_ok(fake, "audio/speech")
    assert (workspace(tenant_a, agent) / "hello.mp3").read_bytes() == MP3
    assert f"hello.mp3 ({len(MP3)} bytes, audio/mpeg)" in body["for_llm"]


def test_tts_text_is_bounded_by_the_schema(member_a, agent, tenant_a, fake, make_provider):
    make_provider(tenant_a)
    body = call(member_a, "tts", {"text": "x" * 4097})
    assert body["is_error"] is True
    assert body["for_llm"].startswith("Invalid arguments for tts")
    assert not [h for h in fake.hits if "speech" in h.path]


def test_create_audio_asks_a_chat_model_for_audio_output(member_a, agent, tenant_a, fake, make_provider):
    make_provider(tenant_a)
    body = call(
        member_a, "create_audio", {"prompt": "a jingle", "format": "wav", "path": "sounds/jingle.wav"}
    )
    assert body["is_error"] is False, body
    request = fake.last_json("chat/completions")
    assert request["model"] == "fake-audio"
    assert request["modalities"] == ["text", "audio"]
    assert request["audio"] == {"voice": "alloy", "format": "wav"}
    assert request["messages"] == [{"role": "user", "content": "a jingle"}]
    assert (workspace(tenant_a, agent) / "sounds/jingle.wav").read_bytes() == WAV
    assert "Transcript: a short jingle" in body["for_llm"]


def test_create_video_polls_and_saves_the_video(member_a, agent, tenant_a, fake, make_provider, monkeypatch):
    from apps.llm import client

    monkeypatch.setattr(client, "VIDEO_POLL_SECONDS", 0.01)
    make_provider(tenant_a)
    body = call(member_a, "create_video", {"prompt": "waves", "seconds": 4, "size": "1280x720"})
    assert body["is_error"] is False, body
    assert fake.last_json("videos") == {
        "model": "fake-video",
        "prompt": "waves",
        "seconds": "4",
        "size": "1280x720",
    }
    assert [h.method for h in fake.hits if h.path.startswith(f"/v1/videos/{VIDEO_ID}")] == [
        "GET",
        "GET",
        "GET",
    ]
    saved = list((workspace(tenant_a, agent) / "media").iterdir())
    assert [p.read_bytes() for p in saved] == [MP4]
    assert f"Created the video {VIDEO_ID} with main (fake-video):" in body["for_llm"]


def test_create_video_still_rendering_gives_the_id_and_a_later_call_saves_it(
    member_a, agent, tenant_a, fake, make_provider, monkeypatch
):
    from apps.llm import client

    monkeypatch.setattr(client, "VIDEO_POLL_SECONDS", 0.01)
    monkeypatch.setattr(agent_tools, "VIDEO_WAIT_SECONDS", 0.0)
    fake.video_polls_before_done = 1
    make_provider(tenant_a)
    body = call(member_a, "create_video", {"prompt": "waves"})
    assert body["is_error"] is False
    assert body["for_llm"].startswith(
        f"The video is still rendering, id {VIDEO_ID} (status queued, 0% done)."
    )
    assert f'video_id="{VIDEO_ID}"' in body["for_llm"]
    assert not (workspace(tenant_a, agent) / "media").exists()

    monkeypatch.setattr(agent_tools, "VIDEO_WAIT_SECONDS", 5.0)
    later = call(member_a, "create_video", {"video_id": VIDEO_ID, "path": "clips/waves.mp4"})
    assert later["is_error"] is False, later
    assert (workspace(tenant_a, agent) / "clips/waves.mp4").read_bytes() == MP4


def test_a_failed_video_is_an_error(member_a, agent, tenant_a, fake, make_provider, monkeypatch):
    from apps.llm import client

    monkeypatch.setattr(client, "VIDEO_POLL_SECONDS", 0.01)
    fake.video_fails = True
    make_provider(tenant_a)
    body = call(member_a, "create_video", {"prompt": "waves"})
    assert body["is_error"] is True
    assert body["for_llm"] == f"create_video: the video {VIDEO_ID} failed: content policy violation."


def test_a_video_id_cannot_change_the_request_path(member_a, agent, tenant_a, fake, make_provider):
    make_provider(tenant_a)
    body = call(member_a, "create_video", {"video_id": "../models"})
    assert body["is_error"] is True
    assert "is not a valid id" in body["for_llm"]
    assert not [h for h in fake.hits if h.path != "/v1/models" and "video" in h.path]


# --- reading ----------------------------------------------------------------------------------------------


def test_read_image_sends_a_data_url_to_the_vision_model(member_a, agent, tenant_a, fake, make_provider):
    make_provider(tenant_a)
    root = workspace(tenant_a, agent)
    (root / "pics").mkdir()
    (root / "pics/cat.png").write_bytes(PNG)
    body = call(member_a, "read_image", {"path": "pics/cat.png", "prompt": "What animal?"})
    assert body["is_error"] is False, body
    assert body["for_llm"] == "seen text+image_url: What animal?"
    request = fake.last_json("chat/completions")
    assert request["model"] == "fake-vision"
    parts = request["messages"][0]["content"]
    assert parts[1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()},
    }


def test_read_image_fetches_a_url_through_the_guard(member_a, agent, tenant_a, fake, make_provider):
    make_provider(tenant_a)
    fake.server.routes["/files/cat.png"] = lambda h: h.reply(200, PNG, "image/png")
    body = call(member_a, "read_image", {"url": fake.server.url("/files/cat.png")})
    assert body["is_error"] is False, body
    assert body["for_llm"] == "seen text+image_url: Describe this image."


def test_read_image_of_an_internal_url_is_refused(member_a, agent, tenant_a, fake, make_provider):
    make_provider(tenant_a)
    with serving("127.0.0.1") as internal:
        internal.routes["/cat.png"] = lambda h: h.reply(200, PNG, "image/png")
        body = call(member_a, "read_image", {"url": internal.url("/cat.png")})
        assert internal.hits == []
    assert body["is_error"] is True
    assert "blocked" in body["for_llm"]
    assert not [h for h in fake.hits if h.path == "/v1/chat/completions"]


def test_read_image_refuses_paths_outside_the_workspace_and_other_files(
    member_a, agent, tenant_a, fake, make_provider
):
    make_provider(tenant_a)
    (workspace(tenant_a, agent) / "notes.txt").write_text("not an image")
    outside = call(member_a, "read_image", {"path": "../../../../etc/passwd"})
    assert outside["is_error"] is True
    assert "path outside workspace" in outside["for_llm"]
    text = call(member_a, "read_image", {"path": "notes.txt"})
    assert text["for_llm"].startswith("notes.txt is not an image (text/plain)")
    both = call(member_a, "read_image", {"path": "notes.txt", "url": "https://example.com/a.png"})
    assert both["for_llm"].startswith("read_image needs exactly one of path")
    missing = call(member_a, "read_image", {"path": "nope.png"})
    assert missing["for_llm"].startswith("file not found: nope.png.")
    assert not [h for h in fake.hits if h.path == "/v1/chat/completions"]


def test_a_too_big_file_is_refused_before_anything_is_sent(
    member_a, agent, tenant_a, fake, make_provider, monkeypatch
):
    monkeypatch.setattr(agent_tools, "MAX_IMAGE_INPUT_BYTES", 100)
    make_provider(tenant_a)
    (workspace(tenant_a, agent) / "big.png").write_bytes(PNG + b"x" * 200)
    body = call(member_a, "read_image", {"path": "big.png"})
    assert body["is_error"] is True
    assert (
        body["for_llm"] == f"big.png is {len(PNG) + 200} bytes; read_image reads files of at most 100 bytes."
    )
    assert not [h for h in fake.hits if h.path == "/v1/chat/completions"]


def test_read_audio_uploads_the_file_for_transcription(member_a, agent, tenant_a, fake, make_provider):
    make_provider(tenant_a)
    (workspace(tenant_a, agent) / "memo.mp3").write_bytes(MP3)
    body = call(member_a, "read_audio", {"path": "memo.mp3", "prompt": "Toolgate"})
    assert body["is_error"] is False, body
    assert body["for_llm"] == "hello from the recording"
    hit = fake.last("audio/transcriptions")
    assert hit.headers["content-type"].startswith("multipart/form-data; boundary=")
    assert b'name="model"\r\n\r\nfake-whisper' in hit.body
    assert b'name="prompt"\r\n\r\nToolgate' in hit.body
    assert b'filename="memo.mp3"' in hit.body
    assert MP3 in hit.body
    sent_headers_ok(fake, "audio/transcriptions")


def test_read_document_extracts_pdf_text_locally(member_a, agent, tenant_a, fake, make_provider):
    make_provider(tenant_a, models={"chat": "fake-chat", "document": "fake-doc"})
    (workspace(tenant_a, agent) / "report.pdf").write_bytes(
        pdf_with_text("Quarterly revenue grew 12 percent")
    )
    body = call(member_a, "read_document", {"path": "report.pdf", "prompt": "How much did revenue grow?"})
    assert body["is_error"] is False, body
    request = fake.last_json("chat/completions")
    assert request["model"] == "fake-doc"
    user = request["messages"][1]["content"]
    assert "Quarterly revenue grew 12 percent" in user
    assert "PDF, 1 page(s)" in user
    assert user.endswith("Request: How much did revenue grow?")
    assert body["for_llm"].startswith("answer to: ")


def test_read_document_reads_text_files_directly_with_the_chat_model(
    member_a, agent, tenant_a, fake, make_provider
):
    make_provider(tenant_a, models={"chat": "fake-chat"})
    (workspace(tenant_a, agent) / "notes.md").write_text("# Plan\nShip on Friday.")
    body = call(member_a, "read_document", {"path": "notes.md"})
    assert body["is_error"] is False, body
    request = fake.last_json("chat/completions")
    assert request["model"] == "fake-chat"
    assert "# Plan\nShip on Friday." in request["messages"][1]["content"]
    assert request["messages"][1]["content"].endswith("Request: Summarise this document.")


def test_read_document_refuses_a_broken_pdf_and_binary_files(member_a, agent, tenant_a, fake, make_provider):
    make_provider(tenant_a)
    root = workspace(tenant_a, agent)
    (root / "broken.pdf").write_bytes(b"%PDF-1.4\n garbage without objects")
    (root / "blob.bin").write_bytes(b"\x00\x01\x02\xff" * 10)
    broken = call(member_a, "read_document", {"path": "broken.pdf"})
    assert broken["is_error"] is True
    assert broken["for_llm"].startswith("broken.pdf could not be read as a PDF (PdfStreamError: ")
    blob = call(member_a, "read_document", {"path": "blob.bin"})
    assert blob["is_error"] is True
    assert "read_document reads PDF and text files" in blob["for_llm"]
    assert not [h for h in fake.hits if h.path == "/v1/chat/completions"]


def test_read_video_sends_a_video_url_part(member_a, agent, tenant_a, fake, make_provider):
    make_provider(tenant_a)
    (workspace(tenant_a, agent) / "clip.mp4").write_bytes(MP4)
    body = call(member_a, "read_video", {"path": "clip.mp4", "prompt": "What happens?"})
    assert body["is_error"] is False, body
    assert body["for_llm"] == "seen text+video_url: What happens?"
    part = fake.last_json("chat/completions")["messages"][0]["content"][1]
    assert part == {
        "type": "video_url",
        "video_url": {"url": "data:video/mp4;base64," + base64.b64encode(MP4).decode()},
    }


def test_read_video_says_clearly_when_the_provider_refuses_video(
    member_a, agent, tenant_a, fake, make_provider
):
    fake.refuse_video_input = True
    make_provider(tenant_a)
    (workspace(tenant_a, agent) / "clip.mp4").write_bytes(MP4)
    body = call(member_a, "read_video", {"path": "clip.mp4"})
    assert body["is_error"] is True
    assert body["for_llm"].startswith("read_video: the provider main refused the video (")
    assert "video_url is not supported by this model" in body["for_llm"]
    assert "configure a vision model that accepts video_url under Providers" in body["for_llm"]


# --- openai_compat_call and workspace_dir -------------------------------------------------------------------


def test_openai_compat_call_posts_the_body_and_returns_the_json(
    member_a, agent, tenant_a, fake, make_provider
):
    make_provider(tenant_a)
    body = call(
        member_a,
        "openai_compat_call",
        {
            "path": "chat/completions",
            "body": {"messages": [{"role": "user", "content": "ping"}], "temperature": 0},
        },
    )
    assert body["is_error"] is False, body
    assert fake.last_json("chat/completions") == {
        "messages": [{"role": "user", "content": "ping"}],
        "temperature": 0,
        "model": "fake-chat",
    }
    assert json.loads(body["for_llm"])["choices"][0]["message"]["content"] == "answer to: ping"

    embedded = call(
        member_a, "openai_compat_call", {"path": "embeddings", "body": {"model": "e", "input": "x"}}
    )
    assert json.loads(embedded["for_llm"])["model"] == "e"


def test_openai_compat_call_refuses_other_paths_streams_and_a_missing_model(
    member_a, agent, tenant_a, fake, make_provider
):
    make_provider(tenant_a)
    other = call(member_a, "openai_compat_call", {"path": "files", "body": {}})
    assert other["is_error"] is True
    assert other["for_llm"].startswith("Invalid arguments for openai_compat_call")
    stream = call(member_a, "openai_compat_call", {"path": "chat/completions", "body": {"stream": True}})
    assert stream["for_llm"].startswith("streaming answers are not supported")
    no_model = call(member_a, "openai_compat_call", {"path": "embeddings", "body": {"input": "x"}})
    assert (
        no_model["for_llm"]
        == "body.model is required for embeddings (the provider main has no default for it)."
    )
    assert [h.path for h in fake.hits] == []


def test_a_named_provider_is_used_and_an_unknown_one_is_explained(
    member_a, agent, tenant_a, fake, make_provider
):
    make_provider(tenant_a, "main", models={"chat": "main-chat"})
    make_provider(tenant_a, "second", models={"chat": "second-chat"})
    call(
        member_a,
        "openai_compat_call",
        {"path": "chat/completions", "body": {"messages": []}, "provider": "second"},
    )
    assert fake.last_json("chat/completions")["model"] == "second-chat"
    unknown = call(
        member_a, "openai_compat_call", {"path": "chat/completions", "body": {}, "provider": "nope"}
    )
    assert unknown["for_llm"] == "unavailable: no provider named 'nope'; configured: main, second."


def test_workspace_dir_describes_the_workspace_and_the_team(member_a, agent, tenant_a):
    from apps.accounts import services as tenant_services
    from apps.teams import services as team_services

    body = call(member_a, "workspace_dir", {})
    assert body["is_error"] is False
    assert body["for_llm"].startswith("Your workspace is the current directory")
    assert "In the exec sandbox it is mounted at /workspace." in body["for_llm"]
    assert "team" not in body["for_llm"]
    helper = tenant_services.agent_create(actor=Actor.system(tenant_a), key="mate", name="Mate")
    team_services.team_create(actor=Actor.system(tenant_a), name="Crew", lead=agent, members=[helper])
    in_team = call(member_a, "workspace_dir", {}, context={"chat_id": "c1"})
    assert (
        "You are in the team Crew (lead); its workspace scope is chat (the board of this chat, c1)."
        in (in_team["for_llm"])
    )


# --- unconfigured, disabled, refused ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "args", "capability"),
    [
        ("create_image", {"prompt": "x"}, "an image"),
        ("create_audio", {"prompt": "x"}, "an audio"),
        ("create_video", {"prompt": "x"}, "a video"),
        ("tts", {"text": "x"}, "a speech"),
        ("read_image", {"path": "a.png"}, "a vision"),
        ("read_video", {"path": "a.mp4"}, "a vision"),
        ("read_audio", {"path": "a.mp3"}, "a transcription"),
        ("read_document", {"path": "a.pdf"}, "a document"),
    ],
)
def test_a_capability_without_a_provider_lists_but_says_how_to_configure_it(
    member_a, agent, tenant_a, tool, args, capability
):
    listed = member_a.get("/api/v1/agents/bot/tools").json()
    assert tool in {t["function"]["name"] for t in listed["tools"]}
    body = call(member_a, tool, args)
    assert body["is_error"] is True
    assert (
        body["for_llm"]
        == f"unavailable: no provider with {capability} model is configured — add one under Providers."
    )


def test_the_default_provider_is_preferred_and_others_fill_in(member_a, agent, tenant_a, fake, make_provider):
    make_provider(tenant_a, "main", models={"chat": "main-chat"})
    make_provider(tenant_a, "images", models={"image": "other-image"})
    body = call(member_a, "create_image", {"prompt": "x"})
    assert body["is_error"] is False, body
    assert fake.last_json("images/generations")["model"] == "other-image"
    assert "with images (other-image)" in body["for_llm"]


def test_a_disabled_provider_is_not_used(member_a, agent, tenant_a, fake, make_provider):
    provider = make_provider(tenant_a)
    services.provider_update(actor=Actor.system(tenant_a), provider=provider, enabled=False)
    body = call(member_a, "tts", {"text": "x"})
    assert (
        body["for_llm"]
        == "unavailable: no provider with a speech model is configured — add one under Providers."
    )
    named = call(member_a, "tts", {"text": "x", "provider": "main"})
    assert named["for_llm"].startswith("unavailable: the provider main is disabled")
    assert fake.hits == []


def test_a_provider_on_a_private_address_is_refused_at_connect_time(member_a, agent, tenant_a, settings):
    settings.TOOLGATE_SSRF_ALLOW_NETS = ""
    with serving("127.0.0.1") as internal:
        # Saved directly: the service refuses such a base URL (tests/llm/test_api.py).
        Provider.objects.create(
            tenant=tenant_a,
            name="inside",
            base_url=internal.url("/v1"),
            api_key=KEY,
            speech_model="m",
            is_default=True,
        )
        body = call(member_a, "tts", {"text": "x"})
        assert internal.hits == []
    assert body["is_error"] is True
    assert body["for_llm"].startswith(
        "tts failed: the provider inside is refused (blocked: 127.0.0.1 is in the blocked range"
    )


def test_a_refused_key_is_an_error_without_the_key_anywhere(
    member_a, agent, tenant_a, fake, make_provider, caplog
):
    provider = make_provider(tenant_a)
    wrong = "sk-wrong-key-0a1b2c3d4e5f"
    services.provider_update(actor=Actor.system(tenant_a), provider=provider, api_key=wrong)
    with caplog.at_level(logging.DEBUG):
        body = call(member_a, "tts", {"text": "x"})
    assert body["is_error"] is True
    assert body["for_llm"].startswith(
        "tts failed: the provider main answered HTTP 401 to audio/speech (the API key was refused; set a "
        "valid key under Providers): Incorrect API key provided: "
    )
    assert wrong not in json.dumps(body)
    assert wrong not in caplog.text
    assert KEY not in caplog.text
    row = ToolCall.objects.for_tenant(tenant_a).get(pk=body["call_id"])
    assert wrong not in json.dumps([row.args, row.error])
    audit = json.dumps(list(AuditEvent.objects.for_tenant(tenant_a).values("data")), default=str)
    assert wrong not in audit
    assert KEY not in audit


def pdf_with_text(text: str) -> bytes:
    """A one-page PDF whose content stream draws ``text`` (built by hand: pypdf writes, it does not draw)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >> >> "
        b"/Contents 4 0 R >>",
        b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, obj in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + obj + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def test_outputs_go_only_where_write_file_may_write(member_a, agent, tenant_a, fake, make_provider):
    make_provider(tenant_a)
    for path, message in (
        ("../../escape.png", "access denied: path outside workspace"),
        (".git/hooks/pre-commit", "access denied: path '.git/hooks/pre-commit' is restricted"),
        ("memory/notes.png", "access denied: path 'memory/notes.png' is restricted"),
        (".ssh/id_rsa", "is a sensitive path"),
    ):
        body = call(member_a, "create_image", {"prompt": "x", "path": path})
        assert body["is_error"] is True, path
        assert message in body["for_llm"], (path, body["for_llm"])
    root = workspace(tenant_a, agent)
    assert not (root / ".git").exists()
    assert not (root / "memory").exists()
    (root / "pictures").mkdir()
    into_folder = call(member_a, "create_image", {"prompt": "x", "path": "pictures"})
    assert into_folder["is_error"] is False, into_folder
    assert [p.name.startswith("create_image-") for p in (root / "pictures").iterdir()] == [True]
