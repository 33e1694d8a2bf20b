"""Model providers: the OpenAI-compatible endpoints a tenant's media tools, ``openai_compat_call`` and
agent runs talk to.

A provider has a name (a slug, unique in its tenant), a base URL (``https://api.openai.com/v1``), an API
key and extra headers (both encrypted at rest with django-encrypted-model-fields, never returned by the
API nor audited: the API shows whether a key is set and its last four characters), and one model per
capability (:data:`CAPABILITIES`). A tool needing a capability uses the tenant's default provider, or
the one the agent names; a capability without a model is unavailable and the tool says so.
"""

from __future__ import annotations

import json

from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q
from encrypted_model_fields.fields import EncryptedTextField

from apps.tenants.scoping import TenantScoped

NAME_RE = r"\A[a-z0-9][a-z0-9_-]{0,63}\Z"
name_validator = RegexValidator(
    NAME_RE, "1 to 64 characters: lower-case letters, digits, '-' or '_', starting with a letter or digit."
)
DEFAULT_TIMEOUT_SECONDS = 60
MIN_TIMEOUT_SECONDS = 1
MAX_TIMEOUT_SECONDS = 600
MAX_MODEL_CHARS = 200
MAX_BASE_URL_CHARS = 500

# capability -> what it is used for (the model field is ``<capability>_model``).
CAPABILITIES: dict[str, str] = {
    "chat": "chat completions (agent runs, openai_compat_call's default model)",
    "vision": "read_image and read_video",
    "image": "create_image",
    "speech": "tts",
    "transcription": "read_audio",
    "audio": "create_audio",
    "video": "create_video",
    "document": "read_document (falls back to the chat model)",
}


def model_field(capability: str) -> str:
    return f"{capability}_model"


def _model(help_text: str) -> models.CharField[str, str]:
    return models.CharField(max_length=MAX_MODEL_CHARS, blank=True, default="", help_text=help_text)


class Provider(TenantScoped):
    class Kind(models.TextChoices):
        OPENAI_COMPATIBLE = "openai_compatible", "OpenAI-compatible"

    name = models.CharField(max_length=64, validators=[name_validator])
    kind = models.CharField(max_length=32, choices=Kind.choices, default=Kind.OPENAI_COMPATIBLE)
    base_url = models.CharField(max_length=MAX_BASE_URL_CHARS)  # e.g. https://api.openai.com/v1
    api_key = EncryptedTextField(blank=True, default="")  # write-only; never returned, logged or audited
    extra_headers_encrypted = EncryptedTextField(blank=True, default="")  # JSON object of strings
    chat_model = _model(CAPABILITIES["chat"])
    vision_model = _model(CAPABILITIES["vision"])
    image_model = _model(CAPABILITIES["image"])
    speech_model = _model(CAPABILITIES["speech"])
    transcription_model = _model(CAPABILITIES["transcription"])
    audio_model = _model(CAPABILITIES["audio"])
    video_model = _model(CAPABILITIES["video"])
    document_model = _model(CAPABILITIES["document"])
    timeout_seconds = models.PositiveIntegerField(
        default=DEFAULT_TIMEOUT_SECONDS,
        validators=[MinValueValidator(MIN_TIMEOUT_SECONDS), MaxValueValidator(MAX_TIMEOUT_SECONDS)],
    )
    enabled = models.BooleanField(default=True)
    is_default = models.BooleanField(default=False)
    created_by = models.CharField(max_length=255, blank=True, default="")

    class Meta:
        ordering = ["name", "id"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="llm_provider_unique_name"),
            models.UniqueConstraint(
                fields=["tenant"], condition=Q(is_default=True), name="llm_provider_one_default"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def extra_headers(self) -> dict[str, str]:
        if not self.extra_headers_encrypted:
            return {}
        value = json.loads(self.extra_headers_encrypted)
        return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}

    @extra_headers.setter
    def extra_headers(self, value: dict[str, str]) -> None:
        self.extra_headers_encrypted = json.dumps(value, sort_keys=True) if value else ""

    def model_for(self, capability: str) -> str:
        """The model configured for ``capability`` ("" for none)."""
        return str(getattr(self, model_field(capability)))

    @property
    def capability_models(self) -> dict[str, str]:
        return {capability: self.model_for(capability) for capability in CAPABILITIES}
