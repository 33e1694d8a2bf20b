"""The execution pipeline and the built-in tool implementations.

Interface for tool modules (apps/runtime/tools/*.py):

    from apps.toolkit.registry import tool
    from apps.toolkit.context import CallContext
    from apps.toolkit.results import ToolResult

    @tool("read_file")
    def read_file(ctx: CallContext, args: dict[str, Any]) -> ToolResult: ...

Arguments arrive already validated against the tool's JSON Schema (apps/tools/catalog.py); a tool
still checks what a schema cannot (paths, sizes, URLs). A tool never raises for an expected failure:
it returns ``ToolResult.error("what went wrong and what to do instead")``.
"""
