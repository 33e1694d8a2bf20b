"""What a tool call returns: text for the model, text for the user, and whether it failed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ToolResult:
    """A tool's outcome. ``for_user`` defaults to ``for_llm``. Failures are results, never exceptions:
    the message is written for an LLM to act on (what went wrong and what to do instead)."""

    for_llm: str
    for_user: str | None = None
    is_error: bool = False
    data: dict[str, Any] = field(default_factory=dict)  # structured extras for API clients (never secrets)

    def __post_init__(self) -> None:
        if self.for_user is None:
            self.for_user = self.for_llm

    @classmethod
    def error(cls, message: str, *, for_user: str | None = None, **data: Any) -> ToolResult:
        return cls(for_llm=message, for_user=for_user, is_error=True, data=data)

    @classmethod
    def ok(cls, message: str, *, for_user: str | None = None, **data: Any) -> ToolResult:
        return cls(for_llm=message, for_user=for_user, data=data)
