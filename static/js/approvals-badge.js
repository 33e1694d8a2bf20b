// The pending-approvals count in the navigation, kept current over /ws/events/ (topic "approvals"):
// every approvals event re-reads the count from the server (no arithmetic on events that may be
// missed). On the inbox page a row resolved elsewhere is marked and its buttons disabled.
(function () {
  "use strict";

  const script = document.currentScript;
  const badge = document.querySelector('[data-nav-badge="approvals"]');
  if (!script || !badge || !("WebSocket" in window)) return;
  const countUrl = script.dataset.countUrl;
  const MAX_DELAY_MS = 30000;
  const RESOLVED = { "approval.decided": true, "approval.timed_out": true };
  let attempt = 0;

  function refresh() {
    fetch(countUrl, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (body) {
        if (!body || typeof body.pending !== "number") return;
        badge.textContent = String(body.pending);
        badge.hidden = body.pending === 0;
      })
      .catch(function () {});
  }

  function markResolved(data) {
    const row = document.querySelector('[data-approvals-live] tr[data-id="' + CSS.escape(data.id) + '"]');
    if (!row) return;
    const cell = row.querySelector(".approval-actions");
    if (!cell || cell.dataset.status !== "pending") return;
    cell.dataset.status = data.status;
    row.querySelectorAll("button, input").forEach(function (node) { node.disabled = true; });
    const by = data.decided_by && data.decided_by.label ? " by " + data.decided_by.label : "";
    const note = document.createElement("div");
    note.className = "small resolved-note";
    note.textContent = (data.decision || data.status) + by;
    cell.append(note);
  }

  function connect() {
    const scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    const socket = new WebSocket(scheme + window.location.host + "/ws/events/");
    socket.addEventListener("open", function () {
      socket.send(JSON.stringify({ type: "subscribe", topics: ["approvals"] }));
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
        refresh();  // whatever changed while connecting
      } else if (msg.type === "event" && msg.event && msg.event.topic === "approvals") {
        if (RESOLVED[msg.event.type]) markResolved(msg.event.data || {});
        refresh();
      }
    });
    socket.addEventListener("close", function () {
      const delay = Math.min(MAX_DELAY_MS, 1000 * Math.pow(2, attempt)) * (0.75 + Math.random() * 0.5);
      attempt += 1;
      window.setTimeout(connect, delay);
    });
  }

  refresh();
  connect();
})();
