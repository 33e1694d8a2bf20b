// Runs, live over the page's one socket (live-socket.js). The page's config says its mode:
//   "list":   the runs list (templates/dashboard/runs/list.html): a run's status, iterations, tool calls
//             and tokens change in its row; a new run matching the page's filters gets a row at the top.
//   "detail": one run (templates/dashboard/runs/detail.html): its status and counters change, Cancel
//             goes away once it has finished, its subagents' statuses change, and the session's new
//             messages of this run are added to the transcript.
// Event data only ever becomes text, never markup.
(function () {
  "use strict";

  const socket = window.ToolgateSocket;
  const holder = document.getElementById("runs-live-config");
  if (!socket || !holder) return;
  const config = JSON.parse(holder.textContent);
  const PLACEHOLDER = "00000000-0000-0000-0000-000000000000";
  const FINISHED = ["completed", "failed", "cancelled"];

  function text(tag, value, className) {
    const node = document.createElement(tag);
    node.textContent = value;
    if (className) node.className = className;
    return node;
  }

  // A time field shows a <time> like the server's {% when %} (when.js), or "—" without one.
  function setTime(scope, name, iso) {
    scope.querySelectorAll('[data-field="' + name + '"]').forEach(function (node) {
      if (iso) node.replaceChildren(window.toolgateWhen(document.createElement("time"), iso));
      else node.textContent = "—";
    });
  }

  function setField(scope, name, value) {
    scope.querySelectorAll('[data-field="' + name + '"]').forEach(function (node) {
      node.textContent = value;
      if (name === "status") node.className = "status status-" + value;
    });
  }

  function showRun(scope, data) {
    if (typeof data.status === "string") setField(scope, "status", data.status);
    if (typeof data.iterations === "number") setField(scope, "iterations", String(data.iterations));
    if (typeof data.tool_calls === "number") setField(scope, "tool_calls", String(data.tool_calls));
    if (typeof data.input_tokens === "number") {
      setField(scope, "tokens", data.input_tokens + " / " + (data.output_tokens || 0));
    }
    if ("finished_at" in data) setTime(scope, "finished", data.finished_at);
    if ("started_at" in data) setTime(scope, "started", data.started_at);
    if (typeof data.model === "string") setField(scope, "model", data.model || "—");
    const error = scope.querySelector('[data-field="error"]');
    if (error && typeof data.error === "string") {
      error.replaceChildren(data.error ? text("pre", data.error, "wrap call-error") : text("span", "none", "muted"));
    }
    const awaiting = scope.querySelector("[data-awaiting]");
    if (awaiting && "awaiting_approval" in data) {
      awaiting.replaceChildren();
      if (data.awaiting_approval) {
        const link = text("a", "open the approvals inbox");
        link.href = awaiting.dataset.approvalsUrl;
        awaiting.append("a person's approval of a tool call: ", link);
      } else {
        awaiting.append(text("span", "nothing", "muted"));
      }
    }
  }

  function matches(data) {
    const f = config.filters || {};
    return (!f.agent || f.agent === data.agent) && (!f.status || f.status === data.status) &&
      (!f.kind || f.kind === data.kind);
  }

  function listMode() {
    const table = document.querySelector("table[data-runs-live]");
    if (!table) return;
    const tbody = table.tBodies[0];
    const columns = table.tHead.rows[0].cells.length;
    socket.bindIndicator(document.querySelector("[data-live-indicator]"), "runs");
    socket.subscribe("runs", function (event) {
      const data = event.data || {};
      if (typeof event.type !== "string" || event.type.indexOf("run.") !== 0 || !data.id) return;
      let row = tbody.querySelector('tr[data-id="' + CSS.escape(String(data.id)) + '"]');
      if (row) { showRun(row, data); return; }
      if (event.type !== "run.created" || !matches(data)) return;
      const empty = tbody.querySelector("tr.empty");
      if (empty) empty.remove();
      row = document.createElement("tr");
      row.dataset.id = data.id;
      row.className = "is-new";
      const first = document.createElement("td");
      const link = document.createElement("a");
      link.href = config.url.replace(PLACEHOLDER, data.id);
      const status = text("span", "");
      status.dataset.field = "status";
      link.append(status);
      first.append(link);
      row.append(first);
      const agent = document.createElement("td");
      agent.append(text("code", String(data.agent || "")));
      row.append(agent);
      row.append(text("td", String(data.kind || "")));
      const session = document.createElement("td");
      if (data.session) {
        const a = text("a", "session", "mono small");
        a.href = config.session_url.replace(PLACEHOLDER, data.session);
        session.append(a);
      }
      row.append(session);
      const input = String(data.input || "");
      const inputCell = text("td", input.length > 120 ? input.slice(0, 119) + "…" : input, "small");
      inputCell.title = input.slice(0, 500);
      row.append(inputCell);
      ["iterations", "tool_calls", "tokens"].forEach(function (name) {
        const cell = text("td", "", "num");
        cell.dataset.field = name;
        row.append(cell);
      });
      while (row.cells.length < columns) row.append(text("td", "—", "small"));
      showRun(row, data);
      tbody.insertBefore(row, tbody.firstChild);
    });
  }

  // Arguments as the page renders them when loaded: JSON indented, keys sorted.
  function sortedKeys(value) {
    if (Array.isArray(value)) return value.map(sortedKeys);
    if (value === null || typeof value !== "object") return value;
    const out = {};
    Object.keys(value).sort().forEach(function (key) { out[key] = sortedKeys(value[key]); });
    return out;
  }

  function callArguments(call) {
    const raw = String(call.arguments || "");
    if (call.arguments_size > raw.length) {
      return raw + "… (" + call.arguments_size + " characters; reload for all)";
    }
    try { return JSON.stringify(sortedKeys(JSON.parse(raw)), null, 2); } catch (error) { return raw; }
  }

  function appendMessage(list, data) {
    if (list.querySelector('[data-seq="' + CSS.escape(String(data.seq)) + '"]')) return;
    const item = document.createElement("li");
    item.className = "transcript-message is-new role-" + String(data.role || "");
    item.dataset.seq = String(data.seq);
    item.dataset.role = String(data.role || "");
    const head = text("div", "", "small muted");
    head.append(text("strong", "#" + data.seq + " " + String(data.role || "")));
    if (data.name) head.append(" · tool ", text("code", String(data.name)));
    if (data.tool_call_id) {
      const id = text("code", String(data.tool_call_id));
      id.dataset.field = "tool-call-id";
      head.append(" · call ", id);
    }
    item.append(head);
    if (data.content) {
      const content = String(data.content);
      item.append(text("pre", content + (data.size > content.length ? "… (" + data.size + " characters; reload for all)" : ""), "wrap message-content"));
    }
    (Array.isArray(data.tool_calls) ? data.tool_calls : []).forEach(function (call) {
      const block = text("div", "", "tool-call");
      block.dataset.toolCall = String(call.id || "");
      const name = text("code", String(call.name || "?"));
      name.dataset.field = "tool-name";
      block.append(text("span", "calls", "small"), " ", name, " ", text("span", String(call.id || ""), "small muted"));
      block.append(text("pre", callArguments(call), "json"));
      item.append(block);
    });
    list.append(item);
    const empty = document.querySelector("[data-transcript-empty]");
    if (empty) empty.remove();
  }

  function detailMode() {
    const details = document.querySelector("[data-run]");
    const transcript = document.querySelector("[data-transcript]");
    socket.bindIndicator(document.querySelector("[data-live-indicator]"), "changes");
    socket.subscribe("runs", function (event) {
      const data = event.data || {};
      if (!data.id) return;
      if (data.id === config.run && details) {
        showRun(details, data);
        if (FINISHED.indexOf(data.status) !== -1) {
          const cancel = document.querySelector("[data-cancel]");
          if (cancel) cancel.remove();
        }
        return;
      }
      const node = document.querySelector('li[data-run-id="' + CSS.escape(String(data.id)) + '"]');
      if (node && typeof data.status === "string") {
        const status = node.querySelector('[data-field="status"]');
        if (status) { status.textContent = data.status; status.className = "status status-" + data.status; }
      }
    });
    socket.subscribe("sessions", function (event) {
      const data = event.data || {};
      if (event.type !== "session.message" || data.session !== config.session || data.source !== config.source) return;
      if (transcript) appendMessage(transcript, data);
    });
  }

  if (config.mode === "list") listMode();
  else if (config.mode === "detail") detailMode();
})();
