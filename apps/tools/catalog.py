"""The catalog of built-in tools: every tool of the inventory, its group, schema and capability.

Names, groups, profiles and aliases follow the product specification (GoClaw's inventory, with
``group:toolgate`` as the composite of all native tools and ``group:goclaw`` accepted as its alias).
A tool whose implementation is not part of this deployment stays in the catalog and answers every call
with ``unavailable: <reason>``: it is never silently missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

Capability = Literal["read_only", "mutating", "async"]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    group: str | None  # None: only in the composite group
    description: str
    parameters: dict[str, Any]
    capability: Capability
    requires: tuple[str, ...] = ()  # configuration the tool needs to run (shown in the catalog)
    unavailable_reason: str = ""  # why it cannot run here when no implementation is registered

    @property
    def required_parameters(self) -> list[str]:
        return list(self.parameters.get("required", []))


def _schema(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


def _s(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **extra}


def _i(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "integer", "description": description, **extra}


def _b(description: str) -> dict[str, Any]:
    return {"type": "boolean", "description": description}


# The actions of the team tools (their schemas, the tools in apps.teams.agent_tools and their STRAP form).
TEAM_TASK_ACTIONS = (
    "create",
    "list",
    "get",
    "claim",
    "complete",
    "cancel",
    "assign",
    "review",
    "approve",
    "reject",
    "comment",
    "progress",
    "attach",
    "ask_user",
    "clear_ask_user",
    "search",
    "update",
    "retry",
)
TEAM_MESSAGE_ACTIONS = ("send", "broadcast", "read")
# The endpoints openai_compat_call may reach (relative to a provider's base URL), and the media prompts' cap.
OPENAI_COMPAT_PATHS = ("chat/completions", "completions", "embeddings", "moderations", "responses")
MEDIA_PROMPT_MAX = 32_000

_SPECS: list[ToolSpec] = [
    # --- fs ---------------------------------------------------------------------------------------
    ToolSpec(
        "read_file",
        "fs",
        "Read a text file from the workspace, optionally a range of lines.",
        _schema(
            {
                "path": _s("File path, relative to the workspace."),
                "offset": _i("First line to read (1-based).", minimum=1),
                "limit": _i("How many lines to read (default 2000).", minimum=1, maximum=10000),
            },
            ("path",),
        ),
        "read_only",
    ),
    ToolSpec(
        "write_file",
        "fs",
        "Write (or append to) a file in the workspace; parent folders are created.",
        _schema(
            {
                "path": _s("File path, relative to the workspace."),
                "content": _s("The text to write."),
                "append": _b("Append instead of replacing the file."),
            },
            ("path", "content"),
        ),
        "mutating",
    ),
    ToolSpec(
        "edit",
        "fs",
        "Replace an exact piece of text in a file (refused when ambiguous unless replace_all).",
        _schema(
            {
                "path": _s("File path, relative to the workspace."),
                "old_string": _s("The exact text to replace."),
                "new_string": _s("The replacement text."),
                "replace_all": _b("Replace every occurrence."),
            },
            ("path", "old_string", "new_string"),
        ),
        "mutating",
    ),
    ToolSpec(
        "list_files",
        "fs",
        "List a directory of the workspace.",
        _schema(
            {
                "path": _s("Directory, relative to the workspace (default: the workspace)."),
                "recursive": _b("List sub-directories too."),
            }
        ),
        "read_only",
    ),
    ToolSpec(
        "search",
        "fs",
        "Search file contents in the workspace with a regular expression.",
        _schema(
            {
                "pattern": _s("Regular expression."),
                "path": _s("Directory or file to search (default: the workspace)."),
                "glob": _s("Only files whose name matches this glob, e.g. '*.py'."),
                "case_insensitive": _b("Ignore case."),
                "limit": _i("Most matches to return (default 100).", minimum=1, maximum=1000),
            },
            ("pattern",),
        ),
        "read_only",
    ),
    ToolSpec(
        "glob",
        "fs",
        "Find files by glob pattern ('**' recurses), newest first.",
        _schema(
            {
                "pattern": _s("Glob pattern, e.g. 'src/**/*.py'."),
                "path": _s("Directory to search from (default: the workspace)."),
                "limit": _i("Most paths to return (default 1000).", minimum=1, maximum=10000),
            },
            ("pattern",),
        ),
        "read_only",
    ),
    # --- runtime ----------------------------------------------------------------------------------
    ToolSpec(
        "exec",
        "runtime",
        "Run a shell command in the workspace.",
        _schema(
            {
                "command": _s("The shell command."),
                "cwd": _s("Working directory, relative to the workspace."),
                "timeout": _i(
                    "Seconds before the command is killed (default 60, at most 300).", minimum=1, maximum=300
                ),
            },
            ("command",),
        ),
        "mutating",
    ),
    ToolSpec(
        "credentialed_exec",
        "runtime",
        "Run a registered CLI (gh, aws, kubectl, …) with injected credentials, without a shell.",
        _schema(
            {
                "binary": _s("The registered binary's name (e.g. gh).", maxLength=100),
                "args": {
                    "type": "array",
                    "items": {"type": "string"},
                    "maxItems": 200,
                    "description": "Arguments, one per item (no shell: nothing is interpreted).",
                },
                "cwd": _s("Working directory, relative to the workspace."),
            },
            ("binary",),
        ),
        "mutating",
        requires=("a registered CLI binary",),
    ),
    # --- web --------------------------------------------------------------------------------------
    ToolSpec(
        "web_search",
        "web",
        "Search the web.",
        _schema(
            {
                "query": _s("What to search for."),
                "count": _i("How many results (default 5).", minimum=1, maximum=20),
            },
            ("query",),
        ),
        "read_only",
        requires=("a search provider (Brave or DuckDuckGo)",),
    ),
    ToolSpec(
        "web_fetch",
        "web",
        "Fetch a public URL and return its content as Markdown or text, paginated.",
        _schema(
            {
                "url": _s("An http(s) URL."),
                "offset": _i("Character offset to continue from.", minimum=0),
                "max_chars": _i("Most characters to return (default 20000).", minimum=100, maximum=100000),
            },
            ("url",),
        ),
        "read_only",
    ),
    # --- memory -----------------------------------------------------------------------------------
    ToolSpec(
        "memory_search",
        "memory",
        "Search memory documents (full text and vectors).",
        _schema(
            {
                "query": _s("What to look for."),
                "limit": _i("How many results.", minimum=1, maximum=50),
                "scope": _s(
                    "Whose memory: user (yours), global (the agent's) or all (both, the default).",
                    enum=["user", "global", "all"],
                ),
            },
            ("query",),
        ),
        "read_only",
    ),
    ToolSpec(
        "memory_get",
        "memory",
        "Read one memory document.",
        _schema({"path": _s("Memory document path, e.g. memory/notes.md.")}, ("path",)),
        "read_only",
    ),
    # --- sessions ---------------------------------------------------------------------------------
    ToolSpec(
        "sessions_list",
        "sessions",
        "List this agent's sessions with the current user, most recently active first.",
        _schema({"limit": _i("How many sessions (default 20).", minimum=1, maximum=100)}),
        "read_only",
    ),
    ToolSpec(
        "sessions_history",
        "sessions",
        "Show the last messages of one of this agent's sessions with the current user.",
        _schema(
            {
                "session_key": _s("The session's key (see sessions_list).", maxLength=200),
                "limit": _i("How many of the last messages (default 30).", minimum=1, maximum=200),
            },
            ("session_key",),
        ),
        "read_only",
    ),
    ToolSpec(
        "sessions_send",
        "sessions",
        "Send a message to another of this agent's sessions with the current user.",
        _schema(
            {
                "session_key": _s("The session's key (see sessions_list).", maxLength=200),
                "message": _s("The message (at most 20 000 characters).", maxLength=20000),
            },
            ("session_key", "message"),
        ),
        "mutating",
    ),
    ToolSpec(
        "spawn",
        "sessions",
        "Subagents (copies of this agent for one task): spawn (in the background; the result is announced "
        "to this session), run (wait for the result), list, cancel (an id, all or last), steer (cancel and "
        "respawn with a new message).",
        _schema(
            {
                "action": _s(
                    "spawn (default), run, list, cancel or steer.",
                    enum=["spawn", "run", "list", "cancel", "steer"],
                ),
                "task": _s("spawn/run: what the subagent should do.", maxLength=20000),
                "label": _s("spawn/run: a short name for it.", maxLength=200),
                "id": _s("cancel/steer: the subagent's id, or all / last (cancel).", maxLength=64),
                "message": _s("steer: the new instructions.", maxLength=20000),
            },
        ),
        "async",
    ),
    ToolSpec(
        "session_status",
        "sessions",
        "Show the current session's status: messages, tokens, times.",
        _schema({}),
        "read_only",
    ),
    # --- knowledge --------------------------------------------------------------------------------
    ToolSpec(
        "knowledge_graph_search",
        "knowledge",
        "Search the knowledge graph for entities and relations.",
        _schema(
            {
                "query": _s("Entity, type or relation to find."),
                "entity_type": _s("Only entities of this type, e.g. person or organization."),
                "limit": _i("How many.", minimum=1, maximum=50),
                "depth": _i(
                    "1: each entity's relations (the default); 2: and its neighbours' relations.",
                    minimum=1,
                    maximum=2,
                ),
            },
            ("query",),
        ),
        "read_only",
    ),
    ToolSpec(
        "skill_search",
        "knowledge",
        "Search the skills available to you (instructions for particular tasks) by what they do; "
        "load one with use_skill.",
        _schema(
            {
                "query": _s("What the skill should do, in a few words.", maxLength=500),
                "limit": _i("How many (default 5).", minimum=1, maximum=50),
            },
            ("query",),
        ),
        "read_only",
    ),
    # --- automation -------------------------------------------------------------------------------
    ToolSpec(
        "cron",
        "automation",
        "Manage this agent's scheduled jobs: create, list, update, delete, enable, disable, run (now), "
        "history. A job starts a run of this agent with its message at each time of its schedule.",
        _schema(
            {
                "action": _s(
                    "What to do.",
                    enum=["create", "list", "update", "delete", "enable", "disable", "run", "history"],
                ),
                "id": _s("The job's id (or name) for actions on one job.", maxLength=100),
                "name": _s("create/update: a short name.", maxLength=100),
                "schedule": _s(
                    "create/update: a cron expression (e.g. 0 9 * * 1-5, UTC) or every <n>m / every <n>h.",
                    maxLength=100,
                ),
                "message": _s(
                    "create/update: what the agent should do when the job fires (kind turn), or the text "
                    "to send (kind message).",
                    maxLength=20000,
                ),
                "kind": _s(
                    "create: turn (default: a run of this agent) or message (send the text to a channel).",
                    enum=["turn", "message"],
                ),
                "channel": _s("create, kind message: the channel's name.", maxLength=64),
                "chat_id": _s("create, kind message: the chat (default: the channel's).", maxLength=100),
            },
            ("action",),
        ),
        "mutating",
    ),
    ToolSpec(
        "datetime",
        "automation",
        "Current date and time, in a time zone.",
        _schema({"timezone": _s("IANA time zone, e.g. Europe/Paris (default UTC).")}),
        "read_only",
    ),
    # --- messaging --------------------------------------------------------------------------------
    ToolSpec(
        "message",
        "messaging",
        "Send a message to a chat of a configured channel (a webhook or a Telegram bot).",
        _schema(
            {
                "channel": _s("A configured channel's name (default: the channel of this call)."),
                "chat_id": _s(
                    "The chat (default: this call's chat, else the channel's default chat); a Telegram "
                    "forum topic is <chat>:topic:<thread>, e.g. -100123:topic:45.",
                    maxLength=100,
                ),
                # The limit is checked by the tool, whose refusal names it (a schema error would not).
                "text": _s("The message (at most 4096 characters; send longer text in parts)."),
                "reply_to": _s("The id of the message to answer (Telegram: its message_id).", maxLength=100),
                "silent": _b("Send without a notification."),
            },
            ("text",),
        ),
        "mutating",
        requires=("a messaging channel",),
    ),
    ToolSpec(
        "create_forum_topic",
        "messaging",
        "Create a forum topic in a Telegram supergroup; answers the thread id and the chat id to send to.",
        _schema(
            {
                "channel": _s("A configured Telegram channel's name (default: the channel of this call)."),
                "chat_id": _s(
                    "The forum supergroup (default: this call's chat, else the channel's default chat).",
                    maxLength=100,
                ),
                "name": _s("The topic's name (1 to 128 characters).", minLength=1, maxLength=128),
                "icon_color": {
                    "type": "integer",
                    "description": "The topic icon's color (RGB).",
                    "enum": [7322096, 16766590, 13338331, 9367192, 16749490, 16478047],
                },
            },
            ("name",),
        ),
        "mutating",
        requires=("a Telegram channel",),
    ),
    # --- teams ------------------------------------------------------------------------------------
    ToolSpec(
        "team_tasks",
        "teams",
        "Team task board: create, list, get, claim, complete, cancel, assign, review, approve, reject, "
        "comment (note or blocker), progress, attach, ask_user, clear_ask_user, search, update, retry. "
        "Tasks are named by their UUID (task_id) from list or search.",
        _schema(
            {
                "action": _s(
                    "The board action: create, list, get, claim, complete, cancel, assign, review, approve, "
                    "reject, comment, progress, attach, ask_user, clear_ask_user, search, update or retry."
                ),
                "task_id": _s("The task's UUID from list or search (not its number or identifier)."),
                "subject": _s("create/update: what the task is (one deliverable).", maxLength=500),
                "description": _s("create/update: the instructions.", maxLength=100000),
                "priority": _i("create/update: higher runs first (default 0).", minimum=-1000, maximum=1000),
                "blocked_by": {
                    "type": "array",
                    "items": {"type": "string", "maxLength": 64},
                    "maxItems": 100,
                    "description": "create/update: UUIDs of open tasks of this team that must finish first.",
                },
                "assignee": _s("create/assign/retry: the agent key of the member who does the task."),
                "require_approval": _b("create: the task waits in review for approval before it runs."),
                "task_type": _s("create: general (default), request (members, when enabled), note, …"),
                "status": _s(
                    "list: which tasks (default active: not completed or cancelled).",
                    enum=["", "all", "active", "completed", "in_review"],
                ),
                "page": _i("list: page of 30 (default 1).", minimum=1, maximum=10000),
                "query": _s("search: words to find in subjects and descriptions.", maxLength=500),
                "result": _s("complete: what was done and found.", maxLength=100000),
                "text": _s(
                    "comment: the comment; cancel/reject: the reason; ask_user: the question; retry: new "
                    "instructions."
                ),
                "type": _s("comment: note (default) or blocker (fails the task and escalates to the lead)."),
                "percent": _i("progress: 0-100."),
                "step": _s("progress: what is being done now.", maxLength=500),
                "path": _s("attach: a file path (relative to the workspace).", maxLength=4096),
            },
            ("action",),
        ),
        "mutating",
        requires=("membership in a team",),
    ),
    ToolSpec(
        "team_message",
        "teams",
        "Team mailbox: send to a teammate, broadcast (lead only), read unread messages.",
        _schema(
            {
                "action": _s("send, broadcast or read.", enum=list(TEAM_MESSAGE_ACTIONS)),
                "to": _s("send: the agent key of the teammate."),
                "text": _s("send/broadcast: the message (at most 10 000 bytes)."),
                "media": {
                    "type": "array",
                    "items": {"type": "string", "maxLength": 4096},
                    "maxItems": 20,
                    "description": "send/broadcast: file paths to pass along.",
                },
            },
            ("action",),
        ),
        "mutating",
        requires=("membership in a team",),
    ),
    # --- media ------------------------------------------------------------------------------------
    ToolSpec(
        "create_image",
        "media_gen",
        "Generate images from a description and save them in the workspace.",
        _schema(
            {
                "prompt": _s("What the image shows.", maxLength=MEDIA_PROMPT_MAX),
                "size": _s("Width x height in pixels, e.g. 1024x1024.", pattern=r"^[0-9]{2,5}x[0-9]{2,5}$"),
                "n": _i("How many images (default 1).", minimum=1, maximum=4),
                "path": _s(
                    "Where to save it in the workspace (default media/<generated name>.png).", maxLength=4096
                ),
                "provider": _s("Provider name (default: the tenant's default provider)."),
            },
            ("prompt",),
        ),
        "mutating",
        requires=("a provider with an image model",),
    ),
    ToolSpec(
        "create_audio",
        "media_gen",
        "Generate audio (music, a sound effect, spoken audio) from a description and save it in the "
        "workspace.",
        _schema(
            {
                "prompt": _s("What to generate.", maxLength=MEDIA_PROMPT_MAX),
                "voice": _s("Voice, e.g. alloy (default alloy).", maxLength=64),
                "format": _s("Audio format (default mp3).", enum=["mp3", "wav", "flac", "opus", "pcm16"]),
                "path": _s(
                    "Where to save it in the workspace (default media/<generated name>).", maxLength=4096
                ),
                "provider": _s("Provider name (default: the tenant's default provider)."),
            },
            ("prompt",),
        ),
        "mutating",
        requires=("a provider with an audio model",),
    ),
    ToolSpec(
        "create_video",
        "media_gen",
        "Generate a video from a description and save it in the workspace; a video still rendering when "
        "the wait ends is fetched later with video_id.",
        _schema(
            {
                "prompt": _s("What the video shows (not needed with video_id).", maxLength=MEDIA_PROMPT_MAX),
                "seconds": _i("Length in seconds.", minimum=1, maximum=60),
                "size": _s("Width x height in pixels, e.g. 1280x720.", pattern=r"^[0-9]{2,5}x[0-9]{2,5}$"),
                "video_id": _s("A video started earlier (from a 'still rendering' answer).", maxLength=200),
                "path": _s(
                    "Where to save it in the workspace (default media/<generated name>.mp4).", maxLength=4096
                ),
                "provider": _s("Provider name (default: the tenant's default provider)."),
            },
        ),
        "mutating",
        requires=("a provider with a video model",),
    ),
    ToolSpec(
        "tts",
        "media_gen",
        "Text to speech: speak a text and save the audio in the workspace.",
        _schema(
            {
                "text": _s("Text to speak.", maxLength=4096),
                "voice": _s("Voice, e.g. alloy (default alloy).", maxLength=64),
                "format": _s(
                    "Audio format (default mp3).", enum=["mp3", "opus", "aac", "flac", "wav", "pcm"]
                ),
                "path": _s(
                    "Where to save it in the workspace (default media/<generated name>).", maxLength=4096
                ),
                "provider": _s("Provider name (default: the tenant's default provider)."),
            },
            ("text",),
        ),
        "mutating",
        requires=("a provider with a speech model",),
    ),
    *[
        ToolSpec(
            name,
            "media_read",
            description,
            _schema(
                {
                    "path": _s("A file in the workspace (or give url).", maxLength=4096),
                    "url": _s("An http(s) URL to fetch the file from (or give path).", maxLength=4096),
                    "prompt": _s(prompt, maxLength=MEDIA_PROMPT_MAX),
                    "provider": _s("Provider name (default: the tenant's default provider)."),
                }
            ),
            "read_only",
            requires=(f"a provider with a {capability} model",),
        )
        for name, description, prompt, capability in (
            ("read_image", "Describe or analyse an image.", "What to look for or answer.", "vision"),
            (
                "read_audio",
                "Transcribe audio.",
                "Words or context that help the transcription.",
                "transcription",
            ),
            (
                "read_document",
                "Read a document (PDF or text) and answer about it.",
                "What to extract or answer (default: a summary).",
                "document",
            ),
            ("read_video", "Describe or analyse a video.", "What to look for or answer.", "vision"),
        )
    ],
    # --- skills -----------------------------------------------------------------------------------
    ToolSpec(
        "use_skill",
        "skills",
        "Load a skill: its instructions, which stay active in this conversation, and the list of its "
        "files (read one with file).",
        _schema(
            {
                "name": _s("Skill name, as skill_search lists it.", maxLength=200),
                "file": _s("One of the skill's files to read instead of its instructions.", maxLength=255),
            },
            ("name",),
        ),
        "mutating",
    ),
    ToolSpec(
        "publish_skill",
        "skills",
        "Register a workspace directory holding a SKILL.md (frontmatter: name, description, triggers) "
        "and other text files as your skill; publishing the same name again updates it.",
        _schema({"path": _s("The skill's directory in the workspace, e.g. skills/my-skill.")}, ("path",)),
        "mutating",
    ),
    # --- others (only in the composite group) ------------------------------------------------------
    ToolSpec(
        "openai_compat_call",
        None,
        "POST a JSON body to an OpenAI-compatible endpoint of a configured provider and get its JSON answer.",
        _schema(
            {
                "path": _s(
                    "The endpoint, relative to the provider's base URL.", enum=list(OPENAI_COMPAT_PATHS)
                ),
                "body": {
                    "type": "object",
                    "description": "The JSON request body (model defaults to the provider's).",
                },
                "provider": _s("Provider name (default: the tenant's default provider)."),
            },
            ("path", "body"),
        ),
        "mutating",
        requires=("a configured provider",),
    ),
    ToolSpec(
        "workspace_dir",
        None,
        "Where this call's workspace is (and the team's, when the agent is in a team).",
        _schema({}),
        "read_only",
    ),
]

CATALOG: MappingProxyType[str, ToolSpec] = MappingProxyType(
    {spec.name: spec for spec in sorted(_SPECS, key=lambda s: s.name)}
)
assert len(CATALOG) == len(_SPECS), "duplicate tool names"

COMPOSITE_GROUP = "toolgate"
COMPOSITE_ALIASES = ("goclaw",)

GROUPS: MappingProxyType[str, tuple[str, ...]] = MappingProxyType(
    {
        **{
            group: tuple(sorted(s.name for s in _SPECS if s.group == group))
            for group in sorted({s.group for s in _SPECS if s.group})
        },
        COMPOSITE_GROUP: tuple(CATALOG),
    }
)

PROFILES: MappingProxyType[str, tuple[str, ...]] = MappingProxyType(
    {
        "full": (),  # no restriction
        "coding": (
            "group:fs",
            "group:runtime",
            "group:sessions",
            "group:memory",
            "group:web",
            "group:knowledge",
            "group:media_gen",
            "group:media_read",
            "group:skills",
        ),
        "messaging": ("group:messaging", "group:web", "group:sessions", "group:media_read", "skill_search"),
        "minimal": ("session_status",),
    }
)

# Other names models use for our tools: legacy names and Claude Code's.
ALIASES: MappingProxyType[str, str] = MappingProxyType(
    {
        "bash": "exec",
        "edit_file": "edit",
        "sessions_spawn": "spawn",
        "Read": "read_file",
        "Write": "write_file",
        "Edit": "edit",
        "Bash": "exec",
        "WebFetch": "web_fetch",
        "WebSearch": "web_search",
        "Agent": "spawn",
        "Skill": "use_skill",
    }
)
assert not set(ALIASES) & set(CATALOG), "an alias may not shadow a tool"

# What a subagent never gets, and what a leaf subagent (at the maximum spawn depth) loses too.
SUBAGENT_DENY_ALWAYS = (
    "session_status",
    "cron",
    "memory_search",
    "memory_get",
    "sessions_send",
    "team_tasks",
)
SUBAGENT_DENY_LEAF = ("sessions_list", "sessions_history", "spawn")
MAX_SPAWN_DEPTH = 1


def group_members(group: str) -> tuple[str, ...] | None:
    """Members of ``group`` (without the ``group:`` prefix), or None for an unknown group."""
    if group in COMPOSITE_ALIASES:
        group = COMPOSITE_GROUP
    return GROUPS.get(group)


def expand(names: list[str] | tuple[str, ...]) -> set[str]:
    """Expand ``group:`` references into tool names; an unknown group or tool expands to nothing."""
    result: set[str] = set()
    for name in names:
        if name.startswith("group:"):
            result.update(group_members(name[len("group:") :]) or ())
        elif name in CATALOG:
            result.add(name)
    return result


def profile_tools(profile: str) -> set[str]:
    """The tools a profile allows (``full`` and unknown profiles allow everything)."""
    spec = PROFILES.get(profile)
    if not spec:
        return set(CATALOG)
    return expand(spec)


def canonical(name: str) -> str | None:
    """The catalog name for ``name`` (itself or through an alias), or None."""
    if name in CATALOG:
        return name
    return ALIASES.get(name)
