// Live tool-call log: new "tool_call" events on the "tool_calls" topic become rows of the table
// (socket, reconnects and indicator: live-table.js, loaded first). The cells mirror
// templates/dashboard/tool_calls/_table.html.
(function () {
  "use strict";

  const live = window.ToolgateLive;
  const table = document.querySelector("[data-tool-calls-live]");
  if (!live || !table) return;

  const config = live.readJson("tool-calls-live-config");
  const filters = config.filters || {};
  const decisions = config.decisions || {};
  const ARGS_SUMMARY_CHARS = 60;

  const filterHref = live.filterHref;
  const link = live.link;
  function detailHref(id) { return live.detailHref(table, id); }

  // The same exact-match filters the server applied to the page (its "since" holds for new calls).
  function matches(data) {
    if (filters.agent && data.agent !== filters.agent) return false;
    if (filters.tool && data.tool !== filters.tool) return false;
    if (filters.decision && data.decision !== filters.decision) return false;
    if (filters.status && data.status !== filters.status) return false;
    if (filters.session_key && data.session_key !== filters.session_key) return false;
    if (filters.run && data.run !== filters.run) return false;
    return true;
  }

  // Like JavaScript's toFixed, which the server's filters imitate (byte_size, duration).
  function byteSize(n) {
    const size = n || 0;
    if (size < 1024) return size + " B";
    if (size < 1024 * 1024) return (size / 1024).toFixed(1) + " KB";
    return (size / (1024 * 1024)).toFixed(1) + " MB";
  }

  function duration(ms) {
    const value = ms || 0;
    return value < 1000 ? value.toFixed(1) + " ms" : (value / 1000).toFixed(2) + " s";
  }

  // A value with a line under it in the same cell (how the table pairs related fields).
  function withLine(td, lineText, lineClass) {
    const line = live.el("div", lineText, lineClass);
    td.append(line);
    return line;
  }

  function buildRow(data) {
    const row = document.createElement("tr");
    const open = link(detailHref(data.id), live.timeNode(data.created_at), "detail-link");
    open.title = "Open this call";
    live.cell(row, "time-cell").append(open);

    const agent = live.cell(row);
    agent.append(link(filterHref({ agent: data.agent }), live.el("code", data.agent), "filter-link"));
    const session = withLine(agent, data.session_key ? null : "—", "mono small muted session");
    session.title = "Session key";
    if (data.session_key) session.append(link(filterHref({ session_key: data.session_key }), data.session_key, "filter-link"));

    const tool = live.cell(row, "tool-cell");
    tool.append(link(filterHref({ tool: data.tool }), live.el("code", data.tool), "filter-link"));
    if (data.resolved_tool && data.resolved_tool !== data.tool) {
      const line = live.el("div", null, "small");
      const arrow = live.el("span", "→", "muted");
      arrow.setAttribute("aria-label", "runs as");
      line.append(arrow, " ", live.el("code", data.resolved_tool));
      tool.append(line);
    }

    const outcome = live.cell(row);
    const badge = live.el("span", decisions[data.decision] || data.decision, "badge decision decision-" + data.decision);
    outcome.append(link(filterHref({ decision: data.decision }), badge, "filter-link"));
    withLine(outcome, null, "status status-" + data.status).append(link(filterHref({ status: data.status }), data.status, "filter-link"));

    const timing = live.cell(row, "nowrap num");
    timing.append(duration(data.duration_ms));
    withLine(timing, byteSize(data.for_llm_bytes) + " / " + byteSize(data.for_user_bytes), "small muted");

    live.cell(row, "small").textContent = data.origin || "—";

    const details = live.cell(row, "call-details small");
    if (data.error) {
      details.append(live.el("div", data.error, "call-error"));
    }
    if (data.args && Object.keys(data.args).length) {
      const box = live.el("details", null, "args");
      box.append(live.el("summary", live.summary(data.args, ARGS_SUMMARY_CHARS), "mono"));
      box.append(live.el("pre", live.prettyJson(data.args), "json"));
      details.append(box);
    } else if (!data.error) {
      details.append(live.el("span", "no arguments", "muted"));
    }
    return row;
  }

  live.start({ table: table, topic: "tool_calls", eventType: "tool_call", matches: matches, buildRow: buildRow });
})();
