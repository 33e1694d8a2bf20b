// Live audit log: subscribes to the "audit" topic on /ws/events/ and prepends each new event to the
// table. The socket is authenticated by the session cookie (same origin). Rows are built with
// textContent only, so event data can never inject markup.
(function () {
  "use strict";

  const table = document.querySelector("[data-audit-live]");
  const indicator = document.querySelector("[data-live-indicator]");
  if (!table || !indicator || !("WebSocket" in window)) return;

  const tbody = table.tBodies[0];
  const indicatorText = indicator.querySelector("[data-live-text]");
  const filtersNode = document.getElementById("audit-live-filters");
  const filters = filtersNode ? JSON.parse(filtersNode.textContent || "{}") : {};
  const maxRows = parseInt(table.dataset.maxRows || "50", 10);
  const SUMMARY_CHARS = 160;
  const TITLE_CHARS = 4000;
  const MAX_DELAY_MS = 30000;

  let socket = null;
  let attempt = 0;
  let retryTimer = null;
  let everConnected = false;

  function setState(state, text) {
    indicator.dataset.state = state;
    indicatorText.textContent = text;
  }

  // The same filters the server applied to the page, so a live row never contradicts them.
  function matches(data) {
    if (filters.verb) {
      const verb = filters.verb;
      if (verb.endsWith("*") || verb.endsWith(".")) {
        if (!data.verb.startsWith(verb.replace(/\*+$/, ""))) return false;
      } else if (data.verb !== verb) {
        return false;
      }
    }
    if (filters.actor_kind && data.actor.kind !== filters.actor_kind) return false;
    if (filters.actor_id && data.actor.id !== filters.actor_id) return false;
    if (filters.target_type && data.target.type !== filters.target_type) return false;
    if (filters.target_id && data.target.id !== filters.target_id) return false;
    return true;
  }

  // One line of JSON with sorted keys, like the server's compact_json filter.
  function toJson(v) {
    if (Array.isArray(v)) return "[" + v.map(toJson).join(", ") + "]";
    if (v && typeof v === "object") {
      return "{" + Object.keys(v).sort().map(function (k) { return JSON.stringify(k) + ": " + toJson(v[k]); }).join(", ") + "}";
    }
    return JSON.stringify(v);
  }

  function summary(value, limit) {
    if (value === null || value === undefined || value === "") return "";
    if (typeof value === "object" && Object.keys(value).length === 0) return "";
    const text = toJson(value);
    return text.length <= limit ? text : text.slice(0, limit - 1) + "…";
  }

  function cell(row, className) {
    const td = row.insertCell();
    if (className) td.className = className;
    return td;
  }

  function el(tag, text, className) {
    const node = document.createElement(tag);
    node.textContent = text;
    if (className) node.className = className;
    return node;
  }

  function addRow(data) {
    if (!data || !data.id || !matches(data)) return;
    if (tbody.querySelector('tr[data-id="' + CSS.escape(data.id) + '"]')) return;
    const empty = tbody.querySelector("tr.empty");
    if (empty) empty.remove();

    const row = document.createElement("tr");
    row.dataset.id = data.id;
    row.className = "is-new";

    const time = el("time", new Date(data.created_at).toISOString().slice(0, 19).replace("T", " "));
    time.dateTime = data.created_at;
    cell(row, "nowrap").append(time);

    const actor = cell(row);
    actor.append(el("span", data.actor.label || data.actor.id, "actor"), " ", el("span", data.actor.kind, "badge"));

    cell(row).append(el("code", data.verb));

    const target = cell(row);
    target.append(el("span", data.target.type, "muted"));
    if (data.target.id) {
      const id = data.target.id.length > 14 ? data.target.id.slice(0, 13) + "…" : data.target.id;
      target.append(" ", el("code", id, "small"));
    }

    const details = el("span", summary(data.data, SUMMARY_CHARS));
    details.title = summary(data.data, TITLE_CHARS);
    cell(row, "details mono small").append(details);

    tbody.insertBefore(row, tbody.firstChild);
    while (tbody.rows.length > maxRows) tbody.deleteRow(-1);
  }

  function scheduleReconnect() {
    if (retryTimer) return;
    // Exponential backoff with jitter: 1s, 2s, 4s … capped at 30s.
    const delay = Math.min(MAX_DELAY_MS, 1000 * Math.pow(2, attempt)) * (0.75 + Math.random() * 0.5);
    attempt += 1;
    setState("reconnecting", "Reconnecting in " + Math.round(delay / 1000) + "s…");
    retryTimer = window.setTimeout(function () {
      retryTimer = null;
      connect();
    }, delay);
  }

  function connect() {
    const scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    setState(everConnected ? "reconnecting" : "connecting", everConnected ? "Reconnecting…" : "Connecting…");
    try {
      socket = new WebSocket(scheme + window.location.host + "/ws/events/");
    } catch (err) {
      scheduleReconnect();
      return;
    }
    socket.addEventListener("open", function () {
      socket.send(JSON.stringify({ type: "subscribe", topics: ["audit"] }));
    });
    socket.addEventListener("message", function (message) {
      let msg;
      try {
        msg = JSON.parse(message.data);
      } catch (err) {
        return;
      }
      if (msg.type === "subscribed") {
        attempt = 0;
        // After a drop, events sent while disconnected were not received: say so instead of hiding it.
        setState("live", everConnected ? "Live (reload to see events missed while offline)" : "Live");
        everConnected = true;
      } else if (msg.type === "event" && msg.event && msg.event.type === "audit.event") {
        addRow(msg.event.data);
      } else if (msg.type === "error") {
        setState("error", "Live updates unavailable: " + msg.message);
      }
    });
    socket.addEventListener("close", function () {
      socket = null;
      scheduleReconnect();
    });
  }

  // Coming back online or to the tab: retry at once instead of waiting out the backoff.
  function retryNow() {
    if (socket || !retryTimer) return;
    window.clearTimeout(retryTimer);
    retryTimer = null;
    attempt = 0;
    connect();
  }
  window.addEventListener("online", retryNow);
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "visible") retryNow();
  });

  connect();
})();
