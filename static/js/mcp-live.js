// Live MCP pages over the page's one socket (live-socket.js; node helpers from live-table.js):
//  - the servers list and a server's page follow "mcp.server.*" events on topic "mcp" (state, enabled,
//    transport; new and deleted servers);
//  - the access-request inbox adds "mcp.request.created" rows to the pending table and marks rows
//    decided elsewhere ("mcp.request.approved" / "mcp.request.rejected");
//  - a server's page replaces its tool list when discovery stores new tools ("mcp.server.tools");
//  - "My access requests" follows the requester's own topic "me" and shows decisions as they are made,
//    with the tools granted (and those asked for but left out) in place of the tools asked for.
// The cells mirror templates/dashboard/mcp/*.html. Event data only ever becomes text, never markup.
(function () {
  "use strict";

  const socket = window.ToolgateSocket;
  const live = window.ToolgateLive;
  if (!socket || !live) return;

  const config = live.readJson("mcp-live-config");
  const PLACEHOLDER = "00000000-0000-0000-0000-000000000000";
  const TRANSPORTS = { stdio: "stdio", sse: "SSE", "streamable-http": "Streamable HTTP" };
  const STATUSES = { unknown: "Unknown", connected: "Connected", disconnected: "Disconnected", error: "Error" };
  const REQUEST_STATUSES = { pending: "Pending", approved: "Approved", rejected: "Rejected" };
  const DECIDED = { "mcp.request.approved": true, "mcp.request.rejected": true };

  function rowOf(tbody, id) {
    return id ? tbody.querySelector('tr[data-id="' + CSS.escape(String(id)) + '"]') : null;
  }

  function dropEmpty(tbody) {
    const empty = tbody.querySelector("tr.empty");
    if (empty) empty.remove();
  }

  function csrfToken() {
    const input = document.querySelector("#csrf-holder [name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  function bind(topic, handler) {
    socket.bindIndicator(document.querySelector("[data-live-indicator]"), "changes");
    socket.subscribe(topic, handler);
  }

  // --- servers ------------------------------------------------------------------------------------

  // Update the state cells inside ``scope`` from a server's event data (only the keys it carries).
  function showServer(scope, data) {
    const status = scope.querySelector('[data-field="status"]');
    if (status && typeof data.status === "string") {
      status.dataset.status = data.status;
      status.textContent = STATUSES[data.status] || data.status;
    }
    const enabled = scope.querySelector('[data-field="enabled"]');
    if (enabled && typeof data.enabled === "boolean") enabled.hidden = data.enabled;
    // The enable/disable button offers the opposite of the state now (its first text is its label).
    const toggle = scope.querySelector('button[name="enabled"]');
    if (toggle && typeof data.enabled === "boolean" && toggle.firstChild && toggle.firstChild.nodeType === 3) {
      toggle.value = data.enabled ? "0" : "1";
      toggle.firstChild.nodeValue = data.enabled ? "Disable" : "Enable";
    }
    const transport = scope.querySelector('[data-field="transport"]');
    if (transport && typeof data.transport === "string") {
      transport.textContent = TRANSPORTS[data.transport] || data.transport;
    }
    const tools = scope.querySelector('[data-field="tools"]');
    if (tools && Array.isArray(data.tools)) tools.textContent = String(data.tools.length);
    // Status events carry the health check as "health"; the stored copy is the server's last_health.
    const result = data.health || data.last_health;
    if (result && typeof result === "object") {
      const health = scope.querySelector('[data-field="health"]');
      if (health) health.textContent = result.error ? live.truncate(String(result.error), 160) : "";
      // A failed discovery is tried again: how often it failed and when the next try is.
      const retry = scope.querySelector('[data-field="retry"]');
      if (retry && typeof result.next_try_at === "string") {
        const failures = Number(result.discovery_failures) || 1;
        retry.textContent = "Discovery failed " + failures + (failures === 1 ? " time" : " times") + "; next try ";
        retry.append(live.timeNode(result.next_try_at));
        retry.hidden = false;
      } else if (retry && data.status === "connected") {
        retry.hidden = true;
      }
      const checked = scope.querySelector('[data-field="checked"]');
      if (checked && result.checked_at) {
        checked.textContent = "";
        checked.append(live.timeNode(result.checked_at));
        if (typeof result.latency_ms === "number") checked.append(" · " + result.latency_ms + " ms");
      }
    }
  }

  function markDeleted(scope, text) {
    scope.classList.add("server-off");
    scope.querySelectorAll("button, input").forEach(function (node) { node.disabled = true; });
    const status = scope.querySelector('[data-field="status"]');
    if (status) {
      status.dataset.status = "deleted";
      status.textContent = text;
    }
  }

  function serverRow(data, withActions) {
    const row = document.createElement("tr");
    const name = live.cell(row);
    const link = live.el("a");
    link.href = config.server_url.replace(PLACEHOLDER, data.id);
    link.append(live.el("code", data.name));
    name.append(link);
    if (data.display_name) name.append(live.el("div", data.display_name, "muted small"));
    const transport = live.cell(row);
    transport.dataset.field = "transport";
    const state = live.cell(row);
    const status = live.el("span", "", "server-status");
    status.dataset.field = "status";
    const enabled = live.el("span", "· disabled", "server-off small");
    enabled.dataset.field = "enabled";
    state.append(status, " ", enabled);
    const count = live.cell(row);
    count.dataset.field = "tools";
    count.textContent = "0";
    if (withActions) {
      const actions = live.cell(row, "row-actions");
      const open = live.el("a", "Open");
      open.href = link.href;
      actions.append(open);
    }
    showServer(row, data);
    return row;
  }

  function startServers(table) {
    const tbody = table.tBodies[0];
    const withActions = table.tHead.rows[0].cells.length > 4;
    bind("mcp", function (event) {
      const data = event.data || {};
      if (event.type.indexOf("mcp.server.") !== 0 || !data.id) return;
      let row = rowOf(tbody, data.id);
      if (event.type === "mcp.server.deleted") {
        if (row) markDeleted(row, "Deleted");
        return;
      }
      if (!row && event.type === "mcp.server.created") {
        dropEmpty(tbody);
        row = serverRow(data, withActions);
        row.dataset.id = data.id;
        row.classList.add("is-new");
        tbody.insertBefore(row, tbody.firstChild);
        return;
      }
      if (row) showServer(row, data);
    });
  }

  function startServer(section) {
    const id = config.server;
    const toolsNote = document.querySelector("[data-tools-changed]");
    bind("mcp", function (event) {
      const data = event.data || {};
      if (event.type.indexOf("mcp.server.") !== 0 || data.id !== id) return;
      if (event.type === "mcp.server.deleted") {
        markDeleted(section, "Deleted: this server no longer exists");
        return;
      }
      showServer(section, data);
      const actions = document.querySelector("[data-server-actions]");
      if (actions) showServer(actions, data);
      if (event.type === "mcp.server.tools" && Array.isArray(data.tool_rows)) {
        showTools(data.tool_rows, Array.isArray(data.tools) ? data.tools.length : data.tool_rows.length);
        // Each grant's effective tools depend on the tools: the page says they changed.
        if (toolsNote) toolsNote.hidden = false;
      }
    });
  }

  // Replace the server page's tool list with the rows of a discovery event (templates/dashboard/mcp/server.html).
  function showTools(rows, count) {
    const table = document.querySelector("[data-mcp-tools]");
    if (!table) return;
    const tbody = table.tBodies[0];
    const counter = document.querySelector('[data-field="tool-count"]');
    if (counter) counter.textContent = String(count);
    tbody.textContent = "";
    if (!rows.length) {
      const empty = document.createElement("tr");
      empty.className = "empty";
      const cell = live.cell(empty);
      cell.colSpan = 4;
      cell.textContent = "No tools discovered yet: they are listed once Toolgate has connected to the server.";
      tbody.append(empty);
      return;
    }
    rows.forEach(function (item) {
      const row = document.createElement("tr");
      row.dataset.tool = String(item.name);
      live.cell(row).append(live.el("code", String(item.name)));
      live.cell(row).append(live.el("code", String(item.registered)));
      live.cell(row, "small").textContent = item.description ? String(item.description) : "—";
      const schemaCell = live.cell(row);
      if (item.schema) {
        const details = document.createElement("details");
        details.append(live.el("summary", "Schema", "small"), live.el("pre", String(item.schema), "json schema"));
        schemaCell.append(details);
      } else {
        schemaCell.append(live.el("span", "too long to show live: reload", "small muted"));
      }
      row.classList.add("is-new");
      tbody.append(row);
    });
  }

  // --- requests -----------------------------------------------------------------------------------

  function toolNames(names) {
    if (names === null || names === undefined) return live.el("span", "all tools", "badge");
    const list = live.el("span", null, "tool-names");
    names.forEach(function (name) { list.append(live.el("code", name)); });
    return list;
  }

  function targetCells(row, data) {
    const server = live.cell(row);
    server.append(live.el("code", data.server));
    const target = live.cell(row);
    if (data.scope === "agent") {
      target.append("agent ", live.el("code", data.agent));
    } else {
      target.append("user ", live.el("code", data.user_id));
    }
    const tools = live.cell(row);
    tools.dataset.field = "tools";
    showRequestTools(tools, data);
  }

  function pendingRow(data, ts) {
    const row = document.createElement("tr");
    live.cell(row, "time-cell").append(live.timeNode(data.created_at || ts));
    targetCells(row, data);
    const why = live.cell(row);
    why.append(live.el("div", data.reason || "—", "small reason"), live.el("div", data.requested_by, "small muted"));
    const actions = live.cell(row, "request-actions");
    actions.dataset.status = "pending";
    const form = live.el("form", null, "inline-form");
    form.method = "post";
    form.action = config.review_url.replace(PLACEHOLDER, data.id);
    const csrf = document.createElement("input");
    csrf.type = "hidden";
    csrf.name = "csrfmiddlewaretoken";
    csrf.value = csrfToken();
    const label = live.el("label", "Note", "visually-hidden");
    label.htmlFor = "note-" + data.id;
    const note = document.createElement("input");
    note.id = "note-" + data.id;
    note.name = "note";
    note.maxLength = 2000;
    note.placeholder = "Note (optional)";
    const approve = live.el("button", "Approve", "button primary");
    approve.type = "submit";
    approve.name = "decision";
    approve.value = "approve";
    const review = live.el("a", "Review…", "button");
    review.href = form.action;
    form.append(csrf, label, note, " ", approve, " ", review);
    actions.append(form);
    return row;
  }

  function decisionText(data) {
    const outcome = REQUEST_STATUSES[data.status] || data.status;
    return outcome + (data.reviewed_by ? " by " + data.reviewed_by : "");
  }

  function startInbox(table) {
    const tbody = table.tBodies[0];
    const maxRows = parseInt(table.dataset.maxRows || "200", 10);
    bind("mcp", function (event) {
      const data = event.data || {};
      if (!data.id) return;
      if (event.type === "mcp.request.created" && data.status === "pending") {
        if (rowOf(tbody, data.id)) return;
        dropEmpty(tbody);
        const row = pendingRow(data, event.ts);
        row.dataset.id = data.id;
        row.classList.add("is-new");
        tbody.append(row); // oldest first, like the page
        while (tbody.rows.length > maxRows) tbody.deleteRow(0);
      } else if (DECIDED[event.type]) {
        const row = rowOf(tbody, data.id);
        const cell = row && row.querySelector(".request-actions");
        if (!cell || cell.dataset.status !== "pending") return;
        cell.dataset.status = data.status;
        row.querySelectorAll("button, input").forEach(function (node) { node.disabled = true; });
        const note = live.el("div", decisionText(data), "small decided-note request-status");
        note.dataset.status = data.status;
        cell.append(note);
        if (data.review_note) cell.append(live.el("div", data.review_note, "small muted"));
        const tools = row.querySelector('[data-field="tools"]');
        if (tools) showRequestTools(tools, data);
      }
    });
  }

  // The tools cell of a request (templates/dashboard/mcp/_request_target.html): for an approved one,
  // what was granted, and what it asked for that was left out.
  function showRequestTools(cell, data) {
    cell.textContent = "";
    if (data.status !== "approved") {
      cell.append(toolNames(data.tool_allow));
      return;
    }
    const granted = Array.isArray(data.granted_tool_allow) ? data.granted_tool_allow : null;
    const asked = Array.isArray(data.tool_allow) ? data.tool_allow : null;
    const grantedLine = live.el("div", null, "granted-tools");
    grantedLine.append(live.el("span", "Granted", "small tools-kicker"), " ", toolNames(granted));
    cell.append(grantedLine);
    if (asked && granted) {
      const leftOut = asked.filter(function (name) { return granted.indexOf(name) === -1; }).sort();
      if (leftOut.length) {
        const line = live.el("div", null, "left-out-tools");
        const list = live.el("span", null, "tool-names");
        leftOut.forEach(function (name) {
          const del = document.createElement("del");
          del.append(live.el("code", name));
          list.append(del);
        });
        line.append(live.el("span", "Asked for, not granted", "small tools-kicker"), " ", list);
        cell.append(line);
      }
    } else if (!asked && granted) {
      cell.append(live.el("div", "Asked for all tools; only these were granted.", "small muted left-out-tools"));
    }
  }

  function showDecision(row, data) {
    const tools = row.querySelector('[data-field="tools"]');
    if (tools) showRequestTools(tools, data);
    const status = row.querySelector('[data-field="status"]');
    if (status) {
      status.dataset.status = data.status;
      status.textContent = REQUEST_STATUSES[data.status] || data.status;
    }
    const review = row.querySelector('[data-field="review"]');
    if (review) {
      review.textContent = data.reviewed_by || "—";
      if (data.review_note) review.append(live.el("div", data.review_note, "muted"));
    }
    row.classList.add("is-new");
  }

  function ownRow(data, ts) {
    const row = document.createElement("tr");
    live.cell(row, "time-cell").append(live.timeNode(data.created_at || ts));
    targetCells(row, data);
    const status = live.el("span", "", "request-status");
    status.dataset.field = "status";
    live.cell(row).append(status);
    const review = live.cell(row, "small");
    review.dataset.field = "review";
    showDecision(row, data);
    return row;
  }

  function startMine(table) {
    const tbody = table.tBodies[0];
    bind("me", function (event) {
      const data = event.data || {};
      if (!data.id || event.type.indexOf("mcp.request.") !== 0) return;
      let row = rowOf(tbody, data.id);
      if (!row) {
        dropEmpty(tbody);
        row = ownRow(data, event.ts);
        row.dataset.id = data.id;
        tbody.insertBefore(row, tbody.firstChild);
        return;
      }
      if (DECIDED[event.type]) showDecision(row, data);
    });
  }

  const servers = document.querySelector("[data-mcp-servers]");
  const server = document.querySelector("[data-mcp-server]");
  const inbox = document.querySelector("[data-mcp-requests]");
  const mine = document.querySelector("[data-my-requests]");
  if (servers) startServers(servers);
  else if (server) startServer(server);
  else if (inbox) startInbox(inbox);
  else if (mine) startMine(mine);
})();
