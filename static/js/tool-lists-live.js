// The custom tools and credentialed CLIs lists, live for administrators over the page's one socket
// (live-socket.js). The page's config names the topic ("custom_tools" or "secure_cli"), the event type
// prefix of its rows ("custom_tool." or "secure_cli.binary.") and a row's URL with a placeholder id.
// An update changes the row's state and timeout; a deletion marks the row; a new item gets a row with
// a link to it. The cells mirror templates/dashboard/{custom_tools,secure_cli}/list.html. Event data
// only ever becomes text, never markup.
(function () {
  "use strict";

  const socket = window.ToolgateSocket;
  const holder = document.getElementById("tool-list-live-config");
  const table = document.querySelector("table[data-live-list]");
  if (!socket || !holder || !table) return;

  const config = JSON.parse(holder.textContent);
  const PLACEHOLDER = "00000000-0000-0000-0000-000000000000";
  const tbody = table.tBodies[0];
  const columns = table.tHead.rows[0].cells.length;

  function text(tag, value, className) {
    const node = document.createElement(tag);
    node.textContent = value;
    if (className) node.className = className;
    return node;
  }

  function rowOf(id) {
    return tbody.querySelector('tr[data-id="' + CSS.escape(String(id)) + '"]');
  }

  function showState(row, data) {
    const enabled = row.querySelector('[data-field="enabled"]');
    if (enabled && typeof data.enabled === "boolean") {
      enabled.dataset.enabled = String(data.enabled);
      enabled.textContent = "";
      enabled.append(text("span", data.enabled ? "enabled" : "disabled", data.enabled ? "state-on" : "state-off"));
      const toggle = row.querySelector('button[name="enabled"]');
      if (toggle && toggle.firstChild && toggle.firstChild.nodeType === 3) {
        toggle.value = data.enabled ? "0" : "1";
        toggle.firstChild.nodeValue = data.enabled ? "Disable" : "Enable";
      }
    }
    const timeout = row.querySelector('[data-field="timeout"]');
    if (timeout && typeof data.timeout_seconds === "number") timeout.textContent = data.timeout_seconds + " s";
    const scope = row.querySelector('[data-field="scope"]');
    if (scope && "scope" in data) {
      scope.textContent = data.agent ? "agent " : "global";
      if (data.agent) scope.append(text("code", String(data.agent)));
    }
    if (scope && typeof data.is_global === "boolean") {
      scope.textContent = data.is_global ? "global" : "granted agents only";
    }
    const env = row.querySelector('[data-field="env"]');
    if (env && Array.isArray(data.env)) {
      env.textContent = "";
      if (!data.env.length) env.textContent = "none";
      data.env.forEach(function (name, i) {
        if (i) env.append(", ");
        env.append(text("code", String(name)));
      });
    }
    const name = row.querySelector('[data-field="name"]');
    const label = data.name || data.binary_name;
    if (name && typeof label === "string") name.textContent = label;
  }

  function newRow(data) {
    const row = document.createElement("tr");
    row.dataset.id = data.id;
    row.className = "is-new";
    const first = document.createElement("td");
    const link = document.createElement("a");
    link.href = config.url.replace(PLACEHOLDER, data.id);
    const name = text("code", "");
    name.dataset.field = "name";
    link.append(name);
    first.append(link);
    row.append(first);
    ["scope", "enabled", "timeout", "env"].forEach(function (field) {
      if (row.cells.length >= columns) return;
      if (field === "env" && !("is_global" in data)) return;
      const cell = document.createElement("td");
      cell.dataset.field = field;
      row.append(cell);
    });
    while (row.cells.length < columns) {
      const cell = document.createElement("td");
      cell.className = "row-actions";
      const open = text("a", "Open");
      open.href = link.href;
      cell.append(open);
      row.append(cell);
    }
    showState(row, data);
    return row;
  }

  socket.bindIndicator(document.querySelector("[data-live-indicator]"), "changes");
  socket.subscribe(config.topic, function (event) {
    const data = event.data || {};
    if (typeof event.type !== "string" || event.type.indexOf(config.prefix) !== 0 || !data.id) return;
    const verb = event.type.slice(config.prefix.length);
    let row = rowOf(data.id);
    if (verb === "deleted") {
      if (row) {
        row.classList.add("tool-off");
        row.querySelectorAll("button, input").forEach(function (node) { node.disabled = true; });
        const state = row.querySelector('[data-field="enabled"]');
        if (state) state.textContent = "deleted";
      }
      return;
    }
    if (verb === "created" && !row) {
      const empty = tbody.querySelector("tr.empty");
      if (empty) empty.remove();
      row = newRow(data);
      tbody.insertBefore(row, tbody.firstChild);
      return;
    }
    if (verb === "updated" && row) showState(row, data);
  });
})();
